package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// naiveNats scores one file with a single forward pass over its whole
// token sequence (eos first): what ScoreFiles must give when the file fits
// in a window, and approximates when it does not.
func naiveNats(t *testing.T, m *model.Model[float64], p *model.Params[float64], text []byte) float64 {
	ids := append([]int{256}, byteEncoder{}.Encode(text)...)
	b := &model.Batch{B: 1, T: len(ids), Tokens: ids}
	a := m.NewActs(1, len(ids))
	loss, count, err := m.Forward(a, p, b)
	if err != nil {
		t.Fatal(err)
	}
	if count != len(ids)-1 {
		t.Fatalf("%d targets, want %d", count, len(ids)-1)
	}
	return float64(loss) * float64(count)
}

func TestScoreFiles(t *testing.T) {
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 64, TieWordEmbeddings: true}
	m, err := model.New[float64](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.5, 7) // large weights: a confident, far from uniform model
	files := []TextFile{{"a.go", []byte("package a\n\nfunc A() int { return 1 }\n")}, {"b.go", []byte("package b\n")}}

	// every file fits: exactly one forward pass each, whatever the batch
	for _, batch := range []int{1, 3} {
		s, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, files, ScoreOptions{Window: 64, Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for i, f := range files {
			n := naiveNats(t, m, p, f.Text)
			if d := math.Abs(s.Files[i].Nats - n); d > 1e-9*n {
				t.Errorf("batch %d, %s: %.12g nats, one forward pass gives %.12g", batch, f.Path, s.Files[i].Nats, n)
			}
			want += n
		}
		if s.Tokens != len(files[0].Text)+len(files[1].Text) || s.Bytes != s.Tokens {
			t.Errorf("tokens %d, bytes %d", s.Tokens, s.Bytes)
		}
		if bpb := want / math.Ln2 / float64(s.Bytes); math.Abs(bpb-s.BitsPerByte) > 1e-12 {
			t.Errorf("bits per byte %g, want %g", s.BitsPerByte, bpb)
		}
	}

	// a file longer than the window: every token scored once, each with at
	// least window−stride tokens of context, so the score approaches the
	// one pass as the stride shrinks
	long := []TextFile{{"long.go", []byte("package long\n\n// Sum adds the numbers of a slice, one after the other, and returns the total.\nfunc Sum(xs []int) (s int) {\n\tfor _, x := range xs {\n\t\ts += x\n\t}\n\treturn s\n}\n")}}
	// with stride 1 each token past the first window is predicted from
	// exactly the W−1 tokens before it: one forward pass per token says so
	ids := append([]int{256}, byteEncoder{}.Encode(long[0].Text)...)
	var slide float64
	for j := 1; j < len(ids); j++ {
		w := ids[max(0, j-31) : j+1]
		a := m.NewActs(1, len(w))
		tg := make([]int, len(w))
		for i := range tg {
			tg[i] = -100
		}
		tg[len(w)-2] = w[len(w)-1]
		loss, _, err := m.Forward(a, p, &model.Batch{B: 1, T: len(w), Tokens: w, Targets: tg})
		if err != nil {
			t.Fatal(err)
		}
		slide += float64(loss)
	}
	s1, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, long, ScoreOptions{Window: 32, Stride: 1, Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(s1.Nats - slide); d > 1e-9*slide {
		t.Errorf("stride 1: %.12g nats, token by token %.12g", s1.Nats, slide)
	}
	for _, stride := range []int{1, 8, 31} {
		s, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, long, ScoreOptions{Window: 32, Stride: stride, Batch: 4})
		if err != nil {
			t.Fatal(err)
		}
		if s.Tokens != len(long[0].Text) {
			t.Errorf("stride %d: %d tokens, want %d", stride, s.Tokens, len(long[0].Text))
		}
	}
	if _, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, long, ScoreOptions{Window: 32, Stride: 32}); err == nil {
		t.Error("a stride of the whole window (tokens without context): no error")
	}
	if _, err := ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, files, ScoreOptions{Window: 65}); err == nil {
		t.Error("a window beyond max_position_embeddings: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ScoreFiles(ctx, m, p, byteEncoder{}, 256, files, ScoreOptions{}); err == nil {
		t.Error("a cancelled context: no error")
	}
}

// TestScoreFilesRefusesNonFiniteLogits: finite float32 weights whose
// product overflows give infinite logits; the score is an error naming the
// file and the token, not "NaN bits per byte".
func TestScoreFilesRefusesNonFiniteLogits(t *testing.T) {
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 64, TieWordEmbeddings: false}
	m, err := model.New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 7)
	for i := range p.Norm {
		p.Norm[i] = 1e30 // the head's input ~1e30, its weights 1e30: 1e60 overflows float32
	}
	for i := range p.LMHead {
		p.LMHead[i] = 1e30
	}
	files := []TextFile{{"a.go", []byte("package a\n")}}
	_, err = ScoreFiles(context.Background(), m, p, byteEncoder{}, 256, files, ScoreOptions{Window: 64})
	want := "train: score: a.go: token 1: the logit of token id 0 is"
	if !errors.Is(err, model.ErrNonFinite) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want an ErrNonFinite beginning %q", err, want)
	}
}

// TestEvaluateLMRefusesAFileListedTwice: the same file twice in Files, by
// the same name, another spelling or a symbolic link, is an error naming
// it, before the model is read (Model names no checkpoint here: had the
// check come later, the error would be the missing checkpoint's).
func TestEvaluateLMRefusesAFileListedTwice(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.go"), filepath.Join(dir, "b.go")
	os.WriteFile(a, []byte("package a\n"), 0o644)
	os.WriteFile(b, []byte("package a\n"), 0o644) // the same bytes, another file: allowed
	link := filepath.Join(dir, "link.go")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	noModel := filepath.Join(dir, "nosuch")
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{[]string{a, b, a}, a + " is listed twice (entries 1 and 3 of 3)"},
		{[]string{b, a, filepath.Join(dir, ".", "a.go")}, a + " is listed twice (entries 2 and 3 of 3)"},
		{[]string{a, b, link}, link + " is the file " + a + ", listed before (entries 1 and 3 of 3)"},
	} {
		_, err := EvaluateLM(context.Background(), LMEvalOptions{Model: noModel, Files: tc.files})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.files, err, tc.want)
		}
	}
	_, err := EvaluateLM(context.Background(), LMEvalOptions{Model: noModel, Files: []string{a, b}})
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("two distinct files: got %v, want the missing checkpoint's error", err)
	}
}
