package train

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// FuzzResume: Resume of a checkpoint whose state file holds any bytes
// never panics; an error is one line naming the state or optimiser file;
// a state it accepts puts the trainer at a step of the run with its data
// cursor inside the data, and the next step runs.
func FuzzResume(f *testing.F) {
	m, err := model.New[float32](model.Config{HiddenSize: 8, IntermediateSize: 16, NumHiddenLayers: 1,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 16})
	if err != nil {
		f.Fatal(err)
	}
	docs := []Document{{Path: "a.go", Dir: ".", Text: []byte(strings.Repeat("package a\n\nfunc F() int { return 1 }\n", 4))}}
	data := Pack(docs, byteEncoder{}, 256, 16, true)
	o := Options{BatchSize: 2, Accum: 1, Steps: 6, Schedule: Schedule{Peak: 1e-3, Min: 1e-4, Warmup: 1, Total: 6},
		Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Clip: 1, Seed: 3}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	tr, err := NewTrainer(m, p, data, o)
	if err != nil {
		f.Fatal(err)
	}
	for range 2 {
		if _, err := tr.TrainStep(); err != nil {
			f.Fatal(err)
		}
	}
	files, err := tr.Files()
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	// the checkpoint as written resumes: the harness reaches the end
	if fresh, err := NewTrainer(m, p, data, o); err != nil || fresh.Resume(dir) != nil || fresh.Step != 2 {
		f.Fatalf("the checkpoint as written does not resume at step 2: %v", err)
	}
	state := files[StateFile]
	f.Add(state)
	f.Add(bytes.Replace(state, []byte(`"step": 2`), []byte(`"step": -5`), 1))
	f.Add(bytes.Replace(state, []byte(`"next": `), []byte(`"next": 1`), 1))
	f.Add(bytes.Replace(state, []byte(`"epoch": 0`), []byte(`"epoch": 1000000000`), 1))
	f.Add(bytes.Replace(state, []byte(`"seed": `), []byte(`"seed": 9`), 1))
	f.Add([]byte(`{"step": 2}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(""))
	path := filepath.Join(dir, StateFile)
	f.Fuzz(func(t *testing.T, st []byte) {
		if err := os.WriteFile(path, st, 0o644); err != nil {
			t.Fatal(err)
		}
		fresh, err := NewTrainer(m, p, data, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := fresh.Resume(dir); err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "train: resume: ") || strings.Contains(msg, "\n") ||
				!strings.Contains(msg, StateFile) && !strings.Contains(msg, OptimizerFile) {
				t.Fatalf("error %q is not one line naming the state or optimiser file", msg)
			}
			return
		}
		if fresh.Step < 0 || fresh.Step > o.Steps || fresh.Opt.Step != fresh.Step {
			t.Fatalf("resumed at step %d (optimiser %d) of %d", fresh.Step, fresh.Opt.Step, o.Steps)
		}
		if c := fresh.Cursor; c.Epoch < 0 || c.Next < 0 || c.Next > len(data.Tokens) {
			t.Fatalf("resumed with the data cursor at epoch %d, next %d of %d windows", c.Epoch, c.Next, len(data.Tokens))
		}
		if fresh.Step < o.Steps {
			if _, err := fresh.TrainStep(); err != nil {
				t.Fatalf("the step after a resume: %v", err)
			}
		}
	})
}
