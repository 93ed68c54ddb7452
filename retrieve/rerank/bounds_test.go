package rerank

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// TestRunOptionsBounds: counts and lengths beyond their limits and a NaN
// margin are refused by Validate; a step whose activations do not fit in
// memory with the encoder's sizes is an OptionError of Run before mining.
func TestRunOptionsBounds(t *testing.T) {
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
	base := RunOptions{Data: data, Out: filepath.Join(dir, "run"), Model: enc, MaxQuery: 12, MaxCode: 24, Cross: 1, Lexical: true, InitStd: 0.1,
		Groups: 3, Candidates: 3, BM25Negs: 2, DenseNegs: 2, MineDepth: 8, MineMargin: 0.05,
		Steps: 2, Warmup: 1, LR: 1e-3, MinLR: 1e-4, WD: 0.01, Clip: 1, HeadLRScale: 10, Depth: 4, Seed: 1}
	for _, c := range []struct {
		set  func(*RunOptions)
		want string
	}{
		{func(o *RunOptions) { o.Groups = 100000000 }, "groups 100000000: want at most 1048576"},
		{func(o *RunOptions) { o.Candidates = 100000000 }, "candidates 100000000: want at most"},
		{func(o *RunOptions) { o.RandomNegs = 100000000 }, "random-negatives 100000000: want at most"},
		{func(o *RunOptions) { o.MaxCode = 100000000 }, "max-code 100000000: want at most 16777216"},
		{func(o *RunOptions) { o.Cross = 100000000 }, "cross-layers 100000000: want at most"},
		{func(o *RunOptions) { z := 0.0; o.MineMargin = z / z }, "mine-margin NaN"},
	} {
		o := base
		c.set(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	o := base
	o.Groups, o.Candidates = 16, 1<<20
	_, err := Run(context.Background(), o, train.Events{})
	var oe *train.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "groups 16 × candidates 1048576 sequences of up to 48 tokens needs") {
		t.Errorf("a step beyond memory: %v", err)
	}
	if _, err := os.Stat(o.Out); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote %s", o.Out)
	}
}
