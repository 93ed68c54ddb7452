package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/attnlab/attnlab/internal/fsprobe"
	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/model"
)

// A Session owns the folder of a training run, whatever the model: the
// language model, the dual encoder and the reranker each train through
// one, and a new trainable model needs only its trainer (Resumable) and
// its save. It
//
//   - claims the folder before any work (OpenSession): locked against a
//     second writer, what an interrupted save left recovered, an earlier
//     run refused unless the user resumes it (-resume) or starts over
//     (-force), and a resumed folder checked to hold a run's state and a
//     checkpoint of the model's kind;
//   - knows the run's files (Layout): the checkpoint folder, the curves,
//     the plot;
//   - restores a resumed run (Restore): the trainer's state from the
//     checkpoint, the curves up to its step;
//   - runs the loop (Train), saving the model with the trainer's state and
//     the curves, and when a non-finite step leaves nothing of the run,
//     removes what the run wrote, so that a rerun finds the folder as it
//     was.
type Session struct {
	Layout
	Resume bool // the run continues the one in the folder

	claim *output.Claim
	ev    Events
	kept  []string // files beside the checkpoint that go when nothing of the run is kept
}

// Layout is where the files of a run lie.
type Layout struct {
	Out        string // the run folder, made when the first file is written
	Claim      string // the folder the run owns: Out, or a folder inside it ("": Out)
	Checkpoint string // the checkpoint folder (model, trainer state), inside Claim or Claim itself
	Curves     string // the CSV file of the records
	Plot       string // the PNG of the loss, drawn with each save ("": none)
	Title      string // the plot's title
}

// SessionOptions say which folder a session claims and how.
type SessionOptions struct {
	Layout
	Resume bool // continue the run in the folder
	Force  bool // start over in a folder that holds a run
	// Kind is the model kind (model.KindLM, …) the checkpoint of a resumed
	// run must hold.
	Kind string
	// Inputs are the files and folders the run reads: the folder is never
	// one of them, nor holds one.
	Inputs []string
}

// Hint is what a refused run folder's error tells the user.
const Hint = "-resume continues it, -force starts over"

// OpenSession claims the run folder o describes (see Session); Close
// releases it. Lines of what it recovered go to ev.Log.
func OpenSession(o SessionOptions, ev Events) (*Session, error) {
	if o.Resume && o.Force {
		return nil, errors.New("resume and force: choose one")
	}
	s := &Session{Layout: o.Layout, Resume: o.Resume, ev: ev}
	if s.Claim == "" {
		s.Claim = s.Out
	}
	claim, err := output.Target{Path: s.Claim, Flag: "-out", Replace: o.Resume || o.Force, Inputs: o.Inputs,
		Holds: func() string { return describeRun(s.Checkpoint) }, Hint: Hint}.ClaimDir()
	if err != nil {
		return nil, err
	}
	s.claim = claim
	for _, line := range claim.Recovered {
		ev.Logf("%s", line)
	}
	if err := fsprobe.Dir(s.Claim); err != nil { // before the work, not after it
		s.Close()
		return nil, fmt.Errorf("train: out: %w", err)
	}
	if o.Resume {
		if err := s.checkResumable(o.Kind); err != nil {
			s.Close()
			return nil, fmt.Errorf("train: -resume: %w", err)
		}
	}
	return s, nil
}

// checkResumable refuses a checkpoint without a training state or of
// another kind than kind.
func (s *Session) checkResumable(kind string) error {
	if _, err := os.Stat(filepath.Join(s.Checkpoint, StateFile)); err != nil {
		return fmt.Errorf("%s holds no training state to continue (%v)", s.Checkpoint, err)
	}
	if kind == "" {
		return nil
	}
	return model.CheckKind(s.Checkpoint, kind)
}

// Close releases the folder. A nil session is a no-op.
func (s *Session) Close() {
	if s != nil {
		s.claim.Release()
	}
}

// Resumable is a model's trainer as a session sees it.
type Resumable interface {
	// Files returns the files of the trainer's state (the optimiser's
	// moments, the place in the data, the options), written into the
	// checkpoint beside the model's.
	Files() (map[string][]byte, error)
	// Resume restores that state from a checkpoint folder, refusing one
	// of another run (other options, other data) with an error naming the
	// file and what differs.
	Resume(dir string) error
	// StepsDone returns the optimiser steps taken.
	StepsDone() int
}

// Restore continues a resumed run: tr's state from the checkpoint, and
// into l.Rows the curves up to its step. A session that does not resume
// changes nothing.
func (s *Session) Restore(tr Resumable, l *Loop) error {
	if !s.Resume {
		return nil
	}
	if err := tr.Resume(s.Checkpoint); err != nil {
		return err
	}
	rows, err := ReadCurves(s.Curves, tr.StepsDone())
	if err != nil {
		return err
	}
	l.Rows = rows
	s.ev.Logf("resuming %s at step %d of %d", s.Checkpoint, tr.StepsDone(), l.Steps)
	return nil
}

// MakeDir makes the run folder, for the files of the run.
func (s *Session) MakeDir() error {
	return os.MkdirAll(s.Out, 0o755)
}

// Keep marks files the run wrote beside its checkpoint: they go, with the
// run folder when it is left empty, when a non-finite step leaves nothing
// of the run.
func (s *Session) Keep(paths ...string) { s.kept = append(s.kept, paths...) }

// Saver writes the model into the checkpoint folder dir with the extra
// files of the trainer's state beside its own (as model.Model.Save does).
type Saver func(dir string, extra map[string][]byte) error

// Save checkpoints the run: the model by save with tr's files, and the
// plot of the curves so far, rows.
func (s *Session) Save(tr Resumable, save Saver, rows []Record) error {
	files, err := tr.Files()
	if err != nil {
		return err
	}
	if err := save(s.Checkpoint, files); err != nil {
		return err
	}
	if s.Plot == "" {
		return nil
	}
	return PlotCurves(s.Plot, s.Title, rows)
}

// Train runs l from tr's step to l.Steps in the run folder (made first):
// the loop's checkpoint and curves are the session's and it saves with
// Save. When a non-finite step leaves nothing of the run, the files
// given to Keep go, and the run folder if then empty.
func (s *Session) Train(ctx context.Context, l *Loop, tr Resumable, save Saver) (LoopResult, error) {
	if err := s.MakeDir(); err != nil {
		return LoopResult{}, err
	}
	l.Checkpoint, l.Curves = s.Checkpoint, s.Curves
	l.Save = func() error { return s.Save(tr, save, l.Rows) }
	res, err := l.Run(ctx, tr.StepsDone())
	if nf := (*NonFiniteError)(nil); errors.As(err, &nf) && nf.Kept < 0 {
		for _, f := range s.kept {
			os.Remove(f)
		}
		os.Remove(s.Out) // when empty: a rerun finds the folder as it was
	}
	return res, err
}

// describeRun says what a run folder's checkpoint holds: "it holds a run
// at step 40 of 40", for the refusal to overwrite it.
func describeRun(ckpt string) string {
	data, err := ReadStateFile(ckpt)
	if err != nil {
		return "it holds files"
	}
	var st struct {
		Step    *int
		Options struct{ Schedule Schedule }
	}
	if err := json.Unmarshal(data, &st); err != nil || st.Step == nil {
		return "it holds a run"
	}
	return fmt.Sprintf("it holds a run at step %d of %d", *st.Step, st.Options.Schedule.Total)
}
