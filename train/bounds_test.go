package train

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// TestRunOptionsBounds: sizes that would end in an out-of-memory trace
// are refused by Validate, naming the flag-like field, before any work.
func TestRunOptionsBounds(t *testing.T) {
	for _, c := range []struct {
		set  func(*RunOptions)
		want string
	}{
		{func(o *RunOptions) { o.BatchSize = 100000000 }, "batch 100000000: want at most"},
		{func(o *RunOptions) { o.BatchSize = 1 << 20 }, "batch 1048576 × window 128 needs"},
		{func(o *RunOptions) { o.Window = 100000000 }, "window 100000000: want at most"},
		{func(o *RunOptions) { o.Window = 1 << 22 }, "batch 16 × window 4194304 needs"},
		{func(o *RunOptions) { o.Model.HiddenSize = 100000000 }, "dim 100000000: want at most"},
		{func(o *RunOptions) { o.Model.HiddenSize, o.Model.IntermediateSize = 1<<16, 1<<18 }, "a model of 257832845312 parameters (dim 65536, layers 4, ffn 262144, vocab 2048) needs"},
		{func(o *RunOptions) { o.Model.NumHiddenLayers = 1e9 }, "layers 1000000000: want at most"},
		{func(o *RunOptions) { o.Vocab = 1e9 }, "vocab 1000000000: want at most"},
		{func(o *RunOptions) { o.ValKB = 1 << 62 }, "val-kb"},
	} {
		o := DefaultRunOptions()
		c.set(&o)
		o.Derive()
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	o := DefaultRunOptions()
	o.BatchSize, o.Shards, o.CheckpointActivations = 64, 4, true
	o.Derive()
	if err := o.Validate(); err != nil {
		t.Errorf("a batch of 64 in 4 shards: %v", err)
	}
}

// TestScoreOptionsBounds: a batch or window of scoring that does not suit
// the model is an *OptionError (a usage error of lm-eval), checked before
// any window is built.
func TestScoreOptionsBounds(t *testing.T) {
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 1 << 16, TieWordEmbeddings: true}
	m, err := model.New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	files := []TextFile{{"a.go", []byte("package a\n")}}
	for _, c := range []struct {
		o    ScoreOptions
		want string
	}{
		{ScoreOptions{Batch: 100000000}, "batch 100000000, want at most"},
		{ScoreOptions{Batch: 1 << 20}, "batch 1048576 × window 65536 needs"}, // window 0: max_position_embeddings
		{ScoreOptions{Window: 1 << 17}, "window 131072, want in [2, max_position_embeddings = 65536]"},
		{ScoreOptions{Window: 64, Stride: 64}, "stride 64"},
	} {
		_, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, files, c.o)
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an OptionError with %q", c.o, err, c.want)
		}
	}
}
