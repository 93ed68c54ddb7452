package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/safetensors"
)

// folderTree writes n packages of two documented functions each under a
// temporary root.
func folderTree(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf("package pkg%02d\n\n// Sum%d adds the values.\nfunc Sum%d(a, b int) int { return a + b + %d }\n\n// Name%d returns the name.\nfunc Name%d() string { return \"n%d\" }\n", i, i, i, i, i, i, i)
		if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func tinyEncoder(t *testing.T) *dense.Model {
	t.Helper()
	ps := []retrieve.Pair{{Query: "adds the values", Code: "func Sum(a, b int) int { return a + b }"}, {Query: "returns the name", Code: "func Name() string { return \"n\" }"}}
	s := dense.Settings{Text: dense.TextTerms, MaxQuery: 12, MaxCode: 24, Tau: 0.05}
	tok, err := dense.TrainTokenizer(ps, 300, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: tok.VocabSize(), MaxPositionEmbeddings: 32, TieWordEmbeddings: true}
	m, err := dense.New(cfg, tok, s, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestIndexFolderInterrupted: a build stopped after its third file returns
// the context's error and leaves exactly the three whole cache entries it
// wrote (no temporary file); the next build reads those three and embeds
// the rest, and its results equal a build without a cache.
func TestIndexFolderInterrupted(t *testing.T) {
	root, cache, m := folderTree(t, 8), t.TempDir(), tinyEncoder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	_, err := IndexFolder(ctx, root, m, FolderOptions{Cache: cache, Progress: func(done, total int) {
		if calls++; calls == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted build: %v, want context.Canceled", err)
	}
	var files []string
	filepath.WalkDir(cache, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 3 {
		t.Fatalf("the cache holds %d files after the interruption, want the 3 whole entries: %v", len(files), files)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".safetensors") {
			t.Errorf("a file that is not an entry was left: %s", f)
		} else if funcs, _, err := readEntry(f, m.Dim()); err != nil || len(funcs) != 2 {
			t.Errorf("entry %s: %d functions, %v; want 2 and whole", f, len(funcs), err)
		}
	}

	f, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if f.Stats.Cached != 3 || f.Stats.Embedded != 10 || f.Stats.Funcs != 16 {
		t.Errorf("after the interruption: %+v, want 3 files from the cache, 10 functions embedded, 16 in all", f.Stats)
	}
	fresh, err := IndexFolder(context.Background(), root, m, FolderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Search("adds the values", 5)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := fresh.Search("adds the values", 5)
	for i := range a {
		if a[i].Pair.ID != b[i].Pair.ID || a[i].Score != b[i].Score {
			t.Errorf("hit %d: %s %g from the resumed cache, %s %g without one", i, a[i].Pair.ID, a[i].Score, b[i].Pair.ID, b[i].Score)
		}
	}
}

// TestIndexFolderNothingToSearch: a folder whose Go files hold no function
// with a body is an error that names the folder and counts the files.
func TestIndexFolderNothingToSearch(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.go"), []byte("package a\n\nvar A = 1\n\nfunc Decl() int\n"), 0o644)
	_, err := IndexFolder(context.Background(), root, tinyEncoder(t), FolderOptions{})
	if err == nil || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "no function with a body in 1 .go files") {
		t.Errorf("a folder without functions: %v", err)
	}
}

// TestIndexFolderRebuildsBadCacheEntries: a cache entry whose embeddings
// hold a NaN or zero vectors (same key, right shape) is not reused: the file
// is embedded again, the entry rewritten with finite unit vectors, and the
// search equals one without a cache.
func TestIndexFolderRebuildsBadCacheEntries(t *testing.T) {
	root, m := folderTree(t, 3), tinyEncoder(t)
	for _, tc := range []struct {
		name string
		edit func(v []float32)
	}{
		{"nan", func(v []float32) { v[1] = float32(math.NaN()) }},
		{"zero", func(v []float32) { clear(v) }},
	} {
		cache := t.TempDir()
		if _, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache}); err != nil {
			t.Fatal(err)
		}
		entries, _ := filepath.Glob(filepath.Join(cache, "*", "*.safetensors"))
		if len(entries) != 3 {
			t.Fatalf("%s: %d cache entries, want 3", tc.name, len(entries))
		}
		for _, e := range entries {
			f, err := safetensors.ReadFile(e)
			if err != nil {
				t.Fatal(err)
			}
			v, shape, _ := f.Float32("vecs")
			tc.edit(v)
			f.SetF32("vecs", shape, v)
			if err := safetensors.WriteFile(e, f); err != nil {
				t.Fatal(err)
			}
			if _, _, err := readEntry(e, m.Dim()); err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%s: readEntry of a bad entry: %v, want an error naming it", tc.name, err)
			}
		}
		f, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if f.Stats.Cached != 0 || f.Stats.Embedded != 6 {
			t.Errorf("%s: %+v, want no file from the cache and 6 functions embedded again", tc.name, f.Stats)
		}
		for _, e := range entries {
			if _, _, err := readEntry(e, m.Dim()); err != nil {
				t.Errorf("%s: the rebuilt entry: %v", tc.name, err)
			}
		}
		hits, err := f.Search("adds the values", 3)
		if err != nil || len(hits) != 3 {
			t.Fatalf("%s: %d hits, %v", tc.name, len(hits), err)
		}
		fresh, _ := IndexFolder(context.Background(), root, m, FolderOptions{})
		want, _ := fresh.Search("adds the values", 3)
		for i := range hits {
			if hits[i].ID != want[i].ID || hits[i].Score != want[i].Score {
				t.Errorf("%s: hit %d: %s %g, without a cache %s %g", tc.name, i, hits[i].ID, hits[i].Score, want[i].ID, want[i].Score)
			}
		}
	}
}

// TestIndexFolderRefusesOverflow: an encoder whose activations overflow
// float32 makes indexing an error naming the file being embedded, and
// writes no cache entry of its vectors.
func TestIndexFolderRefusesOverflow(t *testing.T) {
	root, cache, m := folderTree(t, 2), t.TempDir(), tinyEncoder(t)
	for i := range m.Enc.Params.Norm {
		m.Enc.Params.Norm[i] = math.MaxFloat32 // the final norm's outputs overflow
	}
	_, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
	if err == nil || !strings.HasPrefix(err.Error(), "search: embedding pkg00/p.go: ") {
		t.Errorf("got %v, want an error naming pkg00/p.go", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "*", "*.safetensors")); len(entries) != 0 {
		t.Errorf("cache entries written from non-finite embeddings: %v", entries)
	}
}
