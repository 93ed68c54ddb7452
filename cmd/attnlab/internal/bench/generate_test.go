package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/attnlab/attnlab/model"
)

// TestBenchGenerateMatchesTorch: attnlab's greedy generation and
// python/torch_generate.py's on the same small random checkpoints give the
// same tokens, with and without GQA and a tied head. The weights are drawn
// wider than training's 0.02: with a tied head and small weights the
// residual stream is the input's embedding and greedy decoding repeats the
// last token, which would compare little.
func TestBenchGenerateMatchesTorch(t *testing.T) {
	if err := torchAvailable(); err != nil {
		t.Skipf("PyTorch %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  model.Config
	}{
		{"GQA/untied", model.Config{HiddenSize: 32, IntermediateSize: 64, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
			RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 256, MaxPositionEmbeddings: 64}},
		{"MHA/tied", model.Config{HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 2,
			RMSNormEps: 1e-6, RopeTheta: 500, VocabSize: 200, MaxPositionEmbeddings: 48, TieWordEmbeddings: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.New[float32](tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := m.NewParams()
			m.Init(p, 0.3, 2)
			dir := filepath.Join(t.TempDir(), "model")
			if err := m.Save(dir, p, nil); err != nil {
				t.Fatal(err)
			}
			g, err := prepareGenerate(dir, model.Config{}, "", 8, 24)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			row, ours := measureGenerate(ctx, g, 10*time.Millisecond)
			if row.Error != "" || len(ours) != 24 || !(row.Ours > 0) {
				t.Fatalf("attnlab: %d tokens, %v tokens/s, error %q", len(ours), row.Ours, row.Error)
			}
			torch, times, _, err := torchGenerate(ctx, g, 1, 0.01)
			if err != nil {
				t.Fatal(err)
			}
			if err := compareTokens(ours, torch); err != nil {
				t.Errorf("%v\nattnlab %v\nPyTorch %v", err, ours, torch)
			}
			distinct := map[int]bool{}
			for _, tok := range ours {
				distinct[tok] = true
			}
			if len(distinct) < 2 {
				t.Errorf("the continuation repeats one token (%v): a weak comparison", ours)
			}
			if len(times) < 3 {
				t.Errorf("PyTorch timed %d runs, want at least 3", len(times))
			}

			// negative control: PyTorch on other weights must be caught
			m.Init(p, 0.3, 3)
			other := *g
			other.dir = filepath.Join(t.TempDir(), "other")
			if err := m.Save(other.dir, p, nil); err != nil {
				t.Fatal(err)
			}
			wrong, _, _, err := torchGenerate(ctx, &other, 1, 0.01)
			if err != nil {
				t.Fatal(err)
			}
			if compareTokens(ours, wrong) == nil {
				t.Errorf("PyTorch on other weights gave attnlab's tokens %v", wrong)
			}
		})
	}
}
