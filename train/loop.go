package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/internal/readlimit"
)

// Record is one step's row of the curves: column name → value. A step
// records at least "step" and "loss", and "tokens" when it counts them;
// an evaluation adds its own columns to the row of the step it follows.
type Record map[string]float64

// Loop is the training loop shared by the language model, the dual encoder
// and the reranker: it calls Step until step Steps, evaluates and saves at
// fixed intervals, keeps the curves, and stops on an interrupt or a
// non-finite step, with one policy:
//
//   - cancelling ctx stops the loop after the current step; the run is
//     then saved (when this call took at least one step) and Run returns
//     ctx's error: training saves first;
//   - a step that fails with ErrNonFinite stops the loop without saving,
//     so the last good checkpoint is kept; Run returns a *NonFiniteError
//     that says which checkpoint that is, if any (when none was saved, the
//     curves this call wrote are removed: nothing of the run is left);
//   - any other error of Step, Eval or Save ends the loop and is returned.
type Loop struct {
	Steps int // the step after which the run ends

	// Step takes one optimiser step and returns its record. A step that
	// gives up on an interrupt returns the error of Run's context, the
	// run left as before it: the loop saves it then.
	Step func() (Record, error)
	// Eval, when not nil, runs every EvalEvery steps and after the last.
	Eval      func() (Record, error)
	EvalEvery int
	// Save, when not nil, checkpoints the run every SaveEvery steps, after
	// the last, and on an interrupt. The curves are written just before.
	Save      func() error
	SaveEvery int
	// Checkpoint is the folder Save writes, for the error of a
	// non-finite step (which checkpoint is kept).
	Checkpoint string

	// Curves is the CSV file of the records (empty: none), written with
	// each save and every WriteEvery steps (0: only with saves), one row
	// per step under the header Columns ("step" first); a missing value is
	// an empty cell. Rows holds the records so far: set it to the rows of a
	// resumed run's file.
	Curves     string
	Columns    []string
	WriteEvery int
	Rows       []Record

	// Progress, when not nil, is called after each step.
	Progress func(Progress)
}

// Progress is the state of a running loop.
type Progress struct {
	Step, Steps  int
	Record       Record  // the step's record
	TokensPerSec float64 // since this call of Run started
	Elapsed      time.Duration
}

// LoopResult is what a call of Run did.
type LoopResult struct {
	From, To    int      // the step before the first of this call, and the last
	First, Last Record   // the first and last records of this call
	Rows        []Record // every record of this call
	Tokens      int
	Time        time.Duration
}

// Steps is the number of steps this call took.
func (r LoopResult) Steps() int { return r.To - r.From }

// TrendSteps is how many steps FirstMean and LastMean average: one step's
// loss is noise, fifty say where training went.
const TrendSteps = 50

// FirstMean is the mean of column col over the first TrendSteps steps of
// this call (the first half in a shorter call).
func (r LoopResult) FirstMean(col string) float64 { return Mean(r.Rows, col, r.trend()) }

// LastMean is the mean of column col over the last TrendSteps steps (the
// last half in a shorter call).
func (r LoopResult) LastMean(col string) float64 { return Mean(r.Rows, col, -r.trend()) }

// TrendWindow is how many steps FirstMean and LastMean average.
func (r LoopResult) TrendWindow() int { return r.trend() }

func (r LoopResult) trend() int { return max(1, min(TrendSteps, len(r.Rows)/2)) }

// TokensPerSec is the training throughput of this call.
func (r LoopResult) TokensPerSec() float64 {
	if r.Time <= 0 {
		return 0
	}
	return float64(r.Tokens) / r.Time.Seconds()
}

// Run runs the loop from step done (the steps already taken) until Steps.
//
// While it runs, a loop that saves counts as a save in progress
// (atomicfile.Saving): a second interrupt waits for the save the first
// one asked for.
func (l *Loop) Run(ctx context.Context, done int) (LoopResult, error) {
	if l.Save != nil {
		defer atomicfile.Saving()()
	}
	r := LoopResult{From: done, To: done}
	start := time.Now()
	saved := 0 // the step last saved by this call
	saveAll := func() error {
		if err := l.writeCurves(); err != nil {
			return err
		}
		if l.Save != nil {
			if err := l.Save(); err != nil {
				return err
			}
			saved = r.To
		}
		return nil
	}
	for r.To < l.Steps {
		if err := ctx.Err(); err != nil {
			r.Time = time.Since(start)
			if r.Steps() > 0 {
				if err := saveAll(); err != nil {
					return r, err
				}
			}
			return r, err
		}
		rec, err := l.Step()
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			continue // the step gave up on the interrupt, the run as before it: saved above
		}
		if err != nil {
			r.Time = time.Since(start)
			if errors.Is(err, ErrNonFinite) {
				return r, l.nonFinite(err, done, saved)
			}
			return r, err
		}
		step := int(rec["step"])
		if step != r.To+1 {
			return r, fmt.Errorf("train: loop: step %d followed step %d", step, r.To)
		}
		r.To = step
		if l.Eval != nil && (step%max(l.EvalEvery, 1) == 0 || step == l.Steps) {
			ev, err := l.Eval()
			if err != nil {
				return r, err
			}
			for k, v := range ev {
				rec[k] = v
			}
		}
		if r.Steps() == 1 {
			r.First = rec
		}
		r.Last = rec
		r.Rows = append(r.Rows, rec)
		r.Tokens += int(rec["tokens"])
		l.Rows = append(l.Rows, rec)
		elapsed := time.Since(start)
		if l.Progress != nil {
			l.Progress(Progress{Step: step, Steps: l.Steps, Record: rec, TokensPerSec: float64(r.Tokens) / elapsed.Seconds(), Elapsed: elapsed})
		}
		switch {
		case step == l.Steps || (l.Save != nil && l.SaveEvery > 0 && step%l.SaveEvery == 0):
			err = saveAll()
		case l.WriteEvery > 0 && step%l.WriteEvery == 0:
			err = l.writeCurves()
		}
		if err != nil {
			return r, err
		}
	}
	r.Time = time.Since(start)
	return r, nil
}

// NonFiniteError is the error of Loop.Run for a step whose loss or
// gradient is not finite: it says which checkpoint is kept, if any, and
// what the user can do.
type NonFiniteError struct {
	Err        error  // the step's, wrapping ErrNonFinite
	Checkpoint string // the run's checkpoint folder
	Kept       int    // the step of the checkpoint kept; -1: none
	Earlier    bool   // the checkpoint kept is an earlier run's, which this one was to replace
}

func (e *NonFiniteError) Error() string {
	const try = "a lower -lr, a -clip or another -seed may avoid it"
	switch {
	case e.Kept < 0:
		return fmt.Sprintf("%v: no checkpoint had been saved, so nothing of the run is kept: run again (%s)", e.Err, try)
	case e.Earlier:
		return fmt.Sprintf("%v: no checkpoint of this run was saved; %s still holds the earlier run's, at step %d: -force starts over (%s)", e.Err, e.Checkpoint, e.Kept, try)
	}
	return fmt.Sprintf("%v: the last good checkpoint, step %d, is kept in %s: -force starts over (%s); -resume would meet the same step again", e.Err, e.Kept, e.Checkpoint, try)
}

func (e *NonFiniteError) Unwrap() error { return e.Err }

// nonFinite describes what a non-finite step leaves: the checkpoint this
// call saved last, or the one it resumed from (done), or one of an
// earlier run; with none, the curves this call wrote go.
func (l *Loop) nonFinite(err error, done, saved int) error {
	e := &NonFiniteError{Err: err, Checkpoint: l.Checkpoint, Kept: max(saved, done)}
	if e.Kept > 0 {
		return e
	}
	if st, ok := savedStep(l.Checkpoint); ok {
		e.Kept, e.Earlier = st, true
		return e
	}
	e.Kept = -1
	if l.Curves != "" {
		if rmErr := os.Remove(l.Curves); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return fmt.Errorf("%w; removing %s: %v", e, l.Curves, rmErr)
		}
	}
	return e
}

// savedStep returns the step of the training checkpoint in dir.
func savedStep(dir string) (int, bool) {
	if dir == "" {
		return 0, false
	}
	data, err := ReadStateFile(dir)
	if err != nil {
		return 0, false
	}
	var st struct {
		Step *int `json:"step"`
	}
	if json.Unmarshal(data, &st) != nil || st.Step == nil {
		return 0, false
	}
	return *st.Step, true
}

// writeCurves writes the rows as CSV, atomically.
func (l *Loop) writeCurves() error {
	if l.Curves == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString(strings.Join(l.Columns, ",") + "\n")
	for _, rec := range l.Rows {
		for i, c := range l.Columns {
			if i > 0 {
				b.WriteByte(',')
			}
			if v, ok := rec[c]; ok && !math.IsNaN(v) {
				b.WriteString(strconv.FormatFloat(v, 'g', 7, 64))
			}
		}
		b.WriteByte('\n')
	}
	return atomicfile.WriteFile(l.Curves, []byte(b.String()), 0o644)
}

// MaxCurvesBytes bounds a curves file ReadCurves reads: a row is about
// 100 bytes, so room for millions of steps.
const MaxCurvesBytes = 256 << 20

// ReadCurves reads the records of a curves file up to step (a resumed run
// keeps its history). A missing file has none.
func ReadCurves(path string, step int) ([]Record, error) {
	data, err := readlimit.File(path, MaxCurvesBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	cols := strings.Split(lines[0], ",")
	var out []Record
	for n, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != len(cols) {
			return nil, fmt.Errorf("train: %s:%d: %d fields, want %d", path, n+2, len(f), len(cols))
		}
		rec := Record{}
		for i, s := range f {
			if s == "" {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("train: %s:%d: column %s: %v", path, n+2, cols[i], err)
			}
			rec[cols[i]] = v
		}
		if int(rec["step"]) <= step {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Mean returns the mean of column col over the first (n > 0) or last
// (n < 0) |n| records that have it: a trend that single noisy steps hide.
func Mean(rows []Record, col string, n int) float64 {
	var sum float64
	var count int
	for k := range rows {
		i := k
		if n < 0 {
			i = len(rows) - 1 - k
		}
		if v, ok := rows[i][col]; ok && !math.IsNaN(v) {
			sum += v
			count++
			if count == max(n, -n) {
				break
			}
		}
	}
	if count == 0 {
		return math.NaN()
	}
	return sum / float64(count)
}

// PlotCurves draws the loss of the records against the step, with the
// validation loss where it was measured, as a PNG.
func PlotCurves(path, title string, rows []Record) error {
	trainS, valS := plots.Series{Name: "train"}, plots.Series{Name: "validation"}
	for _, r := range rows {
		trainS.X, trainS.Y = append(trainS.X, r["step"]), append(trainS.Y, r["loss"])
		if v, ok := r["val_loss"]; ok && !math.IsNaN(v) {
			valS.X, valS.Y = append(valS.X, r["step"]), append(valS.Y, v)
		}
	}
	if len(trainS.X) == 0 {
		return nil // nothing to draw yet
	}
	series := []plots.Series{trainS}
	if len(valS.X) > 0 {
		series = append(series, valS)
	}
	return plots.CurvesPNG(path, title, "step", "loss (nats/token)", series)
}
