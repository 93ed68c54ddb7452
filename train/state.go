package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"
)

// Files a training checkpoint holds beside the model's.
const (
	OptimizerFile = "optimizer.safetensors"
	StateFile     = "trainer_state.json"
)

// MaxStateBytes bounds a state file: it holds a few hundred bytes of
// steps, cursor and options.
const MaxStateBytes = 1 << 20

// ReadStateFile returns the bytes of the state file in dir, refusing one
// larger than MaxStateBytes (or a stream that does not end) with an error
// naming it.
func ReadStateFile(dir string) ([]byte, error) {
	return readlimit.File(filepath.Join(dir, StateFile), MaxStateBytes)
}

// State is where a run is: enough, with the parameters and the optimiser's
// moments, to continue it exactly.
type State struct {
	Step    int     `json:"step"`
	Epoch   int     `json:"epoch"`
	Next    int     `json:"next"`
	Seed    uint64  `json:"seed"`
	Windows int     `json:"windows"`               // training windows: a resumed run must see the same data
	Data    string  `json:"data_sha256,omitempty"` // their Fingerprint
	Options Options `json:"options"`
}

// Files returns the extra checkpoint files of the run: the optimiser's
// moments (as float32 or float64, like the parameters) and the state.
func (t *Trainer[T]) Files() (map[string][]byte, error) {
	opt, err := MarshalMoments(t.Opt, t.params)
	if err != nil {
		return nil, err
	}
	st, err := json.MarshalIndent(State{Step: t.Step, Epoch: t.Cursor.Epoch, Next: t.Cursor.Next, Seed: t.Cursor.Seed,
		Windows: len(t.Data.Tokens), Data: t.dataFingerprint(), Options: t.Options}, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{OptimizerFile: opt, StateFile: append(st, '\n')}, nil
}

// dataFingerprint is the Fingerprint of the training windows, computed
// once.
func (t *Trainer[T]) dataFingerprint() string {
	if t.fingerprint == "" {
		t.fingerprint = Fingerprint(t.Data.Tokens)
	}
	return t.fingerprint
}

// MarshalMoments returns the safetensors file of opt's first and second
// moments of params ("m.NAME", "v.NAME", as float32 or float64 like the
// parameters) with its step count in the metadata: what an AdamW needs,
// beside the parameters, to continue exactly.
func MarshalMoments[T nn.Float](opt *AdamW[T], params []Param[T]) ([]byte, error) {
	f := safetensors.New()
	f.Metadata = map[string]string{"step": strconv.Itoa(opt.Step)}
	for _, p := range params {
		for _, kv := range []struct {
			prefix string
			data   []T
		}{{"m.", opt.M[p.Name]}, {"v.", opt.V[p.Name]}} {
			data := kv.data
			if data == nil {
				data = make([]T, len(p.X))
			}
			safetensors.Set(f, kv.prefix+p.Name, []int{len(data)}, data)
		}
	}
	return f.MarshalBinary()
}

// ReadMoments restores opt's moments of params and its step count from a
// file written by MarshalMoments. It returns an error naming the file and
// tensor when one is missing or of another shape, holds a NaN or an
// infinity, or (a second moment) a negative value.
func ReadMoments[T nn.Float](opt *AdamW[T], params []Param[T], path string) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	step, err := strconv.Atoi(f.Metadata["step"])
	if err != nil {
		return fmt.Errorf("%s: metadata step %q: %v", name, f.Metadata["step"], err)
	}
	m, v := map[string][]T{}, map[string][]T{}
	for _, p := range params {
		for _, kv := range []struct {
			prefix string
			dst    map[string][]T
		}{{"m.", m}, {"v.", v}} {
			w, shape, err := safetensors.Get[T](f, kv.prefix+p.Name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if !slices.Equal(shape, []int{len(p.X)}) {
				return fmt.Errorf("%s: tensor %q has shape %v, want [%d]", name, kv.prefix+p.Name, shape, len(p.X))
			}
			if i := vec.NonFinite(w); i >= 0 {
				return fmt.Errorf("%s: tensor %q: element %d is %v; the optimiser's moments must be finite", name, kv.prefix+p.Name, i, w[i])
			}
			if kv.prefix == "v." {
				if i := slices.IndexFunc(w, func(e T) bool { return e < 0 }); i >= 0 {
					return fmt.Errorf("%s: tensor %q: element %d is %v; a second moment is never negative", name, kv.prefix+p.Name, i, w[i])
				}
			}
			kv.dst[p.Name] = w
		}
	}
	opt.M, opt.V, opt.Step = m, v, step
	return nil
}

// Resume restores the optimiser and the data cursor from a checkpoint
// directory written with Files. The parameters are the caller's to load (with
// model.Load). It returns an error naming the file and field when the
// checkpoint belongs to another run: other options, other data.
func (t *Trainer[T]) Resume(dir string) error {
	data, err := ReadStateFile(dir)
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("train: resume: %s: %w", filepath.Join(dir, StateFile), jsonerr.Describe(err))
	}
	saved := Saved{File: filepath.Join(dir, StateFile), Step: st.Step, Steps: st.Options.Steps, Epoch: st.Epoch, Next: st.Next,
		Items: st.Windows, ItemsNow: len(t.Data.Tokens), What: "training windows", Data: st.Data, DataNow: t.dataFingerprint(),
		Options: st.Options, OptionsNow: t.Options}
	if err := saved.Check(); err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	if err := ReadMoments(t.Opt, t.params, filepath.Join(dir, OptimizerFile)); err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	if t.Opt.Step != st.Step {
		return fmt.Errorf("train: resume: %s holds the optimiser of step %d, %s step %d: the checkpoint is damaged", OptimizerFile, t.Opt.Step, StateFile, st.Step)
	}
	t.Step = st.Step
	t.Cursor.Seed = st.Seed
	t.Cursor.Restore(st.Epoch, st.Next)
	return nil
}

// StepsDone returns the optimiser steps taken (Resumable).
func (t *Trainer[T]) StepsDone() int { return t.Step }
