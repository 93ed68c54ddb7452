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
	usage: "(-src DIR [-model DIR] [-reranker DIR|shipped] [-cache DIR] [-generated] | -index DIR) [-k N] [-code] [-json] QUERY…",
	short: "search Go code in natural language: a folder of your own, or a prepared index",
	long: `Search finds the Go functions that answer a question in words.

With -src it indexes a folder of Go code: every function and method with a
body in its non-test .go files (vendor, testdata and hidden folders
skipped, unreadable files counted; generated files skipped unless
-generated), each by three fields, its doc comment, its signature and its
body. Build-tag twins (the same package, receiver and name in several
files) are indexed once and shown once, with their other files. It ranks
by BM25F over the three fields (-fields) and the dual encoder of -model
(the cosine of the query with the code, plus that with the doc comment
read as a query is), each score rescaled to [0, 1] over the candidates and
weighed -bm25-weight and the rest (-fusion rrf: the reciprocal rank fusion
of their ranks instead). With a reranker (-reranker) it re-scores the top
-rerank-depth and orders them by the first stage's and the reranker's scores,
rescaled alike and weighed -fuse-weight and the rest (-fuse=false: by the
reranker alone). Without -model it uses the encoder attnlab ships and no
reranker (-reranker shipped adds the shipped reranker). Embeddings are
cached by file content under -cache, per encoder: a second search of an
unchanged tree embeds nothing, an edited file is embedded again alone, and
a cache written by another model or by an older attnlab is never read.

With -index it searches an index folder (written by "attnlab retriever
train" as OUT/index, or by "retriever eval -write-index") the same way,
each document's query taken as its doc comment.

It prints rank, score, path:line (relative to the folder the command runs
in, as an editor opens it), the function and its first line; -json prints
{"query", "hits": [{"path", "line", "func", "score", "scores": {"bm25",
"dense", "first", "rerank"}, "variants"}]} instead. The score is the one
that ordered the row: the first stage's blend, or for the rows the
reranker re-scored its score (fused with the first stage's); "scores" are
each system's own. The words that are not flags form the query (flags may
come before or after it; after "--" every word is the query's). A query in
which the encoder reads nothing is an error. Timings go to stderr.

Example: attnlab search -src ~/src/myproject "parse the config file"
         attnlab search -src ~/src/myproject -json -k 5 "parse the config file"
         attnlab search -src ~/src/myproject -model run/model -reranker run/reranker "parse the config file"`,
})

type searchOpts struct {
	src, index, model, reranker, cache string
	k, depth                           int
	code, quiet, fuse, json, generated bool
	hybrid                             retrieve.Hybrid
	fields                             search.Fields
	fuseWeight                         float64
}

func init() {
	searchCmd.positional = true
	searchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &searchOpts{}
		fs.StringVar(&o.src, "src", "", "folder of Go code to index and search")
		fs.StringVar(&o.model, "model", "", "with -src: the dual encoder (retriever train's OUT/model; default: the shipped encoder)")
		fs.StringVar(&o.reranker, "reranker", "", "the reranker (retriever rerank's OUT/reranker; shipped: the shipped one; none or empty: no reranking)")
		fs.StringVar(&o.cache, "cache", defaultCache(), "with -src: folder of cached embeddings (\"\" none)")
		fs.BoolVar(&o.generated, "generated", false, "with -src: index generated files (\"Code generated … DO NOT EDIT.\") too")
		fs.IntVar(&o.depth, "rerank-depth", 5, "with a reranker: candidates the reranker re-scores (the rest keep the first stage's order)")
		oldName(fs, "depth", "rerank-depth")
		fs.BoolVar(&o.fuse, "fuse", true, "with a reranker: order the re-scored candidates by the fusion of their first-stage and reranker scores (-fuse-weight) (false: by the reranker alone)")
		checkHybrid := hybridFlags(fs, &o.hybrid, &o.fuseWeight)
		checkTranslation := translationFlags(fs, &o.hybrid)
		checkFields := fieldFlags(fs, &o.fields)
		fs.StringVar(&o.index, "index", "", "an index folder to search instead of -src")
		fs.IntVar(&o.k, "k", 10, "results to print")
		fs.BoolVar(&o.code, "code", false, "print each result's whole code instead of its first line")
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
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
			case o.json && o.code:
				return usagef("-json and -code: choose one (the JSON has no code)")
			}
			if err := checkHybrid(); err != nil {
				return err
			}
			if err := checkFields(); err != nil {
				return err
			}
			if err := checkTranslation(o.src != ""); err != nil {
				return err
			}
			if o.index != "" {
				return searchIndex(ctx, o, query, stdout)
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

// searchReranker loads the reranker -reranker names: shipped, a folder,
// or none.
func searchReranker(name string) (*rerank.Model, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "shipped":
		dir, err := shippedModel(models.Reranker)
		if err != nil {
			return nil, err
		}
		name = dir
	}
	rr, err := rerank.Load(name)
	if err != nil {
		return nil, fmt.Errorf("-reranker: %w", err)
	}
	return rr, nil
}

func searchFolder(ctx context.Context, o *searchOpts, query string, stdout io.Writer) error {
	var err error
	if o.model == "" {
		if o.model, err = shippedModel(models.Encoder); err != nil {
			return err
		}
	}
	m, err := dense.LoadFolder(o.model)
	if err != nil {
		return err
	}
	if err := m.CheckQuery(query); err != nil {
		return err
	}
	rr, err := searchReranker(o.reranker) // loaded before the folder is indexed, not after
	if err != nil {
		return err
	}
	var bar *progress
	f, err := search.IndexFolder(ctx, o.src, m, search.FolderOptions{Cache: o.cache, Generated: o.generated, Fields: o.fields, Progress: func(done, n int) {
		if bar == nil {
			bar = newProgress(n, "embedding", o.quiet)
		}
		bar.set(done, "")
	}})
	if err != nil {
		return err
	}
	took, err := o.rank(stdout, f, rr, query, f.Root)
	if err != nil {
		return err
	}
	st := f.Stats
	gen := "skipped"
	if o.generated {
		gen = "indexed"
	}
	fmt.Fprintf(progressOut, "%s: %d functions (%d with a doc comment; %d build-tag twins grouped) in %d files (%d from the cache, %d embedded; %d generated %s and %d unreadable skipped) indexed in %s; searched in %s\n",
		o.src, st.Funcs, st.Documented, st.Twins, st.Files, st.Cached, st.Embedded, st.Generated, gen, st.Unreadable, roundDuration(st.Time), roundDuration(took))
	return nil
}

func searchIndex(ctx context.Context, o *searchOpts, query string, stdout io.Writer) error {
	start := time.Now()
	x, err := dense.LoadIndex(o.index)
	if err != nil {
		return err
	}
	if err := x.Model.CheckQuery(query); err != nil {
		return err
	}
	rr, err := searchReranker(o.reranker)
	if err != nil {
		return err
	}
	var bar *progress
	f, err := search.FromIndex(ctx, x, o.fields, func(done, n int) {
		if bar == nil {
			bar = newProgress(n, "embedding the docs", o.quiet)
		}
		bar.set(done, "")
	})
	if err != nil {
		return err
	}
	load := time.Since(start)
	took, err := o.rank(stdout, f, rr, query, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(progressOut, "index of %d documents loaded in %s; searched in %s\n", len(x.Docs), roundDuration(load), roundDuration(took))
	return nil
}

// rank searches f for query as the flags say (the hybrid, the reranker rr
// when not nil) and prints the hits, their paths under root; it returns
// the time the search took.
func (o *searchOpts) rank(w io.Writer, f *search.Folder, rr *rerank.Model, query, root string) (time.Duration, error) {
	f.Hybrid = o.hybrid
	if rr != nil {
		f.Reranker, f.Depth, f.Fuse, f.FuseWeight = rr, o.depth, o.fuse, o.fuseWeight
	}
	start := time.Now()
	hits, err := f.Search(query, o.k)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, printHits(w, query, root, hits, o)
}

// hitPath returns where a hit's file is, relative to the folder the
// command runs in when it is under root (else absolute); with no root
// (an index), the path the index records.
func hitPath(root, file string) string {
	if root == "" {
		return file
	}
	abs, err := filepath.Abs(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return filepath.Join(root, file)
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil {
			return rel
		}
	}
	return abs
}

// jsonHit is a hit as -json prints it.
type jsonHit struct {
	Path     string        `json:"path"`
	Line     int           `json:"line"`
	Func     string        `json:"func"`
	Score    float64       `json:"score"`
	Scores   search.Scores `json:"scores"`
	Variants []string      `json:"variants,omitempty"` // path:line of the build-tag twins
}

func printHits(w io.Writer, query, root string, hits []search.Hit, o *searchOpts) error {
	if o.json {
		out := struct {
			Query string    `json:"query"`
			Hits  []jsonHit `json:"hits"`
		}{Query: query, Hits: []jsonHit{}}
		for _, h := range hits {
			j := jsonHit{Path: hitPath(root, h.File), Line: h.Line, Func: h.Name(), Score: h.Score, Scores: h.Scores}
			for _, v := range h.Variants {
				j.Variants = append(j.Variants, fmt.Sprintf("%s:%d", hitPath(root, v.File), v.Line))
			}
			out.Hits = append(out.Hits, j)
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for r, h := range hits {
		twins := ""
		if n := len(h.Variants); n > 0 {
			twins = fmt.Sprintf("  (+%d build-tag twin%s)", n, plural(n))
		}
		fmt.Fprintf(tw, "%d\t%.4f\t%s:%d\t%s\t%s%s\n", r+1, h.Score, hitPath(root, h.File), h.Line, h.Name(), firstLine(h.Code), twins)
	}
	tw.Flush()
	if o.code {
		for r, h := range hits {
			fmt.Fprintf(w, "\n// %d. %s (%s:%d)\n%s\n", r+1, h.Name(), hitPath(root, h.File), h.Line, h.Code)
		}
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "{"))
}
