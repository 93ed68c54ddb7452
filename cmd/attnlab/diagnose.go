package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/retrieve/search"
)

var retrieverDiagnoseCmd = &command{
	name:  "diagnose",
	usage: "-data DIR [-model DIR] [-reranker DIR] [-src DIR] [-corpus DIR] [-batch N] [-sample N] [-near J] [-json]",
	short: "measure the known failure modes of dense retrievers on a training set and its models",
	long: `Retriever diagnose measures, on the training split of DATA and the models
trained on it, what the design notes warn about:

  - the share of in-batch negatives (consecutive batches of -batch pairs,
    shuffled) that are copies or near-copies of the positive, by code and
    by query (term Jaccard ≥ -near);
  - the share of mined hard negatives (BM25's, and the dual encoder's with
    -model) that look like label errors: the positive's body, or a doc
    comment near-identical to the positive's;
  - with -reranker, its length bias: the mean Spearman correlation of its
    score with code length among the non-relevant candidates of the first
    stage, on DATA/val.jsonl;
  - each system's accuracy on three contrast sets: sibling APIs (each
    validation function against its namesake in another package, training
    code included, whose doc is similar: bytes.Contains and
    strings.Contains), each doc against its negation, and deprecated
    functions against the replacement their comment names (found in -src
    and -corpus).

Each number comes with what it cannot show. -sample bounds the training
pairs examined (a seeded sample).

Example: attnlab retriever diagnose -data retr -model run/model -reranker run/reranker -corpus ~/.cache/attnlab/corpus`,
	define: func(fs *flag.FlagSet) runFunc {
		data := fs.String("data", "", "folder of train.jsonl and val.jsonl (required)")
		model := fs.String("model", "", "the dual encoder (\"\" none)")
		reranker := fs.String("reranker", "", "the reranker (\"\" none)")
		src := fs.String("src", "", "Go source for the deprecations (default: $(go env GOROOT)/src)")
		corpusDir := fs.String("corpus", "", "Debian corpus folder read after -src for the deprecations")
		o := search.DiagnoseOptions{}
		fs.IntVar(&o.Batch, "batch", 64, "training batch size (in-batch negatives)")
		fs.IntVar(&o.Sample, "sample", 5000, "training pairs examined, a seeded sample (0: all)")
		fs.Float64Var(&o.Near, "near", 0.8, "term Jaccard from which two texts are near-duplicates")
		fs.IntVar(&o.MineDepth, "mine-depth", 20, "results examined per query when mining, as training does")
		fs.Float64Var(&o.MineMargin, "mine-margin", 0.05, "the mining margin, as training uses it")
		fs.Uint64Var(&o.Seed, "seed", 1, "seed of the sample and the batches")
		asJSON := fs.Bool("json", false, "print the diagnosis as JSON")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if *data == "" {
				return usagef("-data is required")
			}
			if o.Batch < 2 || !(o.Near > 0 && o.Near <= 1) || o.Sample < 0 {
				return usagef("-batch %d, -near %g, -sample %d: want batch >= 2, near in (0, 1], sample >= 0", o.Batch, o.Near, o.Sample)
			}
			if o.MineDepth < 1 || o.MineMargin != o.MineMargin {
				return usagef("-mine-depth %d, -mine-margin %g: want mine-depth >= 1 and a margin (negative: keep all)", o.MineDepth, o.MineMargin)
			}
			var err error
			if o.Train, err = retrieve.ReadJSONL(retrieve.SplitFile(*data, retrieve.SplitTrain)); err != nil {
				return err
			}
			if o.Eval, err = retrieve.ReadJSONL(retrieve.SplitFile(*data, retrieve.SplitVal)); err != nil {
				return err
			}
			if *model != "" {
				if o.Model, err = dense.LoadFolder(*model); err != nil {
					return err
				}
			}
			if *reranker != "" {
				if o.Reranker, err = rerank.Load(*reranker); err != nil {
					return err
				}
			}
			if *src == "" {
				*src = filepath.Join(corpus.GoRoot(), "src")
			}
			srcs := []retrieve.Source{{Dir: *src}}
			if *corpusDir != "" {
				deb, err := corpus.Debian(*corpusDir)
				if err != nil {
					return err
				}
				for _, d := range deb {
					srcs = append(srcs, retrieve.Source{Name: d.Name, Dir: d.Dir})
				}
			}
			if o.Deprecated, err = retrieve.Deprecations(ctx, srcs); err != nil {
				return err
			}
			d, err := search.Diagnose(ctx, o)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(stdout, d)
			}
			writeDiagnosis(stdout, d)
			return nil
		}
	},
}

func writeDiagnosis(w io.Writer, d *search.Diagnosis) {
	fmt.Fprintf(w, "%d training pairs examined\n\n", d.Pairs)
	for _, group := range []struct {
		title  string
		shares []search.Share
	}{{"In-batch negatives", d.InBatch}, {"Mined hard negatives", d.Hard}} {
		fmt.Fprintln(w, group.title)
		for _, s := range group.shares {
			fmt.Fprintf(w, "  %6.2f%%  %s (%d of %d)\n           cannot show: %s\n", 100*s.Value, s.Name, s.Count, s.Of, s.Cannot)
		}
		fmt.Fprintln(w)
	}
	if b := d.LengthBias; b != nil {
		fmt.Fprintf(w, "Reranker length bias\n  ρ = %+.3f  %s (%d queries)\n           cannot show: %s\n\n", b.Value, b.Name, b.Of, b.Cannot)
	}
	fmt.Fprintln(w, "Contrast sets (accuracy; ties count as wrong)")
	for _, c := range d.Contrasts {
		fmt.Fprintf(w, "  %s: %d items\n", c.Name, c.Items)
		var names []string
		for n := range c.Accuracy {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "    %-9s %.3f (ties %.3f)\n", n, c.Accuracy[n], c.Ties[n])
		}
		if c.Example != "" {
			fmt.Fprintf(w, "    e.g. %s\n", c.Example)
		}
		fmt.Fprintf(w, "    cannot show: %s\n", c.Cannot)
	}
}
