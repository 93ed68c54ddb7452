package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/rerank"
)

var retrieverRerankCmd = &command{
	name:  "rerank",
	usage: "-data DIR [-out DIR] [-model DIR] [-force | -resume] [model, negative and optimiser flags]",
	short: "train the cross-encoder reranker on the dual encoder's blocks",
	long: `Retriever rerank trains a cross-encoder reranker: the sequence "query SEP
code" goes through the transformer of the dual encoder of -model (OUT/model
by default), which it starts from: its blocks encode query and code apart,
-cross-layers new blocks let them attend to each other; the two sides'
unit mean vectors are multiplied and a score head (starting at the dual
encoder's 1/τ, plus two exact-match features with -lexical) gives the
pair's relevance. Each step takes -groups training queries, each with its
own code and -candidates−1 hard negatives drawn from those mined once from
BM25 and from the dual encoder (the gold's code, other pairs with the same
query, and BM25 candidates within -mine-margin of the gold dropped); the
loss is each group's softmax cross-entropy against its positive.

It writes OUT/reranker and OUT/rerank-curves.csv (one row per step) and
reports the loss and group accuracy as means of the first and last 50
steps, then the validation MRR@10 of bm25, dense, hybrid and
hybrid+rerank. An existing OUT/reranker is refused unless -force (start
over) or -resume (continue). The reranker is checkpointed every
-save-every steps with its optimisers' state; Ctrl-C or SIGTERM saves it
and stops, and the same command with -resume continues exactly where it
stopped.

Example: attnlab retriever rerank -data retr -out run`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &rerank.RunOptions{}
		fs.StringVar(&o.Data, "data", "", "folder of train.jsonl and val.jsonl, as retriever data writes it (required)")
		fs.StringVar(&o.Out, "out", "retriever-run", "output folder: OUT/reranker and OUT/rerank-curves.csv")
		fs.StringVar(&o.Model, "model", "", "the trained dual encoder the reranker starts from and mines negatives with (default OUT/model)")
		fs.StringVar(&o.Init, "init", "", "a trained reranker to fine-tune (its lengths, cross blocks and lexical features must be those of the flags) instead of starting from -model's blocks")
		fs.BoolVar(&o.Force, "force", false, "replace an existing OUT/reranker")
		fs.BoolVar(&o.Resume, "resume", false, "continue the training in OUT/reranker from its last checkpoint (the same command and data; the steps taken are those of an uninterrupted run)")
		fs.IntVar(&o.SaveEvery, "save-every", 100, "checkpoint every N steps (0: at the end and on an interrupt only)")
		fs.IntVar(&o.MaxQuery, "max-query", 32, "query tokens kept")
		fs.IntVar(&o.MaxCode, "max-code", 128, "code tokens kept")
		fs.IntVar(&o.Cross, "cross-layers", 1, "new blocks above the dual encoder's, where query and code attend to each other (0: they do in every block)")
		fs.BoolVar(&o.Lexical, "lexical", true, "the score head also weighs two exact-match features (the IDF-weighted and the plain share of the query's tokens found in the code)")
		fs.Float64Var(&o.InitStd, "init-std", 0.02, "standard deviation of the new blocks' initial weights")
		fs.BoolVar(&o.ZeroCross, "zero-cross", true, "the new blocks' output projections start at zero, so that the untrained reranker scores as the dual encoder (false: they are random, like the rest of the new blocks)")
		fs.IntVar(&o.TrainPairs, "train-pairs", 0, "train on a seeded sample of this many training pairs, negatives mined among them (0: all)")
		fs.IntVar(&o.Groups, "groups", 8, "queries per step")
		fs.IntVar(&o.Candidates, "candidates", 8, "sequences per query and step: the positive and candidates−1 hard negatives")
		fs.IntVar(&o.BM25Negs, "bm25-negatives", 8, "hard negatives mined per query from BM25")
		fs.IntVar(&o.DenseNegs, "dense-negatives", 8, "hard negatives mined per query from the dual encoder")
		fs.IntVar(&o.FirstNegs, "first-stage-negatives", 0, "hard negatives mined per query from the top -mine-depth of the hybrid first stage a search runs (BM25 and the dual encoder, -bm25-weight): the candidates the reranker will re-score")
		fs.Float64Var(&o.Hybrid.BM25Weight, "bm25-weight", retrieve.DefaultBM25Weight, "with -first-stage-negatives: the weight of BM25's rescaled score in the hybrid")
		fs.IntVar(&o.RandomNegs, "random-negatives", 0, "negatives drawn uniformly from the training code per query, added to the mined ones")
		fs.IntVar(&o.MineDepth, "mine-depth", 30, "results of each first stage examined per query when mining")
		fs.Float64Var(&o.MineMargin, "mine-margin", 0.05, "drop BM25 candidates scoring at least (1 − margin)·the gold's score (negative: keep all)")
		optimFlags(fs, &o.Steps, &o.Warmup, &o.LR, &o.MinLR, &o.WD, &o.Clip, 500, 30, 1e-4, 1e-5)
		fs.Float64Var(&o.HeadLRScale, "head-lr-scale", 100, "the score head's learning rate over the blocks'")
		fs.IntVar(&o.Depth, "rerank-depth", 20, "candidates re-scored per query in the validation report")
		oldName(fs, "depth", "rerank-depth")
		fs.Uint64Var(&o.Seed, "seed", 1, "seed of the query order and the negatives drawn")
		quiet := fs.Bool("quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if o.Data == "" {
				return usagef("-data is required")
			}
			if o.Out == "" {
				return usagef(`-out "": want the run's folder`)
			}
			if err := o.Validate(); err != nil {
				return usageError{err.Error()}
			}
			return runRetrieverRerank(ctx, o, *quiet, stdout)
		}
	},
}

func runRetrieverRerank(ctx context.Context, o *rerank.RunOptions, quiet bool, stdout io.Writer) error {
	res, err := rerank.Run(ctx, *o, events(stdout, o.Steps, "training", quiet))
	trained := res != nil && res.Loop.Steps() > 0
	if trained {
		l := res.Loop
		fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); loss %.3f → %.3f, group accuracy %.2f → %.2f (means of the first and last %d steps)\n",
			l.Steps(), l.Time.Seconds(), l.TokensPerSec(), l.FirstMean("loss"), l.LastMean("loss"),
			l.FirstMean("accuracy"), l.LastMean("accuracy"), l.TrendWindow())
	}
	if res != nil && stopped(ctx, err, trained, res.Reranker, "; the same command with -resume continues it", stdout) {
		return err
	}
	if err != nil {
		return optionError(err)
	}
	if res.ValPairs > 0 {
		var parts []string
		for i, s := range res.ValSystems {
			parts = append(parts, fmt.Sprintf("%s %.4f", s, res.ValMRR[i]))
		}
		fmt.Fprintf(stdout, "validation (%d pairs, depth %d): MRR@10 %s\n", res.ValPairs, o.Depth, strings.Join(parts, ", "))
	}
	fmt.Fprintf(stdout, "reranker: %s; curves: %s\n", res.Reranker, res.Curves)
	return nil
}
