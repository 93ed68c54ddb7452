package train

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// TestResumeIsExact: 5 steps, a checkpoint, a fresh process's worth of
// loading, 5 more steps give the same losses and bit-identical weights as 10
// uninterrupted steps.
func TestResumeIsExact(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { resumeIsExact(t, shards) })
	}
}

func resumeIsExact(t *testing.T, shards int) {
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	o := Options{BatchSize: 4, Accum: 2, Steps: 10, Schedule: Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 3, Total: 10},
		Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 5, Shards: shards}
	start := func() *Trainer[float32] {
		m := smallModel(t)
		p := m.NewParams()
		m.Init(p, 0.02, 9)
		tr, err := NewTrainer(m, p, data, o)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	straight := start()
	var want []float64
	for range 10 {
		r, err := straight.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Loss)
	}

	first := start()
	for range 5 {
		if _, err := first.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	files, err := first.Files()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Model.Save(dir, first.Params, files); err != nil {
		t.Fatal(err)
	}
	m, p, err := model.Load[float32](dir)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := NewTrainer(m, p, data, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := resumed.Resume(dir); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 10; i++ {
		r, err := resumed.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if r.Loss != want[i] {
			t.Errorf("step %d: resumed loss %v, uninterrupted %v", i+1, r.Loss, want[i])
		}
	}
	a, b := straight.Model.Tensors(straight.Params), resumed.Model.Tensors(resumed.Params)
	for i := range a {
		for j := range a[i].Data {
			if a[i].Data[j] != b[i].Data[j] {
				t.Fatalf("%s[%d]: resumed %v, uninterrupted %v", a[i].Name, j, b[i].Data[j], a[i].Data[j])
			}
		}
	}

	// Another run's checkpoint is refused.
	other := o
	other.Seed = 6
	tr, _ := NewTrainer(m, p, data, other)
	if err := tr.Resume(dir); err == nil {
		t.Error("a checkpoint of other options was accepted")
	}
}
