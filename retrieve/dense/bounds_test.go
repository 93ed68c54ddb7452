package dense

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/train"
)

// TestRunOptionsBounds: counts beyond MaxCount, lengths beyond the
// positions a model may have, a NaN margin and a step whose activations
// cannot fit in memory are refused by Validate, before any work.
func TestRunOptionsBounds(t *testing.T) {
	for _, c := range []struct {
		set  func(*RunOptions)
		want string
	}{
		{func(o *RunOptions) { o.Batch = 100000000 }, "batch 100000000: want at most 1048576"},
		{func(o *RunOptions) { o.HardNegatives = 100000000 }, "hard-negatives 100000000: want at most"},
		{func(o *RunOptions) { o.MineDepth = 100000000 }, "mine-depth 100000000: want at most"},
		{func(o *RunOptions) { o.Settings.MaxCode = 100000000 }, "max-code 100000000: want at most 16777216"},
		{func(o *RunOptions) { o.MineMargin = nan() }, "mine-margin NaN"},
		{func(o *RunOptions) { o.ShortQueries = 1.5 }, "short-queries 1.5: want a probability in [0, 1]"},
		{func(o *RunOptions) { o.ShortQueries = nan() }, "short-queries NaN: want a probability"},
		{func(o *RunOptions) { o.ShortQueries, o.ShortWords = 0.5, 0 }, "short-words 0: want >= 1"},
		{func(o *RunOptions) { o.Batch, o.HardNegatives = 1<<20, 1000 }, "batch 1048576 × (2 + hard-negatives 1000) sequences of up to 32 tokens needs"},
		{func(o *RunOptions) { o.Settings.MaxCode = 1 << 24 }, "sequences of up to 16777216 tokens needs"},
	} {
		o := tinyRun(t, filepath.Join(t.TempDir(), "out"))
		c.set(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	// with -init the sizes are the checkpoint's: Run checks them once the
	// model is loaded, before mining or training, as an OptionError
	o := tinyRun(t, filepath.Join(t.TempDir(), "out"))
	if _, err := Run(context.Background(), o, train.Events{}); err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(o.Out, ModelDir)
	o.Out, o.Init, o.Batch, o.HardNegatives = filepath.Join(t.TempDir(), "out2"), init, 8, 1<<20
	_, err := Run(context.Background(), o, train.Events{})
	var oe *train.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "hard-negatives 1048576") {
		t.Errorf("-init with a step beyond memory: %v", err)
	}
}

func nan() float64 { var z float64; return z / z }
