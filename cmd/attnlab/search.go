package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/retrieve/dense"
)

var searchCmd = register(&command{
	name:  "search",
	usage: "-index DIR [-k N] [-code] QUERY…",
	short: "search Go code in natural language with a trained dense index",
	long: `Search embeds the query with the encoder of an index folder (written by
"attnlab retriever train" as OUT/index, or by "retriever eval -write-index")
and prints the -k code documents whose embeddings have the largest cosine
similarity with it: rank, score, package, file:line and the function's
first line. The words that are not flags form the query (flags may come
before or after it; after "--" every word is the query's). A query in which
the encoder reads nothing (no word of two letters or more that is not a
stop word) is an error. The time to load the index, to embed the query and
to search goes to stderr.

Example: attnlab search -index run/index "reports whether the string has the given prefix"`,
})

type searchOpts struct {
	index string
	k     int
	code  bool
}

func init() {
	searchCmd.positional = true
	searchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &searchOpts{}
		fs.StringVar(&o.index, "index", "", "index folder (required)")
		fs.IntVar(&o.k, "k", 10, "results to print")
		fs.BoolVar(&o.code, "code", false, "print each result's whole code instead of its first line")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			return runSearch(ctx, o, args, stdout)
		}
	}
}

func runSearch(ctx context.Context, o *searchOpts, args []string, stdout io.Writer) error {
	if o.index == "" {
		return usageError{"-index is required"}
	}
	query := strings.TrimSpace(strings.Join(args, " "))
	if query == "" {
		return usageError{"missing query"}
	}
	if o.k < 1 {
		return usageError{fmt.Sprintf("-k %d: want >= 1", o.k)}
	}
	start := time.Now()
	x, err := dense.LoadIndex(o.index)
	if err != nil {
		return err
	}
	load := time.Since(start)
	if err := x.Model.CheckQuery(query); err != nil {
		return err
	}

	// the two steps of a search, timed apart: the encoder, then the scan
	q := make([]float32, x.Flat.D)
	start = time.Now()
	x.Model.EmbedQuery(q, query)
	embed := time.Since(start)
	start = time.Now()
	docs := x.Flat.Search(q, o.k)
	scan := time.Since(start)
	scores := make([]float64, len(docs))
	x.Flat.Dots(scores, q, docs)

	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for r, d := range docs {
		p := x.Docs[d]
		fmt.Fprintf(w, "%d\t%.4f\t%s\t%s:%d\t%s\n", r+1, scores[r], p.Package, p.File, p.Line, firstLine(p.Code))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if o.code {
		for r, d := range docs {
			fmt.Fprintf(stdout, "\n// %d. %s (%s:%d)\n%s\n", r+1, x.Docs[d].ID, x.Docs[d].File, x.Docs[d].Line, x.Docs[d].Code)
		}
	}
	fmt.Fprintf(os.Stderr, "index of %d documents loaded in %s; query embedded in %s, searched in %s\n",
		len(x.Docs), roundDuration(load), roundDuration(embed), roundDuration(scan))
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "{"))
}
