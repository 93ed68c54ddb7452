package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/retrieve/search"
)

var searchCmd = register(&command{
	name:  "search",
	usage: "(-src DIR [-model DIR] [-reranker DIR|shipped] [-cache DIR] | -index DIR) [-k N] [-code] QUERY…",
	short: "search Go code in natural language: a folder of your own, or a prepared index",
	long: `Search finds the Go functions that answer a question in words.

With -src it indexes a folder of Go code (every function and method with a
body in its non-test .go files; vendor, testdata, hidden folders and
generated files skipped, unreadable files counted) with the dual encoder of
-model, ranks by BM25's and the encoder's scores, each rescaled to [0, 1]
over the candidates and weighed 0.3 and 0.7 (-bm25-weight; -fusion rrf:
the reciprocal rank fusion of their ranks instead), and re-scores the top
-rerank-depth with the reranker of -reranker, ordering them by the first stage's
and the reranker's scores, rescaled alike and weighed -fuse-weight and the
rest (-fuse=false: by the reranker alone). Without -model it uses the
encoder and the reranker
attnlab ships (-reranker none: no reranking; with -model, -reranker
shipped asks for the shipped reranker). Embeddings are
cached by file content under -cache, per encoder: a second search of an
unchanged tree embeds nothing, an edited file is embedded again alone, and
a cache written by another model is never read.

With -index it searches an index folder (written by "attnlab retriever
train" as OUT/index, or by "retriever eval -write-index") by the cosine
similarity of the embeddings alone.

It prints rank, score, file:line, the function and its first line. The
words that are not flags form the query (flags may come before or after it;
after "--" every word is the query's). A query in which the encoder reads
nothing is an error. Timings go to stderr.

Example: attnlab search -src ~/src/myproject "parse the config file"
         attnlab search -src ~/src/myproject -model run/model -reranker run/reranker "parse the config file"`,
})

type searchOpts struct {
	src, index, model, reranker, cache string
	k, depth                           int
	code, quiet, fuse                  bool
	hybrid                             retrieve.Hybrid
	fuseWeight                         float64
}

func init() {
	searchCmd.positional = true
	searchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &searchOpts{}
		fs.StringVar(&o.src, "src", "", "folder of Go code to index and search")
		fs.StringVar(&o.model, "model", "", "with -src: the dual encoder (retriever train's OUT/model; default: the shipped encoder)")
		fs.StringVar(&o.reranker, "reranker", "", "with -src: the reranker (retriever rerank's OUT/reranker; shipped: the shipped one; none: no reranking; default: the shipped one without -model, none with it)")
		fs.StringVar(&o.cache, "cache", defaultCache(), "with -src: folder of cached embeddings (\"\" none)")
		fs.IntVar(&o.depth, "rerank-depth", 5, "with -src and a reranker: candidates the reranker re-scores (the rest keep the first stage's order)")
		oldName(fs, "depth", "rerank-depth")
		fs.BoolVar(&o.fuse, "fuse", true, "with -src and a reranker: order the re-scored candidates by the fusion of their first-stage and reranker scores (-fuse-weight) (false: by the reranker alone)")
		checkHybrid := hybridFlags(fs, &o.hybrid, &o.fuseWeight)
		fs.StringVar(&o.index, "index", "", "an index folder to search instead of -src")
		fs.IntVar(&o.k, "k", 10, "results to print")
		fs.BoolVar(&o.code, "code", false, "print each result's whole code instead of its first line")
		fs.BoolVar(&o.quiet, "quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			query := strings.TrimSpace(strings.Join(args, " "))
			switch {
			case (o.src == "") == (o.index == ""):
				return usagef("give one of -src DIR and -index DIR")
			case query == "":
				return usagef("missing query")
			case o.k < 1 || o.depth < 1:
				return usagef("-k %d, -rerank-depth %d: want >= 1", o.k, o.depth)
			}
			if err := checkHybrid(); err != nil {
				return err
			}
			if o.index != "" {
				return searchIndex(o, query, stdout)
			}
			return searchFolder(ctx, o, query, stdout)
		}
	}
}

// defaultCache is the user's cache folder for search embeddings.
func defaultCache() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "attnlab", "search")
	}
	return ""
}

func searchFolder(ctx context.Context, o *searchOpts, query string, stdout io.Writer) error {
	// the shipped models unless told otherwise: the reranker with the
	// shipped encoder (as retriever eval), none with another
	var err error
	if o.reranker == "shipped" {
		if o.reranker, err = shippedModel(models.Reranker); err != nil {
			return err
		}
	}
	if err := shippedRetriever(&o.model, &o.reranker); err != nil {
		return err
	}
	m, err := dense.LoadFolder(o.model)
	if err != nil {
		return err
	}
	if err := m.CheckQuery(query); err != nil {
		return err
	}
	var rr *rerank.Model // loaded before the folder is indexed, not after
	if o.reranker != "" {
		if rr, err = rerank.Load(o.reranker); err != nil {
			return fmt.Errorf("-reranker: %w", err)
		}
	}
	var bar *progress
	f, err := search.IndexFolder(ctx, o.src, m, search.FolderOptions{Cache: o.cache, Progress: func(done, n int) {
		if bar == nil {
			bar = newProgress(n, "embedding", o.quiet)
		}
		bar.set(done, "")
	}})
	if err != nil {
		return err
	}
	f.Hybrid = o.hybrid
	if rr != nil {
		f.Reranker, f.Depth, f.Fuse, f.FuseWeight = rr, o.depth, o.fuse, o.fuseWeight
	}
	st := f.Stats
	start := time.Now()
	hits, err := f.Search(query, o.k)
	if err != nil {
		return err
	}
	took := time.Since(start)
	printHits(stdout, hits, o.code)
	fmt.Fprintf(progressOut, "%s: %d functions in %d files (%d from the cache, %d embedded; %d generated and %d unreadable skipped) indexed in %s; searched in %s\n",
		o.src, st.Funcs, st.Files, st.Cached, st.Embedded, st.Generated, st.Unreadable, roundDuration(st.Time), roundDuration(took))
	return nil
}

func searchIndex(o *searchOpts, query string, stdout io.Writer) error {
	start := time.Now()
	x, err := dense.LoadIndex(o.index)
	if err != nil {
		return err
	}
	load := time.Since(start)
	hits, embed, scan, err := search.SearchIndex(x, query, o.k)
	if err != nil {
		return err
	}
	printHits(stdout, hits, o.code)
	fmt.Fprintf(progressOut, "index of %d documents loaded in %s; query embedded in %s, searched in %s\n",
		len(x.Docs), roundDuration(load), roundDuration(embed), roundDuration(scan))
	return nil
}

func printHits(w io.Writer, hits []search.Hit, code bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for r, h := range hits {
		fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s:%d\t%s\n", r+1, h.Score, h.Package, h.File, h.Line, firstLine(h.Code))
	}
	tw.Flush()
	if code {
		for r, h := range hits {
			fmt.Fprintf(w, "\n// %d. %s (%s:%d)\n%s\n", r+1, h.ID, h.File, h.Line, h.Code)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "{"))
}
