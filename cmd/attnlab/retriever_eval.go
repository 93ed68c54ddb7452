package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/search"
)

var retrieverEvalCmd = &command{
	name:  "eval",
	usage: "(-data DIR | -pairs FILE.jsonl | -queries FILE.jsonl -src DIR) [-model DIR] [-reranker DIR] [-systems LIST] [-json | -markdown] [-write-index DIR [-force]]",
	short: "measure retrieval systems on a file of (query, code) pairs, or of developer queries over a folder",
	long: `Retriever eval reads the test split of a folder of retriever data (-data
DIR: DIR/test.jsonl, as retriever data writes it; -data is a folder in
every retriever command) or any JSONL file of pairs (-pairs FILE, e.g.
DIR/val.jsonl) and, for each system, ranks
all the file's code documents for each query (the gold is the query's own
document): MRR@10, Recall@1/5/10 and nDCG@10, then the CodeSearchNet
protocol (the gold among 999 distractors drawn with -seed): CSN MRR, the
time to build the system's index, and the time of one top-10 query.

Systems: bm25 (Okapi BM25, k1 = 1.2, b = 0.75, over code-aware terms);
dense (the encoder of -model, exhaustive cosine search); hybrid (over the
top 100 of bm25 and of dense, their scores rescaled to [0, 1] and weighed
-bm25-weight and the rest; with -fusion rrf the reciprocal rank fusion,
k = 60, of their ranks); FIRST+rerank
(the cross-encoder of -reranker re-scores the top -rerank-depth candidates
of the first stage FIRST) and FIRST+rerank+fused (the same candidates
ordered by adding the first stage's and the reranker's scores, rescaled,
weighed -fuse-weight and the rest; -fuse-weight 0: by the reciprocal rank
fusion of their ranks). By default,
every system the given models allow. A file of 10 pairs or fewer is
measured with a warning: every gold is then in the top 10. A pair whose
code repeats an earlier pair's (up to white space) would tie with its gold:
such pairs are dropped with a warning that counts them, the first kept.

-write-index saves the dense index of the file (for attnlab search); an
existing folder is refused unless -force, and it may not be an input.

With -queries FILE -src DIR it measures search as a developer uses it:
FILE holds one {"query", "root", "path", "func"} object a line, a question
in the developer's words and the function that answers it (root: the
folder under DIR searched, as "attnlab search -src DIR/ROOT" would; path:
the function's file relative to it; func: Name or Recv.Name). Each root is
indexed once (doc comments as a field of their own, embeddings cached
under -cache) and searched by every system: bm25-code (BM25 over the code
alone), bm25-doc+code (BM25 over the doc comment and the code as one
text), bm25f (over doc, signature and body, weighed by -fields), dense-code
(the encoder on the code alone), dense (code and doc, -fields dense-doc),
hybrid (bm25f and dense, as search ranks) and with -reranker
hybrid+rerank and hybrid+rerank+fused. It prints hit@1, hit@3, hit@10 and
MRR@10 of each, beside BM25 over doc and code, and the median time of a
query.

Example: attnlab retriever eval -data retr -model run/model -reranker run/reranker
         attnlab retriever eval -pairs retr/val.jsonl -systems bm25,dense
         attnlab retriever eval -queries retrieve/testdata/devqueries/std-test.jsonl -src $(go env GOROOT)/src`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &search.EvalOptions{}
		data := fs.String("data", "", "folder of retriever data (retriever data's -out): its test split, DIR/test.jsonl")
		fs.StringVar(&o.Data, "pairs", "", "JSONL file of query–code pairs, instead of -data")
		q := &search.QueryEvalOptions{}
		fs.StringVar(&q.Queries, "queries", "", "JSONL file of developer queries, each with its gold function, searched in -src (instead of -data or -pairs; several files: separated by commas)")
		fs.StringVar(&q.Src, "src", "", "with -queries: the folder the queries' roots are in")
		fs.StringVar(&q.Cache, "cache", defaultCache(), "with -queries: folder of cached embeddings, as search's (\"\" none)")
		fs.BoolVar(&q.Generated, "generated", false, "with -queries: index generated files too")
		fs.BoolVar(&q.RerankDoc, "rerank-doc", false, "with -queries: the reranker reads the first paragraph of each function's doc comment, as a comment, before its code")
		checkFields := fieldFlags(fs, &q.Fields)
		systems := fs.String("systems", "", "comma-separated systems: "+strings.Join(retrieve.SystemNames(), ", ")+" (default: all the models allow)")
		fs.StringVar(&o.Model, "model", "", "dense encoder: a checkpoint folder (retriever train's OUT/model) or an index folder (default: the shipped encoder; none: BM25 alone)")
		fs.StringVar(&o.Reranker, "reranker", "", "cross-encoder checkpoint (retriever rerank's OUT/reranker) for the +rerank systems (default: the shipped reranker without -model, none with it)")
		fs.IntVar(&o.Depth, "rerank-depth", 5, "first-stage candidates the reranker re-scores per query (5: as search does)")
		checkHybrid := hybridFlags(fs, &o.Hybrid, &o.FuseWeight)
		checkTranslation := translationFlags(fs, &o.Hybrid)
		fs.StringVar(&o.WriteIndex, "write-index", "", "save the dense index of the file's code to this folder (needs -model)")
		fs.BoolVar(&o.Force, "force", false, "replace an existing -write-index folder")
		fs.IntVar(&o.Candidates, "candidates", 1000, "CodeSearchNet candidate set: the gold and candidates−1 distractors")
		fs.Uint64Var(&o.Seed, "seed", 1, "seed of the distractor draw")
		fs.IntVar(&o.Workers, "workers", 0, "queries evaluated in parallel (0: GOMAXPROCS); 1 for undisturbed timings")
		asJSON := fs.Bool("json", false, "print the result as JSON")
		asMarkdown := fs.Bool("markdown", false, "print the result as a Markdown table, with each system's MRR@10 over BM25's")
		quiet := fs.Bool("quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if q.Queries == "" {
				if err := pairsFile(*data, &o.Data); err != nil {
					return err
				}
			}
			switch {
			case q.Queries != "" && (*data != "" || o.Data != ""):
				return usagef("-queries and -data or -pairs: choose one")
			case q.Queries != "" && q.Src == "":
				return usagef("-queries needs -src DIR, the folder its roots are in")
			case q.Queries != "" && o.WriteIndex != "":
				return usagef("-write-index goes with -data or -pairs")
			case *asJSON && *asMarkdown:
				return usagef("-json and -markdown: choose one")
			case o.Candidates < 2 || o.Workers < 0 || o.Workers > retrieve.MaxWorkers || o.Depth < 1:
				return usagef("-candidates %d, -workers %d, -rerank-depth %d: want candidates >= 2, workers in [0, %d], depth >= 1", o.Candidates, o.Workers, o.Depth, retrieve.MaxWorkers)
			}
			if err := checkHybrid(); err != nil {
				return err
			}
			if err := checkFields(); err != nil {
				return err
			}
			if err := checkTranslation(q.Queries != ""); err != nil {
				return err
			}
			if q.Queries != "" {
				// the shipped encoder, and a reranker only when asked for
				if err := shippedRetriever(&o.Model, &o.Reranker, false); err != nil {
					return err
				}
				q.Model, q.Reranker, q.Depth, q.Hybrid, q.FuseWeight = o.Model, o.Reranker, o.Depth, o.Hybrid, o.FuseWeight
				if *systems != "" {
					for _, s := range strings.Split(*systems, ",") {
						q.Systems = append(q.Systems, strings.TrimSpace(s))
					}
				}
				format := ""
				switch {
				case *asJSON:
					format = "json"
				case *asMarkdown:
					format = "markdown"
				}
				return runQueryEval(ctx, q, format, *quiet, stdout)
			}
			if o.Model == "none" {
				o.Model = ""
				if o.Reranker == "none" {
					o.Reranker = ""
				}
			} else if err := shippedRetriever(&o.Model, &o.Reranker, true); err != nil {
				return err
			}
			if *systems != "" {
				for _, s := range strings.Split(*systems, ",") {
					s = strings.TrimSpace(s)
					if err := retrieve.CheckSystem(s, o.Model != "", o.Reranker != ""); err != nil {
						return usagef("-systems: %v", err)
					}
					o.Systems = append(o.Systems, s)
				}
			}
			if o.WriteIndex != "" && o.Model == "" {
				return usagef("-write-index needs -model")
			}
			format := ""
			switch {
			case *asJSON:
				format = "json"
			case *asMarkdown:
				format = "markdown"
			}
			return runRetrieverEval(ctx, o, format, *quiet, stdout)
		}
	},
}

// pairsFile sets *pairs, the file of -pairs, from -data: the test split
// of the folder data. A file given as -data (its old meaning) is read as
// -pairs, with a note.
func pairsFile(data string, pairs *string) error {
	switch {
	case data != "" && *pairs != "":
		return usagef("-data and -pairs: choose one")
	case data == "" && *pairs == "":
		return usagef("-data is required: a folder of retriever data (its test split), or -pairs FILE")
	case data == "":
		return nil
	}
	fi, err := os.Stat(data)
	if err == nil && !fi.IsDir() || err != nil && strings.HasSuffix(data, ".jsonl") {
		deprecated("-data FILE", "-pairs FILE (-data is a folder)")
		*pairs = data
		return nil
	}
	*pairs = retrieve.SplitFile(data, retrieve.SplitTest)
	return nil
}

func runRetrieverEval(ctx context.Context, o *search.EvalOptions, format string, quiet bool, stdout io.Writer) error {
	ev := events(stdout, 0, "", quiet)
	ev.Log = nil
	res, err := search.Evaluate(ctx, *o, ev)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return writeJSON(stdout, res)
	case "markdown":
		return markdownTable(stdout, res)
	}
	workers := o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	fmt.Fprintf(stdout, "%s: %d queries over %d code documents from %d packages; CSN candidates %d, seed %d; workers %d\n",
		o.Data, res.Queries, res.Queries, res.Packages, min(o.Candidates, res.Queries), o.Seed, workers)
	if res.Hybrid != "" {
		fmt.Fprintf(stdout, "hybrid: %s\n", res.Hybrid)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "system\tMRR@10\tR@1\tR@5\tR@10\tnDCG@10\tCSN MRR\tindex\tquery mean\tp50\tp95\t\n")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\t%s\t\n", r.System,
			r.MRR10, r.Recall1, r.Recall5, r.Recall10, r.NDCG10, r.CSNMRR,
			roundDuration(time.Duration(r.BuildSeconds*1e9)), roundDuration(r.RankMean), roundDuration(r.RankP50), roundDuration(r.RankP95))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if res.Index != "" {
		fmt.Fprintf(stdout, "wrote the dense index of %d documents to %s\n", res.Queries, res.Index)
	}
	return nil
}

func runQueryEval(ctx context.Context, o *search.QueryEvalOptions, format string, quiet bool, stdout io.Writer) error {
	ev := events(stdout, 0, "", quiet)
	ev.Log = nil
	res, err := search.EvaluateQueries(ctx, *o, ev)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return writeJSON(stdout, res)
	case "markdown":
		fmt.Fprintln(stdout, "| system | hit@1 | hit@3 | hit@10 | MRR@10 | × BM25 doc+code | query p50 |")
		fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
		for _, r := range res.Rows {
			if _, err := fmt.Fprintf(stdout, "| %s | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", r.System, r.Hit1, r.Hit3, r.Hit10, r.MRR10, ratioCell(r.OverBaseline), roundDuration(r.P50)); err != nil {
				return err
			}
		}
		return nil
	}
	funcs := 0
	for _, r := range res.Roots {
		funcs += r.Funcs
	}
	fmt.Fprintf(stdout, "%s: %d queries over %d folders of %s (%d functions in all); fields doc %g, sig %g, body %g, dense-doc %g\n",
		o.Queries, res.N, len(res.Roots), o.Src, funcs, res.Fields.Doc, res.Fields.Sig, res.Fields.Body, res.Fields.DocDense)
	fmt.Fprintf(stdout, "hybrid: %s\n", res.Hybrid)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "system\thit@1\thit@3\thit@10\tMRR@10\t× BM25 doc+code\tquery p50\t\n")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t\n", r.System, r.Hit1, r.Hit3, r.Hit10, r.MRR10, ratioCell(r.OverBaseline), roundDuration(r.P50))
	}
	return w.Flush()
}

// markdownTable prints the rows of an evaluation as a Markdown table, each
// system's MRR@10 also as a multiple of BM25's when BM25 was evaluated.
func markdownTable(w io.Writer, res *search.EvalResult) error {
	fmt.Fprintln(w, "| system | MRR@10 | R@1 | R@5 | R@10 | nDCG@10 | CSN MRR | × BM25 | query p50 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range res.Rows {
		if _, err := fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", r.System,
			r.MRR10, r.Recall1, r.Recall5, r.Recall10, r.NDCG10, r.CSNMRR, ratioCell(r.OverBM25), roundDuration(r.RankP50)); err != nil {
			return err
		}
	}
	return nil
}

// ratioCell prints a ratio to a baseline, or "–" where there is none.
func ratioCell(x *float64) string {
	if x != nil {
		return fmt.Sprintf("%.2f", *x)
	}
	return "–"
}

// roundDuration keeps three significant digits.
func roundDuration(d time.Duration) time.Duration {
	for r := time.Duration(1); ; r *= 10 {
		if d < 1000*r {
			return d.Round(r)
		}
	}
}
