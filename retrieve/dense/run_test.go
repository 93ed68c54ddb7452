package dense

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// tinyRun returns the options of a run of a tiny fresh encoder on the
// pairs of tinyPairs, written as a data folder.
func tinyRun(t *testing.T, out string) RunOptions {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	ps := tinyPairs()
	for name, part := range map[string][]retrieve.Pair{"train.jsonl": ps[:8], "val.jsonl": ps[8:10], "test.jsonl": ps[10:]} {
		if err := retrieve.WriteJSONL(filepath.Join(data, name), part); err != nil {
			t.Fatal(err)
		}
	}
	return RunOptions{Data: data, Out: out, Settings: Settings{Text: TextTerms, MaxQuery: 12, MaxCode: 30, Tau: 0.05},
		Vocab: 300, Model: tinyConfig(), Batch: 4, HardNegatives: 1, MineDepth: 5, MineMargin: 0.05, LearnTau: true, Symmetric: true,
		Steps: 6, Warmup: 1, LR: 1e-2, MinLR: 1e-3, WD: 0.01, Clip: 1, InitStd: 0.1, Seed: 1}
}

// TestResumeIsExact: a run interrupted after 3 of 6 steps and resumed writes
// the weights, optimiser state and curves of the uninterrupted run, bit for
// bit (the learned temperature, the optimiser's moments, the place in the
// data and the queries cut short all come back); a resume with other
// options is refused, naming them, and so is a resume of a folder with no training state.
func TestResumeIsExact(t *testing.T) {
	dir := t.TempDir()
	whole := tinyRun(t, filepath.Join(dir, "whole"))
	whole.ShortQueries, whole.ShortWords = 0.5, 2
	if _, err := Run(context.Background(), whole, train.Events{}); err != nil {
		t.Fatal(err)
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
		t.Fatalf("interrupted run: %v after %+v, want context.Canceled after step 3", err, res)
	}
	if _, err := Run(context.Background(), parts, train.Events{}); err == nil || !strings.Contains(err.Error(), "-resume") {
		t.Errorf("a second run into the interrupted folder: %v, want a refusal naming -resume", err)
	}
	parts.Resume = true
	other := parts
	other.Steps = 7
	if _, err := Run(context.Background(), other, train.Events{}); err == nil || !strings.Contains(err.Error(), "options") {
		t.Errorf("resume with -steps 7 of a 6-step run: %v, want an error naming the options", err)
	}
	other = parts
	other.ShortQueries = 0.25
	if _, err := Run(context.Background(), other, train.Events{}); err == nil || !strings.Contains(err.Error(), "-short-queries 0.5 (now 0.25)") {
		t.Errorf("resume with -short-queries 0.25 of a run with 0.5: %v, want an error naming the option", err)
	}
	res, err = Run(context.Background(), parts, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loop.From != 3 || res.Loop.To != 6 {
		t.Errorf("resumed run took steps %d…%d, want 4…6", res.Loop.From+1, res.Loop.To)
	}
	for _, f := range []string{"model/model.safetensors", "model/" + SettingsFile, "model/" + train.OptimizerFile, "model/" + train.StateFile, CurvesFile, "index/" + EmbeddingsFile} {
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

	fresh := tinyRun(t, filepath.Join(dir, "fresh"))
	fresh.Resume = true
	if err := os.MkdirAll(filepath.Join(fresh.Out, ModelDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fresh.Out, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), fresh, train.Events{}); err == nil || !strings.Contains(err.Error(), "no training state") {
		t.Errorf("resume of a folder without a checkpoint: %v, want an error saying it holds no training state", err)
	}
}
