package train

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestReadMomentsRefusesBadState: optimiser moments holding a NaN or an
// infinity, or a negative second moment (√v is NaN), are refused, naming
// the file, the tensor and the element; the state as written reads back.
func TestReadMomentsRefusesBadState(t *testing.T) {
	x, g := []float32{1, 2, 3}, make([]float32, 3)
	params := []Param[float32]{{Name: "w", X: x, Grad: g}}
	opt := NewAdamW[float32](0.9, 0.95, 1e-8, 0)
	opt.M = map[string][]float32{"w": {0.1, 0.2, 0.3}}
	opt.V = map[string][]float32{"w": {0.01, 0.02, 0.03}}
	opt.Step = 4
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		tensor string
		value  float32
		want   string
	}{
		{"good", "", 0, ""},
		{"nan-m", "m", float32(math.NaN()), `optimizer.safetensors: tensor "m.w": element 1 is NaN; the optimiser's moments must be finite`},
		{"inf-v", "v", float32(math.Inf(1)), `optimizer.safetensors: tensor "v.w": element 1 is +Inf`},
		{"negative-v", "v", -0.5, `optimizer.safetensors: tensor "v.w": element 1 is -0.5; a second moment is never negative`},
	} {
		bad := &AdamW[float32]{M: map[string][]float32{"w": slices.Clone(opt.M["w"])}, V: map[string][]float32{"w": slices.Clone(opt.V["w"])}, Step: opt.Step}
		switch tc.tensor {
		case "m":
			bad.M["w"][1] = tc.value
		case "v":
			bad.V["w"][1] = tc.value
		}
		data, err := MarshalMoments(bad, params)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, tc.name, OptimizerFile)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		back := NewAdamW[float32](0.9, 0.95, 1e-8, 0)
		err = ReadMoments(back, params, path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (back.Step != 4 || !slices.Equal(back.V["w"], opt.V["w"])):
			t.Errorf("%s: read back step %d, v %v", tc.name, back.Step, back.V["w"])
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
