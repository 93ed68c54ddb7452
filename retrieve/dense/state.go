package dense

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/attnlab/attnlab/train"
)

// State is where a training run of the dual encoder is: with the weights
// and the optimiser's moments, enough to continue it exactly.
type State struct {
	Step   int     `json:"step"`
	Epoch  int     `json:"epoch"`
	Next   int     `json:"next"`
	Seed   uint64  `json:"seed"`
	Pairs  int     `json:"pairs"`   // training pairs: a resumed run must see the same data
	LogTau float32 `json:"log_tau"` // the learned temperature's parameter (0 when τ is fixed)
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
	st := State{Step: t.Step, Epoch: t.cur.Epoch, Next: t.cur.Next, Seed: t.cur.Seed, Pairs: len(t.Data.Queries), Options: t.Opt}
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
	data, err := os.ReadFile(filepath.Join(dir, train.StateFile))
	if err != nil {
		return fmt.Errorf("dense: resume: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("dense: resume: %s: %w", train.StateFile, err)
	}
	if st.Pairs != len(t.Data.Queries) {
		return fmt.Errorf("dense: resume: %s: the checkpoint was trained on %d pairs, this data has %d", train.StateFile, st.Pairs, len(t.Data.Queries))
	}
	if st.Options != t.Opt {
		return fmt.Errorf("dense: resume: %s: the checkpoint's options %+v differ from this run's %+v", train.StateFile, st.Options, t.Opt)
	}
	if err := train.ReadMoments(t.adam, t.params, filepath.Join(dir, train.OptimizerFile)); err != nil {
		return fmt.Errorf("dense: resume: %w", err)
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
