package rerank

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/train"
)

// HeadOptimizerFile holds the moments of the score head's optimiser in a
// training checkpoint, beside train.OptimizerFile (the encoder's) and
// train.StateFile.
const HeadOptimizerFile = "head_optimizer.safetensors"

// State is where a training run of the reranker is: with the weights and
// the optimisers' moments, enough to continue it exactly.
type State struct {
	Step  int    `json:"step"`
	Epoch int    `json:"epoch"`
	Next  int    `json:"next"`
	Seed  uint64 `json:"seed"`
	RNG   []byte `json:"rng"`                   // the state of the generator that draws each group's negatives
	Pairs int    `json:"pairs"`                 // training pairs: a resumed run must see the same data
	Data  string `json:"data_sha256,omitempty"` // their train.Fingerprint
	// Options are the trainer's: a resumed run must be trained the same way.
	Options Options `json:"options"`
}

// Files returns the checkpoint files of the run beside the model's: the
// moments of the encoder's and the head's optimisers and the state.
func (t *Trainer) Files() (map[string][]byte, error) {
	n := len(t.params) - 1
	enc, err := train.MarshalMoments(t.adam, t.params[:n])
	if err != nil {
		return nil, err
	}
	head, err := train.MarshalMoments(t.headAdam, t.params[n:])
	if err != nil {
		return nil, err
	}
	rng, err := t.src.MarshalBinary()
	if err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(State{Step: t.Step, Epoch: t.cur.Epoch, Next: t.cur.Next, Seed: t.cur.Seed, RNG: rng,
		Pairs: len(t.Data.Queries), Data: t.Data.fingerprint(), Options: t.Opt}, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{train.OptimizerFile: enc, HeadOptimizerFile: head, train.StateFile: append(js, '\n')}, nil
}

// Resume restores the optimisers, the data cursor and the negatives'
// generator from a checkpoint directory written with Files; the weights are
// the caller's to load (Load). It returns an error naming the file when the
// checkpoint belongs to another run: other options, other data.
func (t *Trainer) Resume(dir string) error {
	data, err := train.ReadStateFile(dir)
	if err != nil {
		return fmt.Errorf("rerank: resume: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("rerank: resume: %s: %w", filepath.Join(dir, train.StateFile), jsonerr.Describe(err))
	}
	saved := train.Saved{File: filepath.Join(dir, train.StateFile), Step: st.Step, Steps: st.Options.Schedule.Total, Epoch: st.Epoch, Next: st.Next,
		Items: st.Pairs, ItemsNow: len(t.Data.Queries), What: "training pairs", Data: st.Data, DataNow: t.Data.fingerprint(),
		Options: st.Options, OptionsNow: t.Opt}
	if err := saved.Check(); err != nil {
		return fmt.Errorf("rerank: resume: %w", err)
	}
	n := len(t.params) - 1
	if err := train.ReadMoments(t.adam, t.params[:n], filepath.Join(dir, train.OptimizerFile)); err != nil {
		return fmt.Errorf("rerank: resume: %w", err)
	}
	if err := train.ReadMoments(t.headAdam, t.params[n:], filepath.Join(dir, HeadOptimizerFile)); err != nil {
		return fmt.Errorf("rerank: resume: %w", err)
	}
	if t.adam.Step != st.Step {
		return fmt.Errorf("rerank: resume: %s holds the optimiser of step %d, %s step %d: the checkpoint is damaged", train.OptimizerFile, t.adam.Step, train.StateFile, st.Step)
	}
	if err := t.src.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("rerank: resume: %s: rng: %w", train.StateFile, err)
	}
	t.Step = st.Step
	t.cur.Seed = st.Seed
	t.cur.Restore(st.Epoch, st.Next)
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
