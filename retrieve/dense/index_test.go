package dense

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/safetensors"
)

func tinyPairs() []retrieve.Pair {
	var ps []retrieve.Pair
	for i := range 12 {
		ps = append(ps, retrieve.Pair{
			ID:      fmt.Sprintf("pkg%d.F%d", i%3, i),
			Query:   fmt.Sprintf("returns the number %d of widgets", i),
			Code:    fmt.Sprintf("func F%d(w []Widget) int {\n\treturn len(w) + %d\n}", i, i),
			Package: fmt.Sprintf("pkg%d", i%3), File: fmt.Sprintf("pkg%d/f.go", i%3), Line: 10 + i,
		})
	}
	return ps
}

func tinyModel(t *testing.T, pairs []retrieve.Pair) *Model {
	t.Helper()
	s := Settings{Text: TextTerms, MaxQuery: 12, MaxCode: 30, Tau: 0.05}
	tok, err := TrainTokenizer(pairs, 300, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.VocabSize = tok.VocabSize()
	m, err := New(cfg, tok, s, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIndexSaveLoad(t *testing.T) {
	pairs := tinyPairs()
	m := tinyModel(t, pairs)
	x, _ := NewIndex(context.Background(), m, pairs, nil)
	dir := filepath.Join(t.TempDir(), "index")
	if err := x.Save(dir); err != nil {
		t.Fatal(err)
	}
	// saving again replaces the index whole
	if err := x.Save(dir); err != nil {
		t.Fatal(err)
	}
	y, err := LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Flat.Vecs, y.Flat.Vecs) || len(y.Docs) != len(pairs) || y.Docs[3] != pairs[3] {
		t.Fatal("the loaded index differs from the saved one")
	}
	// the loaded encoder embeds queries exactly as the saved one
	d1, s1 := x.Search("number 7 widgets", 3)
	d2, s2 := y.Search("number 7 widgets", 3)
	if !slices.Equal(d1, d2) || !slices.Equal(s1, s2) {
		t.Errorf("search before saving %v %v, after loading %v %v", d1, s1, d2, s2)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("the parent folder holds %d entries, want only the index", len(entries))
	}

	// a corpus whose ids disagree with the embeddings is refused
	ps := slices.Clone(pairs)
	ps[0].ID = "other"
	if err := retrieve.WriteJSONL(filepath.Join(dir, CorpusFile), ps); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIndex(dir); err == nil || !strings.Contains(err.Error(), "ids") {
		t.Errorf("mismatched ids: error %v", err)
	}
}

// TestEmbedConcurrent: the embedding methods are safe for concurrent use
// and give the same vectors as sequential calls (run with -race).
func TestEmbedConcurrent(t *testing.T) {
	pairs := tinyPairs()
	m := tinyModel(t, pairs)
	D := m.Dim()
	want := make([]float32, len(pairs)*D)
	for i, p := range pairs {
		m.EmbedQuery(want[i*D:(i+1)*D], p.Query)
	}
	got := make([]float32, len(pairs)*D)
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Go(func() { m.EmbedQuery(got[i*D:(i+1)*D], p.Query) })
	}
	wg.Wait()
	if !slices.Equal(got, want) {
		t.Error("concurrent embeddings differ from sequential ones")
	}
	var ss float32
	for _, v := range want[:D] {
		ss += v * v
	}
	if ss < 0.999 || ss > 1.001 {
		t.Errorf("embedding of squared norm %g, want 1", ss)
	}
}

// TestQueryPrefix: a query is embedded as its prefixed text, code is not
// prefixed, and the prefix survives saving.
func TestQueryPrefix(t *testing.T) {
	pairs := tinyPairs()
	m := tinyModel(t, pairs)
	m.Settings.Text = TextRaw // the prefix is punctuation, which terms drop
	plain := make([]float32, m.Dim())
	m.EmbedQuery(plain, "// number 7 widgets")
	m.Settings.QueryPrefix = "// "
	got, want := m.QueryTokens("number 7 widgets"), m.Tokens("// number 7 widgets", m.Settings.MaxQuery)
	if !slices.Equal(got, want) || slices.Equal(got, m.Tokens("number 7 widgets", m.Settings.MaxQuery)) {
		t.Fatalf("query tokens %v, want those of the prefixed text %v", got, want)
	}
	prefixed := make([]float32, m.Dim())
	m.EmbedQuery(prefixed, "number 7 widgets")
	if !slices.Equal(plain, prefixed) {
		t.Error("the prefixed query's embedding differs from that of the prefixed text")
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Settings.QueryPrefix != "// " {
		t.Errorf("loaded prefix %q", back.Settings.QueryPrefix)
	}
}

// TestLoadIndexRefusesBadEmbeddings: an index whose embeddings hold a NaN
// (which scores no document) or zero vectors (which score every query 0) is
// refused at load, naming the file, the vector and, for zeros, the count.
func TestLoadIndexRefusesBadEmbeddings(t *testing.T) {
	pairs := tinyPairs()
	x, _ := NewIndex(context.Background(), tinyModel(t, pairs), pairs, nil)
	good := filepath.Join(t.TempDir(), "index")
	if err := x.Save(good); err != nil {
		t.Fatal(err)
	}
	D := x.Flat.D
	for _, tc := range []struct {
		name string
		edit func(v []float32)
		want string
	}{
		{"nan", func(v []float32) { v[4*D+2] = float32(math.NaN()) }, "vector 4 holds NaN (element 2)"},
		{"inf", func(v []float32) { v[11*D] = float32(math.Inf(1)) }, "vector 11 holds +Inf (element 0)"},
		{"all-zero", func(v []float32) { clear(v) }, "12 of 12 vectors are zero (the first is vector 0)"},
		{"some-zero", func(v []float32) { clear(v[3*D : 5*D]) }, "2 of 12 vectors are zero (the first is vector 3)"},
		{"not-unit", func(v []float32) { v[7*D] += 0.5 }, "vector 7 has norm"},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		os.CopyFS(dir, os.DirFS(good))
		path := filepath.Join(dir, EmbeddingsFile)
		f, err := safetensors.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v, shape, _ := f.Float32(embeddingsTensor)
		tc.edit(v)
		f.SetF32(embeddingsTensor, shape, v)
		if err := safetensors.WriteFile(path, f); err != nil {
			t.Fatal(err)
		}
		_, err = LoadIndex(dir)
		want := path + `: tensor "embeddings": ` + tc.want
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", tc.name, err, want)
		}
	}
	if _, err := LoadIndex(good); err != nil {
		t.Errorf("the saved index: %v", err)
	}
}

// TestNewIndexRefusesOverflow: finite weights whose activations overflow
// float32 give embeddings that are not finite unit vectors; indexing is then
// an error, not an index that answers every query with nothing or 0.
func TestNewIndexRefusesOverflow(t *testing.T) {
	pairs := tinyPairs()
	m := tinyModel(t, pairs)
	for i := range m.Enc.Params.Norm {
		m.Enc.Params.Norm[i] = math.MaxFloat32 // the final norm's outputs overflow float32
	}
	_, err := NewIndex(context.Background(), m, pairs, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "dense: embedding the documents turned non-finite or zero: ") {
		t.Errorf("got %v, want the documents' embeddings named", err)
	}
}
