package rerank

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// TestResumeIsExact: a reranker run on a sample of its training pairs,
// interrupted after 3 of 6 steps and resumed, writes the weights, the
// optimisers' state and the curves of the uninterrupted run, bit for bit
// (the same sample, the place in the data and the generator that draws
// each group's negatives come back); a resume with another model shape is
// refused, naming it.
func TestResumeIsExact(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	ps := pairs(24)
	for name, part := range map[string][]retrieve.Pair{"train.jsonl": ps[:16], "val.jsonl": ps[16:]} {
		if err := retrieve.WriteJSONL(filepath.Join(data, name), part); err != nil {
			t.Fatal(err)
		}
	}
	enc := filepath.Join(dir, "encoder")
	if err := tinyDense(t, ps).Save(enc); err != nil {
		t.Fatal(err)
	}
	whole := RunOptions{Data: data, Out: filepath.Join(dir, "whole"), Model: enc, MaxQuery: 12, MaxCode: 24, Cross: 1, Lexical: true, InitStd: 0.1,
		TrainPairs: 12, Groups: 3, Candidates: 3, BM25Negs: 2, DenseNegs: 2, MineDepth: 8, MineMargin: 0.05,
		Steps: 6, Warmup: 1, LR: 1e-3, MinLR: 1e-4, WD: 0.01, Clip: 1, HeadLRScale: 10, Depth: 4, Seed: 1}
	var logs []string
	if _, err := Run(context.Background(), whole, train.Events{Log: func(m string) { logs = append(logs, m) }}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(logs, func(m string) bool { return strings.Contains(m, "a sample of 12") }) {
		t.Errorf("-train-pairs 12 of 16: no word of the sample in %q", logs)
	}

	parts := whole
	parts.Out = filepath.Join(dir, "parts")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, parts, train.Events{Progress: func(p train.Progress) {
		if p.Step == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || res == nil || res.Loop.To != 3 {
		t.Fatalf("interrupted run: %v, want context.Canceled after step 3", err)
	}
	if _, err := Run(context.Background(), parts, train.Events{}); err == nil || !strings.Contains(err.Error(), "-resume") {
		t.Errorf("a second run into the interrupted folder: %v, want a refusal naming -resume", err)
	}
	parts.Resume = true
	other := parts
	other.MaxCode = 20
	if _, err := Run(context.Background(), other, train.Events{}); err == nil || !strings.Contains(err.Error(), "max-code 24") {
		t.Errorf("resume with another max-code: %v, want an error naming it", err)
	}
	if res, err = Run(context.Background(), parts, train.Events{}); err != nil {
		t.Fatal(err)
	}
	if res.Loop.From != 3 || res.Loop.To != 6 {
		t.Errorf("resumed run took steps %d…%d, want 4…6", res.Loop.From+1, res.Loop.To)
	}
	for _, f := range []string{"reranker/model.safetensors", "reranker/" + HeadFile, "reranker/" + train.OptimizerFile, "reranker/" + HeadOptimizerFile,
		"reranker/" + train.StateFile, CurvesFile} {
		a, err := os.ReadFile(filepath.Join(whole.Out, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(parts.Out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the interrupted and resumed run wrote other bytes than the whole run", f)
		}
	}
}

// TestRunInit: a run with Init fine-tunes that reranker (its first
// step's loss is the trained model's, below a fresh start's), mining its
// negatives from the first stage alone; a reranker of another shape is
// refused naming it.
func TestRunInit(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o755)
	ps := pairs(24)
	for name, part := range map[string][]retrieve.Pair{"train.jsonl": ps[:16], "val.jsonl": ps[16:]} {
		if err := retrieve.WriteJSONL(filepath.Join(data, name), part); err != nil {
			t.Fatal(err)
		}
	}
	enc := filepath.Join(dir, "encoder")
	if err := tinyDense(t, ps).Save(enc); err != nil {
		t.Fatal(err)
	}
	o := RunOptions{Data: data, Out: filepath.Join(dir, "first"), Model: enc, MaxQuery: 12, MaxCode: 24, Cross: 1, Lexical: true, InitStd: 0.1,
		Groups: 4, Candidates: 3, FirstNegs: 3, MineDepth: 8, Steps: 40, Warmup: 1, LR: 3e-3, MinLR: 1e-3, Clip: 1, HeadLRScale: 10, Depth: 4, Seed: 1}
	var logs []string
	first, err := Run(context.Background(), o, train.Events{Log: func(m string) { logs = append(logs, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(logs, func(m string) bool { return strings.Contains(m, "first-stage negatives") }) ||
		slices.ContainsFunc(logs, func(m string) bool { return strings.Contains(m, "bm25 negatives") }) {
		t.Errorf("first-stage negatives alone: the log says %q", logs)
	}
	tuned := o
	tuned.Out, tuned.Init, tuned.Steps = filepath.Join(dir, "tuned"), filepath.Join(o.Out, RerankerDir), 1
	again, err := Run(context.Background(), tuned, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := o
	fresh.Out, fresh.Steps = filepath.Join(dir, "fresh"), 1
	start, err := Run(context.Background(), fresh, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	lossOf := func(r *RunResult) float64 { return r.Loop.First["loss"] }
	if !(lossOf(again) < lossOf(start)) || !(lossOf(first) >= lossOf(again)) {
		t.Errorf("first-step loss: fine-tuned %g, fresh %g (first run began at %g); want the fine-tuned one lowest", lossOf(again), lossOf(start), lossOf(first))
	}
	bad := tuned
	bad.Out, bad.MaxCode = filepath.Join(dir, "bad"), 20
	if _, err := Run(context.Background(), bad, train.Events{}); err == nil || !strings.Contains(err.Error(), "init") || !strings.Contains(err.Error(), "max-code 24") {
		t.Errorf("init from a reranker of another shape: %v", err)
	}
}

// TestRunRefusesOneCode: pairs that all hold the same code have no
// negative (a random pick of another pair is a copy of the gold's code, not
// a negative): the run is refused with the count, and leaves no folder.
func TestRunRefusesOneCode(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o755)
	ps := pairs(12)
	for i := range ps {
		ps[i].Code = "func F(x int) int { return 2 * x }"
	}
	if err := retrieve.WriteJSONL(filepath.Join(data, "train.jsonl"), ps); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "val.jsonl"), nil, 0o644)
	enc := filepath.Join(dir, "encoder")
	if err := tinyDense(t, pairs(12)).Save(enc); err != nil {
		t.Fatal(err)
	}
	o := RunOptions{Data: data, Out: filepath.Join(dir, "out"), Model: enc, MaxQuery: 12, MaxCode: 24, Cross: 1, InitStd: 0.1,
		Groups: 3, Candidates: 3, BM25Negs: 2, RandomNegs: 2, MineDepth: 8, MineMargin: 0.05,
		Steps: 2, Warmup: 1, LR: 1e-3, MinLR: 1e-4, Clip: 1, HeadLRScale: 10, Depth: 4, Seed: 1}
	_, err := Run(context.Background(), o, train.Events{})
	want := "rerank: none of the 12 training pairs has a hard negative"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("one code: got %v, want %q", err, want)
	}
	if _, serr := os.Stat(o.Out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a refused run left %s (%v)", o.Out, serr)
	}
}
