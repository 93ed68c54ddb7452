package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/output"
)

// counter is the smallest trainable model a Session can own: its state is
// the step and a planned total, its "weights" the step as text. It shows
// that a new model needs its trainer and its save, and no copy of the
// run folder's rules.
type counter struct {
	step, total int
	failAt      int // the step whose loss is not finite (0: none)
}

func (c *counter) Files() (map[string][]byte, error) {
	st, err := json.Marshal(map[string]any{"step": c.step, "options": map[string]any{"Schedule": Schedule{Total: c.total}}})
	return map[string][]byte{StateFile: st}, err
}

func (c *counter) Resume(dir string) error {
	data, err := ReadStateFile(dir)
	if err != nil {
		return err
	}
	var st struct {
		Step    int
		Options struct{ Schedule Schedule }
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	if st.Options.Schedule.Total != c.total {
		return fmt.Errorf("%s: the run was trained with other options (-steps %d (now %d))", StateFile, st.Options.Schedule.Total, c.total)
	}
	c.step = st.Step
	return nil
}

func (c *counter) StepsDone() int { return c.step }

func (c *counter) loop() *Loop {
	return &Loop{Steps: c.total, Columns: []string{"step", "loss"}, Step: func() (Record, error) {
		if c.step+1 == c.failAt {
			return nil, ErrNonFinite
		}
		c.step++
		return Record{"step": float64(c.step), "loss": 1 / float64(c.step)}, nil
	}}
}

func saveCounter(c *counter) Saver {
	return func(dir string, extra map[string][]byte) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		extra["weights"] = []byte(fmt.Sprint(c.step))
		for name, data := range extra {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func counterLayout(out string) Layout {
	return Layout{Out: out, Checkpoint: filepath.Join(out, "ckpt"), Curves: filepath.Join(out, "curves.csv")}
}

// TestSessionRunFolder: a run interrupted after 3 of 6 steps is saved; the
// folder is then refused without -resume (saying what it holds), with
// both -resume and -force, and to a second writer; -resume continues at
// step 3 with the curves so far, and ends at 6.
func TestSessionRunFolder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	c := &counter{total: 6}
	s, err := OpenSession(SessionOptions{Layout: counterLayout(out)}, Events{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSession(SessionOptions{Layout: counterLayout(out), Force: true}, Events{}); !errors.Is(err, output.ErrLocked) {
		t.Errorf("a second writer of the folder: %v, want it locked", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := c.loop()
	l.Progress = func(p Progress) {
		if p.Step == 3 {
			cancel()
		}
	}
	if r, err := s.Train(ctx, l, c, saveCounter(c)); !errors.Is(err, context.Canceled) || r.To != 3 {
		t.Fatalf("interrupted run: step %d, %v; want step 3, context.Canceled", r.To, err)
	}
	s.Close()
	if w, err := os.ReadFile(filepath.Join(out, "ckpt", "weights")); err != nil || string(w) != "3" {
		t.Fatalf("the interrupted run saved %q (%v), want step 3", w, err)
	}

	_, err = OpenSession(SessionOptions{Layout: counterLayout(out)}, Events{})
	if !errors.Is(err, output.ErrExists) || !strings.Contains(err.Error(), "it holds a run at step 3 of 6") || !strings.Contains(err.Error(), Hint) {
		t.Errorf("a plain run into the folder: %v, want a refusal saying it holds a run at step 3 of 6 and %q", err, Hint)
	}
	if _, err := OpenSession(SessionOptions{Layout: counterLayout(out), Resume: true, Force: true}, Events{}); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("-resume with -force: %v", err)
	}

	var logs []string
	s, err = OpenSession(SessionOptions{Layout: counterLayout(out), Resume: true}, Events{Log: func(m string) { logs = append(logs, m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c = &counter{total: 6}
	l = c.loop()
	if err := s.Restore(c, l); err != nil {
		t.Fatal(err)
	}
	if c.step != 3 || len(l.Rows) != 3 || !strings.Contains(strings.Join(logs, "\n"), "at step 3 of 6") {
		t.Errorf("restored step %d with %d rows, logs %q; want step 3, 3 rows, a line saying so", c.step, len(l.Rows), logs)
	}
	if r, err := s.Train(context.Background(), l, c, saveCounter(c)); err != nil || r.From != 3 || r.To != 6 {
		t.Errorf("resumed run: steps %d…%d, %v; want 3…6", r.From, r.To, err)
	}
	if rows, err := ReadCurves(s.Curves, 6); err != nil || len(rows) != 6 {
		t.Errorf("the curves hold %d rows (%v), want 6", len(rows), err)
	}
}

// TestSessionResumeRefusals: -resume of a folder without a training state,
// or whose checkpoint is of another kind than the model's, is refused
// before any work, naming the folder.
func TestSessionResumeRefusals(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(out, "ckpt"), 0o755)
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("x"), 0o644)
	_, err := OpenSession(SessionOptions{Layout: counterLayout(out), Resume: true}, Events{})
	if err == nil || !strings.Contains(err.Error(), "-resume") || !strings.Contains(err.Error(), "holds no training state") {
		t.Errorf("resume of a folder without a state: %v", err)
	}
	os.WriteFile(filepath.Join(out, "ckpt", StateFile), []byte(`{"step": 1}`), 0o644)
	os.WriteFile(filepath.Join(out, "ckpt", "config.json"), []byte(`{"attnlab_kind": "dual-encoder"}`), 0o644)
	_, err = OpenSession(SessionOptions{Layout: counterLayout(out), Resume: true, Kind: "language-model"}, Events{})
	if err == nil || !strings.Contains(err.Error(), "holds a dual-encoder checkpoint, not a language-model") {
		t.Errorf("resume of another kind: %v", err)
	}
}

// TestSessionNonFiniteLeavesNothing: a run whose first step is not finite
// keeps nothing: the files given to Keep, the curves and the folder go.
func TestSessionNonFiniteLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "run")
	s, err := OpenSession(SessionOptions{Layout: counterLayout(out)}, Events{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.MakeDir(); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(out, "heldout.txt")
	os.WriteFile(list, []byte("a.go\n"), 0o644)
	s.Keep(list)
	c := &counter{total: 4, failAt: 1}
	_, err = s.Train(context.Background(), c.loop(), c, saveCounter(c))
	if nf := (*NonFiniteError)(nil); !errors.As(err, &nf) || nf.Kept != -1 {
		t.Fatalf("a non-finite first step: %v, want a NonFiniteError keeping nothing", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(out)
		t.Errorf("the run folder is left (%v) with %d entries", err, len(entries))
	}
}
