package search

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
)

// benchQueries are questions a user might ask of a compiler's and
// toolchain's code.
var benchQueries = []string{
	"parse the command line flags",
	"reports whether the type is a pointer",
	"write the object file to disk",
	"returns the size of the type in bytes",
	"resolve an import path to a package directory",
	"sort the symbols by address",
	"inline small functions at call sites",
	"print a diagnostic message with the source position",
}

// BenchmarkFolderSearch times a search of a large folder of Go code (the
// Go distribution's cmd tree, about 12,000 functions with a body, or
// $ATTNLAB_BENCH_SRC) with the shipped encoder, without a reranker and
// with the shipped reranker re-scoring the top 5, 10 and 20, ten results
// each, BM25F's queries expanded by the shipped translation table:
// the query latency of attnlab search -src. $ATTNLAB_BENCH_ENCODER and
// $ATTNLAB_BENCH_RERANKER replace the shipped models. The index is built
// once (with the embeddings cache of attnlab search, so later runs read it)
// and its time logged.
func BenchmarkFolderSearch(b *testing.B) {
	if testing.Short() {
		b.Skip("indexes a large folder on its first run")
	}
	src := os.Getenv("ATTNLAB_BENCH_SRC")
	if src == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skip("no Go distribution to search:", err)
		}
		src = filepath.Join(strings.TrimSpace(string(out)), "src", "cmd")
	}
	encDir, rrDir := os.Getenv("ATTNLAB_BENCH_ENCODER"), os.Getenv("ATTNLAB_BENCH_RERANKER")
	var err error
	if encDir == "" {
		if encDir, err = models.Dir(models.Encoder); err != nil {
			b.Skip(err)
		}
	}
	if rrDir == "" {
		if rrDir, err = models.Dir(models.Reranker); err != nil {
			b.Skip(err)
		}
	}
	m, err := dense.LoadFolder(encDir)
	if err != nil {
		b.Fatal(err)
	}
	rr, err := rerank.Load(rrDir)
	if err != nil {
		b.Fatal(err)
	}
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "attnlab", "search")
	}
	f, err := IndexFolder(context.Background(), src, m, FolderOptions{Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	// as search does: the shipped term translation table expands BM25F's queries
	trDir, err := models.Dir(models.Translation)
	if err != nil {
		b.Skip(err)
	}
	tab, err := retrieve.LoadTranslation(filepath.Join(trDir, retrieve.TranslationFile))
	if err != nil {
		b.Fatal(err)
	}
	f.Hybrid = retrieve.Hybrid{Translation: tab, TranslateAlpha: DefaultTranslateAlpha}
	b.Logf("%s: %d functions in %d files (%d files from the cache, %d functions embedded) indexed in %s",
		src, f.Stats.Funcs, f.Stats.Files, f.Stats.Cached, f.Stats.Embedded, f.Stats.Time)
	for _, depth := range []int{0, 5, 10, 20} {
		name := "rerank=none"
		if depth > 0 {
			name = fmt.Sprintf("rerank=%d", depth)
		}
		b.Run(fmt.Sprintf("funcs=%d/%s", f.Stats.Funcs, name), func(b *testing.B) {
			f.Reranker, f.Depth, f.Fuse, f.FuseWeight = nil, depth, true, rerank.DefaultFuseWeight
			if depth > 0 {
				f.Reranker = rr
			}
			i := 0
			for b.Loop() {
				// each search scores afresh: no score is kept between searches
				if _, err := f.Search(benchQueries[i%len(benchQueries)], 10); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
