package dense

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/train"
)

// State is where a training run of the dual encoder is: with the weights
// and the optimiser's moments, enough to continue it exactly.
type State struct {
	Step   int     `json:"step"`
	Epoch  int     `json:"epoch"`
	Next   int     `json:"next"`
	Seed   uint64  `json:"seed"`
	Pairs  int     `json:"pairs"`                 // training pairs: a resumed run must see the same data
	Data   string  `json:"data_sha256,omitempty"` // their train.Fingerprint
	LogTau float32 `json:"log_tau"`               // the learned temperature's parameter (0 when τ is fixed)
	// Options are the trainer's: a resumed run must be trained the same way.
	Options Options `json:"options"`
}

// Files returns the checkpoint files of the run beside the model's: the
// optimiser's moments (train.OptimizerFile) and the state
// (train.StateFile).
func (t *Trainer) Files() (map[string][]byte, error) {
	opt, err := train.MarshalMoments(t.adam, t.params)
	if err != nil {
		return nil, err
	}
	st := State{Step: t.Step, Epoch: t.cur.Epoch, Next: t.cur.Next, Seed: t.cur.Seed, Pairs: len(t.Data.Queries), Data: t.Data.fingerprint(), Options: t.Opt}
	if t.logTau != nil {
		st.LogTau = t.logTau[0]
	}
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{train.OptimizerFile: opt, train.StateFile: append(js, '\n')}, nil
}

// Resume restores the optimiser, the data cursor and the temperature from
// a checkpoint directory written with Files; the weights are the caller's
// to load (Load). It returns an error naming the file when the checkpoint
// belongs to another run: other options, other data.
func (t *Trainer) Resume(dir string) error {
	data, err := train.ReadStateFile(dir)
	if err != nil {
		return fmt.Errorf("dense: resume: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("dense: resume: %s: %w", filepath.Join(dir, train.StateFile), jsonerr.Describe(err))
	}
	saved := train.Saved{File: filepath.Join(dir, train.StateFile), Step: st.Step, Steps: st.Options.Schedule.Total, Epoch: st.Epoch, Next: st.Next,
		Items: st.Pairs, ItemsNow: len(t.Data.Queries), What: "training pairs", Data: st.Data, DataNow: t.Data.fingerprint(),
		Options: st.Options, OptionsNow: t.Opt}
	if err := saved.Check(); err != nil {
		return fmt.Errorf("dense: resume: %w", err)
	}
	if err := train.ReadMoments(t.adam, t.params, filepath.Join(dir, train.OptimizerFile)); err != nil {
		return fmt.Errorf("dense: resume: %w", err)
	}
	if t.adam.Step != st.Step {
		return fmt.Errorf("dense: resume: %s holds the optimiser of step %d, %s step %d: the checkpoint is damaged", train.OptimizerFile, t.adam.Step, train.StateFile, st.Step)
	}
	t.Step = st.Step
	t.cur.Seed = st.Seed
	t.cur.Restore(st.Epoch, st.Next)
	if t.logTau != nil {
		t.logTau[0] = st.LogTau
		t.Tau = math.Exp(float64(st.LogTau))
	}
	return nil
}

// fingerprint is the train.Fingerprint of the pairs and their negatives,
// computed once (the data does not change during a run).
func (d *Data) fingerprint() string {
	if d.print == "" {
		d.print = train.Fingerprint(d.Queries, d.Codes, d.Negatives)
	}
	return d.print
}

// StepsDone returns the optimiser steps taken (train.Resumable).
func (t *Trainer) StepsDone() int { return t.Step }
