package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/attnlab/attnlab/retrieve/search"
)

var retrieverTranslateCmd = &command{
	name:  "translate",
	usage: "-data DIR [-out FILE] [-force] [-per-term N] [-min-query N] [-min-pair N] [-min-lift X]",
	short: "mine the term translation table that expands BM25's queries in the hybrid",
	long: `Retriever translate mines, from the training pairs of DATA
(DATA/train.jsonl), which terms of code go with which words of a query:
for each query term q, the code terms c ≠ q with the largest
P(c|q)·log(P(c|q)/P(c)), counted once per pair, among those found with q
in at least -min-pair pairs and at least -min-lift times likelier with q
than without; q itself must be in at least -min-query queries. It keeps
-per-term of them and writes the table to OUT, a text file of one query
term a line ("term<TAB>code weight<TAB>…").

The hybrid first stage of search and retriever eval adds a query's
translations to BM25's query, weighed -translate-alpha times their weight
("reports whether" → bool, false; "sorts" → sort, stable). The table
attnlab ships (models/weights/translation) was mined by
"attnlab retriever translate -data retr -out translation.tsv" with the
defaults. An existing OUT is refused unless -force; a table with no entry
is refused and not written.

Example: attnlab retriever translate -data retr -out translation.tsv`,
	define: func(fs *flag.FlagSet) runFunc {
		o := search.TranslateOptions{}
		fs.StringVar(&o.Data, "data", "", "folder of retriever data (retriever data's -out): its training split, DIR/train.jsonl, is mined (required)")
		fs.StringVar(&o.Out, "out", "translation.tsv", "the table's file")
		fs.BoolVar(&o.Force, "force", false, "replace an existing OUT")
		fs.IntVar(&o.Mine.PerTerm, "per-term", 3, "code terms kept per query term")
		fs.IntVar(&o.Mine.MinQuery, "min-query", 5, "training queries a query term must be in")
		fs.IntVar(&o.Mine.MinPair, "min-pair", 3, "pairs a query term and a code term must share")
		fs.Float64Var(&o.Mine.MinLift, "min-lift", 2, "P(code term | query term) over P(code term), at least")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			switch {
			case o.Data == "":
				return usagef("-data is required")
			case o.Out == "":
				return usagef(`-out "": want the table's file`)
			case o.Mine.PerTerm < 1 || o.Mine.MinQuery < 1 || o.Mine.MinPair < 1:
				return usagef("-per-term %d, -min-query %d, -min-pair %d: want >= 1", o.Mine.PerTerm, o.Mine.MinQuery, o.Mine.MinPair)
			case !(o.Mine.MinLift > 1) || o.Mine.MinLift > 1e9:
				return usagef("-min-lift %v: want a value above 1", o.Mine.MinLift)
			}
			res, err := search.Translate(ctx, o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "%d query terms translated, %d entries, from %d training pairs: %s\n", res.Terms, res.Entries, res.Pairs, o.Out)
			return err
		}
	},
}
