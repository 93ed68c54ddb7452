package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/train"
)

// optimFlags are the optimiser flags of retriever train and rerank.
type optimFlags struct {
	steps, warmup       int
	lr, minLR, wd, clip float64
}

// register defines the flags on fs with the given defaults (weight decay
// 0.01, clip 1).
func (o *optimFlags) register(fs *flag.FlagSet, steps, warmup int, lr, minLR float64) {
	fs.IntVar(&o.steps, "steps", steps, "optimiser steps")
	fs.IntVar(&o.warmup, "warmup", warmup, "warmup steps")
	fs.Float64Var(&o.lr, "lr", lr, "peak learning rate")
	fs.Float64Var(&o.minLR, "min-lr", minLR, "final learning rate")
	fs.Float64Var(&o.wd, "wd", 0.01, "weight decay (not on norms and embeddings)")
	fs.Float64Var(&o.clip, "clip", 1, "global gradient-norm clip (0: none)")
}

// schedule returns warmup and cosine decay from lr to min-lr over the steps.
func (o optimFlags) schedule() train.Schedule {
	return train.Schedule{Peak: o.lr, Min: o.minLR, Warmup: o.warmup, Total: o.steps}
}

// loopStep is what the training loop needs of one optimiser step.
type loopStep struct {
	Step           int
	Loss, Accuracy float64
	Tokens         int
	Row            string // the step's row of the curves file, without the seconds column
}

// loopResult is what a training loop did.
type loopResult struct {
	First, Last loopStep
	Tokens      int
	Time        time.Duration
	Stopped     error // non-nil when the context ended the loop early
}

// stepLoop calls step until it reports step number steps or ctx is done,
// showing a progress bar (unless quiet) and writing the curves file (header,
// then one row per step with the seconds since the start) every 50 steps
// and at the end. A step's error ends the loop and is returned.
func stepLoop(ctx context.Context, steps, done int, step func() (loopStep, error), header, curves string, quiet bool) (loopResult, error) {
	bar := newBar(steps, "", quiet)
	var csv strings.Builder
	csv.WriteString(header + ",seconds\n")
	var r loopResult
	start := time.Now()
	for done < steps {
		if ctx.Err() != nil {
			r.Stopped = errors.New("interrupted")
			break
		}
		res, err := step()
		if err != nil {
			return r, err
		}
		done = res.Step
		if r.First.Step == 0 {
			r.First = res
		}
		r.Last = res
		r.Tokens += res.Tokens
		fmt.Fprintf(&csv, "%s,%.2f\n", res.Row, time.Since(start).Seconds())
		if bar != nil {
			bar.Describe(fmt.Sprintf("loss %.3f  acc %.2f  %5.0f tok/s", res.Loss, res.Accuracy, float64(r.Tokens)/time.Since(start).Seconds()))
			bar.Set(res.Step)
		}
		if res.Step%50 == 0 {
			if err := atomicfile.WriteFile(curves, []byte(csv.String()), 0o644); err != nil {
				return r, err
			}
		}
	}
	r.Time = time.Since(start)
	if r.Last.Step > 0 {
		if err := atomicfile.WriteFile(curves, []byte(csv.String()), 0o644); err != nil {
			return r, err
		}
	}
	return r, nil
}
