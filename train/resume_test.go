package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
)

func TestFingerprint(t *testing.T) {
	a := [][]int{{1, 2}, {3}}
	if Fingerprint(a) != Fingerprint([][]int{{1, 2}, {3}}) {
		t.Error("the same data, two fingerprints")
	}
	for _, b := range [][][]int{{{1}, {2, 3}}, {{3}, {1, 2}}, {{1, 2}, {4}}, {{1, 2}}, {{1, 2}, {3}, {}}} {
		if Fingerprint(a) == Fingerprint(b) {
			t.Errorf("%v and %v share a fingerprint", a, b)
		}
	}
	if Fingerprint(a, nil) == Fingerprint(a) || Fingerprint(nil, a) == Fingerprint(a, nil) {
		t.Error("lists are not told apart")
	}
}

func TestDiffOptions(t *testing.T) {
	o := Options{BatchSize: 4, Steps: 10, Schedule: Schedule{Peak: 1e-3, Total: 10}, Beta1: 0.9}
	if d := DiffOptions(o, o); len(d) != 0 {
		t.Errorf("no difference: %q", d)
	}
	n := o
	n.Steps, n.Schedule.Total, n.Schedule.Peak, n.Beta1 = 56, 56, 3e-4, 0.8
	got := strings.Join(DiffOptions(o, n), "; ")
	if want := "-steps 10 (now 56); -lr 0.001 (now 0.0003); Beta1 0.9 (now 0.8)"; got != want {
		t.Errorf("diff %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("options of two types: no panic")
		}
	}()
	DiffOptions(o, Schedule{})
}

func TestSavedCheck(t *testing.T) {
	o := Options{Steps: 10}
	ok := Saved{File: "s.json", Step: 5, Steps: 10, Epoch: 0, Next: 3, Items: 8, ItemsNow: 8, What: "windows", Data: "x", DataNow: "x", Options: o, OptionsNow: o}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	legacy := ok
	legacy.Data = "" // written before fingerprints
	if err := legacy.Check(); err != nil {
		t.Errorf("a state without a fingerprint: %v", err)
	}
	for _, c := range []struct {
		edit func(*Saved)
		want string
	}{
		{func(s *Saved) { s.DataNow = "y" }, "s.json: the run was trained on other windows (8 of them, as here, but not these)"},
		{func(s *Saved) { s.ItemsNow = 9 }, "s.json: the run was trained on 8 windows, this data has 9"},
		{func(s *Saved) { s.Step = -5 }, "s.json: saved step -5 is not one of the run's steps 0…10: the state is damaged"},
		{func(s *Saved) { s.Step = 11 }, "saved step 11 is not one"},
		{func(s *Saved) { s.Next = 9 }, "data cursor epoch 0, next 9 of 8 windows"},
		{func(s *Saved) { s.Next = -1 }, "next -1"},
		{func(s *Saved) { s.Epoch = -1 }, "epoch -1"},
		{func(s *Saved) { s.OptionsNow = Options{Steps: 12} }, "s.json: the run was trained with other options (-steps 10 (now 12)): resume with the run's own flags, or -force starts over"},
	} {
		s := ok
		c.edit(&s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	edge := ok
	edge.Step, edge.Next = 10, 8
	if err := edge.Check(); err != nil {
		t.Errorf("the last step and the cursor at the end: %v", err)
	}
	edge.Step, edge.Next = 0, 0
	if err := edge.Check(); err != nil {
		t.Errorf("step 0 and the cursor at the start: %v", err)
	}
}

// TestResumeRefusesAnotherRun: a checkpoint resumed on other windows of
// the same count, with a damaged step, or with other options is refused,
// naming the state file and what differs.
func TestResumeRefusesAnotherRun(t *testing.T) {
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	o := Options{BatchSize: 2, Accum: 1, Steps: 4, Schedule: Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 1, Total: 4},
		Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Clip: 1, Seed: 5}
	start := func(d *Windows, o Options) *Trainer[float32] {
		m := smallModel(t)
		p := m.NewParams()
		m.Init(p, 0.02, 9)
		tr, err := NewTrainer(m, p, d, o)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	first := start(data, o)
	for range 2 {
		if _, err := first.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	files, _ := first.Files()
	if err := first.Model.Save(dir, first.Params, files); err != nil {
		t.Fatal(err)
	}
	resume := func(d *Windows, o Options) error {
		m, p, err := model.Load[float32](dir)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewTrainer(m, p, d, o)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Resume(dir)
	}
	if err := resume(data, o); err != nil {
		t.Fatalf("the same run: %v", err)
	}
	// other windows of the same count: one token changed
	other := &Windows{Tokens: make([][]int, len(data.Tokens)), Bytes: data.Bytes}
	for i, w := range data.Tokens {
		other.Tokens[i] = append([]int(nil), w...)
	}
	other.Tokens[len(other.Tokens)/2][3]++
	if err := resume(other, o); err == nil || !strings.Contains(err.Error(), "trained on other training windows") {
		t.Errorf("other data of the same count: %v", err)
	}
	o2 := o
	o2.Schedule.Peak = 1e-3
	if err := resume(data, o2); err == nil || !strings.Contains(err.Error(), "-lr 0.003 (now 0.001)") {
		t.Errorf("another -lr: %v", err)
	}
	// a damaged state
	st := filepath.Join(dir, StateFile)
	b, _ := os.ReadFile(st)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["step"] = -5
	b, _ = json.Marshal(m)
	os.WriteFile(st, b, 0o644)
	if err := resume(data, o); err == nil || !strings.Contains(err.Error(), "saved step -5") {
		t.Errorf("step -5: %v", err)
	}
	m["step"] = 3 // within the run, but not the optimiser's
	b, _ = json.Marshal(m)
	os.WriteFile(st, b, 0o644)
	if err := resume(data, o); err == nil || !strings.Contains(err.Error(), "holds the optimiser of step 2, trainer_state.json step 3") {
		t.Errorf("step 3 with the optimiser of step 2: %v", err)
	}
}
