package search

import (
	"context"
	"encoding/json"
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
	"github.com/attnlab/attnlab/retrieve/rerank"
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

// TestIndexFolderInterrupted: a build (embedding a file at a time) stopped
// after its third file returns
// the context's error and leaves exactly the three whole cache entries it
// wrote (no temporary file); the next build reads those three and embeds
// the rest, and its results equal a build without a cache.
func TestIndexFolderInterrupted(t *testing.T) {
	root, cache, m := folderTree(t, 8), t.TempDir(), tinyEncoder(t)
	defer func(n int) { embedChunk = n }(embedChunk)
	embedChunk = 2 // a file (two functions) at a time
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
		} else if e, err := readEntry(f, m.Dim()); err != nil || len(e.funcs) != 2 {
			t.Errorf("entry %s: %d functions, %v; want 2 and whole", f, len(e.funcs), err)
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
			if _, err := readEntry(e, m.Dim()); err == nil || !strings.Contains(err.Error(), e) {
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
			if _, err := readEntry(e, m.Dim()); err != nil {
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

// writeFiles writes files (path → contents) under a new temporary root.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fieldTree has a function whose doc alone holds some words, build-tag
// twins, and a generated file.
var fieldTree = map[string]string{
	"a/x.go":       "package a\n\n// Frob makes the widget sparkle brightly.\n//\n// It is idempotent.\nfunc Frob(w *W) { w.s = 1 }\n\nfunc Sum(a, b int) int { return a + b }\n",
	"a/t_linux.go": "//go:build linux\n\npackage a\n\n// Twin returns one.\nfunc Twin() int { return 1 }\n",
	"a/t_other.go": "//go:build !linux\n\npackage a\n\n// Twin returns two.\nfunc Twin() int { return 2 }\n",
	"a/gen.go":     "// Code generated by hand. DO NOT EDIT.\n\npackage a\n\n// Gen is generated.\nfunc Gen() int { return 3 }\n",
}

// TestIndexFolderFields: the doc comment is indexed as a field of its own
// (a query in the doc's words finds the function through BM25F, and not
// once the doc weighs 0); build-tag twins are indexed once with the other
// file listed; generated files are skipped unless asked for, also when a
// cache holds their entry.
func TestIndexFolderFields(t *testing.T) {
	root, cache, m := writeFiles(t, fieldTree), t.TempDir(), tinyEncoder(t)
	f, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if f.Stats.Funcs != 3 || f.Stats.Twins != 1 || f.Stats.Generated != 1 || f.Stats.Documented != 2 {
		t.Fatalf("stats %+v: want 3 functions (Frob, Sum, Twin once), 1 twin, 1 generated file, 2 documented", f.Stats)
	}
	i := f.Find("a/t_other.go", "Twin")
	if i < 0 || f.Funcs[i].File != "a/t_linux.go" || len(f.Variants[i]) != 1 || f.Variants[i][0].File != "a/t_other.go" {
		t.Fatalf("twins: %d, want Twin of a/t_linux.go with a/t_other.go as its variant", i)
	}
	if f.Find("a/gen.go", "Gen") >= 0 {
		t.Error("a generated function was indexed by default")
	}
	frob := f.Find("a/x.go", "Frob")
	if fn := f.Funcs[frob]; fn.Doc != "Frob makes the widget sparkle brightly.\n\nIt is idempotent." || fn.Signature() != "func Frob(w *W) " || fn.BodyText() != "{ w.s = 1 }" {
		t.Errorf("Frob: doc %q, signature %q, body %q", fn.Doc, fn.Signature(), fn.BodyText())
	}
	hits, err := f.Search("widget sparkle", 3)
	if err != nil {
		t.Fatal(err)
	}
	if top := f.bm25.Rank("widget sparkle", 3); len(top) != 1 || top[0] != frob {
		t.Errorf("BM25F for a query in the doc's words: %v, want Frob (%d) alone", top, frob)
	}
	for _, h := range hits {
		if h.Name() == "Frob" && !(h.Scores.BM25 > 0) || h.Name() != "Frob" && h.Scores.BM25 != 0 {
			t.Errorf("hit %s: BM25F %g; want a positive score for Frob alone", h.Name(), h.Scores.BM25)
		}
		if h.Name() == "Twin" && len(h.Variants) != 1 {
			t.Errorf("the hit Twin lists %d variants, want 1", len(h.Variants))
		}
	}
	if err := f.SetFields(Fields{Doc: 0, Sig: 1, Body: 1}); err != nil {
		t.Fatal(err)
	}
	if s := f.bm25.ScoreAll("sparkle"); s[frob] != 0 {
		t.Errorf("doc weighed 0: Frob scores %g for a word only its doc holds", s[frob])
	}

	// generated files on request; a later default run skips them again,
	// though the cache holds their entry
	g, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache, Generated: true})
	if err != nil {
		t.Fatal(err)
	}
	if g.Find("a/gen.go", "Gen") < 0 || g.Stats.Funcs != 4 {
		t.Errorf("with generated files: %+v, want Gen indexed (4 functions)", g.Stats)
	}
	d, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if d.Find("a/gen.go", "Gen") >= 0 || d.Stats.Cached != 3 || d.Stats.Generated != 1 {
		t.Errorf("default run after a generated one: %+v, want Gen skipped and the 3 other files from the cache", d.Stats)
	}
	// a linked folder is searched as the folder
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Skip(err)
	}
	if l, err := IndexFolder(context.Background(), link, m, FolderOptions{}); err != nil || l.Stats.Funcs != 3 {
		t.Errorf("a linked folder: %v, %+v", err, l)
	}
}

// TestIndexFolderRebuildsOldCache: a cache entry written before doc
// comments were indexed (no version, functions without docs, no doc
// embeddings) is not read as today's: the file is embedded again and its
// entry rewritten with the docs.
func TestIndexFolderRebuildsOldCache(t *testing.T) {
	root, cache, m := writeFiles(t, fieldTree), t.TempDir(), tinyEncoder(t)
	if _, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache}); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, "*", "*.safetensors"))
	if len(entries) != 3 {
		t.Fatalf("%d cache entries, want 3", len(entries))
	}
	for _, e := range entries {
		f, err := safetensors.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		var funcs []retrieve.Pair // the old entries' functions
		if err := json.Unmarshal([]byte(f.Metadata["functions"]), &funcs); err != nil {
			t.Fatal(err)
		}
		old, _ := json.Marshal(funcs)
		vecs, shape, _ := f.Float32("vecs")
		o := safetensors.New()
		o.Metadata["functions"] = string(old)
		o.SetF32("vecs", shape, vecs)
		if err := safetensors.WriteFile(e, o); err != nil {
			t.Fatal(err)
		}
		if _, err := readEntry(e, m.Dim()); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("an entry of the old format reads: %v", err)
		}
	}
	f, err := IndexFolder(context.Background(), root, m, FolderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if f.Stats.Cached != 0 || f.Stats.Embedded != 4 {
		t.Errorf("over an old cache: %+v, want nothing from it and the 4 functions embedded again", f.Stats)
	}
	if fn := f.Funcs[f.Find("a/x.go", "Frob")]; fn.Doc == "" {
		t.Error("Frob's doc is lost")
	}
	for _, e := range entries {
		if c, err := readEntry(e, m.Dim()); err != nil || len(c.docs) == 0 {
			t.Errorf("entry %s after the rebuild: %v, %d doc values", e, err, len(c.docs))
		}
	}
}

// TestSearchRerankScores: the rows the reranker re-scored carry its score
// (the score that ordered them, by the reranker alone without Fuse, the
// fusion with it) and the first stage's; the rows below keep the first
// stage's.
func TestSearchRerankScores(t *testing.T) {
	m := tinyEncoder(t)
	f, err := IndexFolder(context.Background(), folderTree(t, 6), m, FolderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.Search("adds the values", 8)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := rerank.FromDense(m, 12, 24, 1, false, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, fuse := range []bool{false, true} {
		f.Reranker, f.Depth, f.Fuse, f.FuseWeight = rr, 3, fuse, 0.5
		hits, err := f.Search("adds the values", 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 8 {
			t.Fatalf("%d hits", len(hits))
		}
		for i, h := range hits {
			switch {
			case i < 3 && h.Scores.Rerank == nil:
				t.Errorf("fuse %v: row %d has no reranker score", fuse, i+1)
			case i < 3 && !fuse && h.Score != *h.Scores.Rerank:
				t.Errorf("fuse %v: row %d scored %g, its reranker score is %g", fuse, i+1, h.Score, *h.Scores.Rerank)
			case i < 3 && i > 0 && h.Score > hits[i-1].Score:
				t.Errorf("fuse %v: row %d scored %g above row %d's %g", fuse, i+1, h.Score, i, hits[i-1].Score)
			case i < 3 && fuse && !(h.Score >= 0 && h.Score <= 1):
				t.Errorf("fuse %v: row %d scored %g, not a fusion of rescaled scores (in [0, 1])", fuse, i+1, h.Score)
			case i >= 3 && (h.Scores.Rerank != nil || h.Score != h.Scores.First || h.ID != first[i].ID):
				t.Errorf("fuse %v: row %d below the depth: %+v, want the first stage's row %s", fuse, i+1, h.Scores, first[i].ID)
			}
		}
	}
}

// TestSearchRRF: with Hybrid.RRF the first stage fuses ranks; the hits
// still carry each system's own score.
func TestSearchRRF(t *testing.T) {
	f, err := IndexFolder(context.Background(), writeFiles(t, fieldTree), tinyEncoder(t), FolderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Hybrid.RRF = true
	hits, err := f.Search("widget sparkle", 3)
	if err != nil || len(hits) != 3 {
		t.Fatalf("%d hits, %v", len(hits), err)
	}
	bm := f.bm25.ScoreAll("widget sparkle")
	for i, h := range hits {
		if i > 0 && h.Score > hits[i-1].Score || h.Score > 2.0/61 {
			t.Errorf("hit %d scored %g: want reciprocal-rank scores, non-increasing", i+1, h.Score)
		}
		if d := f.Find(h.File, h.Name()); h.Scores.BM25 != bm[d] {
			t.Errorf("hit %d: BM25F %g, the index's %g", i+1, h.Scores.BM25, bm[d])
		}
	}
}

// TestIndexFolderCacheMoved: a file whose bytes the cache holds from
// another place is read from the cache with its new path, package and id.
func TestIndexFolderCacheMoved(t *testing.T) {
	cache, m := t.TempDir(), tinyEncoder(t)
	src := fieldTree["a/x.go"]
	first := writeFiles(t, map[string]string{"x.go": src})
	if _, err := IndexFolder(context.Background(), first, m, FolderOptions{Cache: cache}); err != nil {
		t.Fatal(err)
	}
	moved := writeFiles(t, map[string]string{"deep/pkg/x.go": src})
	f, err := IndexFolder(context.Background(), moved, m, FolderOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if f.Stats.Cached != 1 {
		t.Fatalf("%+v: want the file from the cache", f.Stats)
	}
	i := f.Find("deep/pkg/x.go", "Frob")
	if i < 0 || f.Funcs[i].ID != "deep/pkg.Frob" || f.Funcs[i].Package != "deep/pkg" {
		t.Errorf("the moved file's Frob: %d, %+v", i, f.Funcs)
	}
}
