package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/train"
)

var retrieverTrainCmd = &command{
	name:  "train",
	usage: "-data DIR [-out DIR] [-force | -resume] [model, loss and optimiser flags]",
	short: "train the dual encoder (InfoNCE over in-batch and mined hard negatives)",
	long: `Retriever train trains a dense dual encoder on DATA/train.jsonl: the
encoder reads the code-aware terms of queries and code (-text terms, the
units BM25 sees: identifiers split and lower-cased) or the raw text, cut by
a BPE tokenizer learned on the split's code and queries; one transformer
tower shared by queries and code (token embedding, pre-norm blocks with
bidirectional attention and padding masks, final RMSNorm, mean pooling over
real tokens, unit length); the InfoNCE loss over in-batch negatives plus
BM25-mined hard negatives (mined once; candidates with the gold's code, or
scoring within -mine-margin of the gold, are dropped as likely false
negatives; in-batch copies of a positive and positives of identical queries
are masked), both directions unless -symmetric=false, at a fixed
temperature unless -learn-tau; AdamW with warmup and cosine decay. With
-init the encoder starts from a language model instead (attnlab train's
checkpoint: its tokenizer, its transformer read bidirectionally unless
-causal, raw text), or from a trained dual encoder, which it fine-tunes
further (-init models/weights/encoder: the shipped one).

It shows a progress bar (a line every 30 s when stderr is not a terminal),
writes OUT/curves.csv (one row per step, written every 50 steps and at the
end), the checkpoint OUT/model and OUT/index, the embeddings of
-index-data (DATA/test.jsonl by default) for "attnlab search", and reports
MRR@10 of the model and of BM25 on DATA/val.jsonl. An OUT that is not empty
is refused unless -force (start over) or -resume (continue). The model is
checkpointed every -save-every steps with the optimiser's state; Ctrl-C or
SIGTERM saves it and stops (before the first step nothing is written), and
the same command with -resume continues exactly where it stopped.

Example: attnlab retriever train -data retr -out run`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &dense.RunOptions{}
		fs.StringVar(&o.Data, "data", "", "folder of train.jsonl, val.jsonl and test.jsonl, as retriever data writes it (required)")
		fs.StringVar(&o.Out, "out", "retriever-run", "output folder: model, index, curves.csv")
		fs.BoolVar(&o.Force, "force", false, "replace the run in an OUT that is not empty")
		fs.BoolVar(&o.Resume, "resume", false, "continue the run in OUT from its last checkpoint (the same command and data; the steps taken are those of an uninterrupted run)")
		fs.IntVar(&o.SaveEvery, "save-every", 100, "checkpoint every N steps (0: at the end and on an interrupt only)")
		indexData := fs.String("index-data", "", "comma-separated JSONL files whose code OUT/index holds (default DATA/test.jsonl)")
		fs.StringVar(&o.Init, "init", "", "start from this checkpoint: a language model (attnlab train's OUT/checkpoint: its tokenizer and transformer, raw text; -text, -vocab and the model sizes are then its) or a dual encoder to fine-tune (OUT/model of a run, models/weights/encoder: also its lengths, -causal and -query-prefix)")
		fs.IntVar(&o.InitLayers, "init-layers", 0, "with -init: keep the language model's first N blocks (0: all)")
		fs.StringVar(&o.Settings.QueryPrefix, "query-prefix", "", `text written before every query (with -init, "// " makes it read as a doc comment)`)
		fs.BoolVar(&o.Settings.Causal, "causal", false, "each token attends to the tokens before it only, as in a language model -init starts from (default: to the whole sequence)")
		fs.StringVar(&o.Settings.Text, "text", dense.TextTerms, "what the encoder reads: terms (code-aware terms, as BM25) or raw (the text as written)")
		fs.IntVar(&o.Vocab, "vocab", 4096, "tokenizer vocabulary size")
		fs.IntVar(&o.Model.HiddenSize, "dim", 128, "model width")
		fs.IntVar(&o.Model.NumHiddenLayers, "layers", 2, "transformer blocks")
		fs.IntVar(&o.Model.NumAttentionHeads, "heads", 4, "query heads")
		fs.IntVar(&o.Model.NumKeyValueHeads, "kv-heads", 4, "key/value heads")
		fs.IntVar(&o.Model.IntermediateSize, "ffn", 344, "SwiGLU hidden width")
		fs.IntVar(&o.Settings.MaxQuery, "max-query", 64, "query tokens kept")
		fs.IntVar(&o.Settings.MaxCode, "max-code", 256, "code tokens kept")
		fs.IntVar(&o.Batch, "batch", 64, "pairs per step: each query's in-batch negatives are the other B−1 positives")
		fs.IntVar(&o.HardNegatives, "hard-negatives", 1, "mined hard negatives per query and step (BM25's, or with -dense-negatives the two lists interleaved)")
		fs.IntVar(&o.DenseNegatives, "dense-negatives", 0, "also mine this many hard negatives per query from the top -mine-depth of the dual encoder -init (before training; interleaved with BM25's, the encoder's first)")
		fs.IntVar(&o.MineDepth, "mine-depth", 20, "BM25 results examined per query when mining")
		fs.Float64Var(&o.MineMargin, "mine-margin", 0.05, "drop mined candidates scoring at least (1 − margin)·the gold's BM25 score (negative: keep all)")
		fs.Float64Var(&o.Settings.Tau, "tau", 0.05, "temperature (the starting value with -learn-tau)")
		fs.BoolVar(&o.LearnTau, "learn-tau", false, "learn the temperature (as log τ, kept ≥ 0.01)")
		fs.BoolVar(&o.Symmetric, "symmetric", true, "add the code→query direction to the loss (-symmetric=false: queries→code only)")
		fs.IntVar(&o.Chunk, "chunk", 0, "sequences whose activations are kept at once in the backward (GradCache; same gradients bit for bit); 0: the whole step")
		fs.Float64Var(&o.ShortQueries, "short-queries", 0, "probability with which a training query is cut as a developer types it: its first clause, lower case, at most -short-words content words (0: none)")
		fs.IntVar(&o.ShortWords, "short-words", 6, "with -short-queries: content words kept")
		optimFlags(fs, &o.Steps, &o.Warmup, &o.LR, &o.MinLR, &o.WD, &o.Clip, 800, 50, 1e-3, 1e-4)
		fs.Float64Var(&o.InitStd, "init-std", 0.02, "standard deviation of the initial weights")
		fs.Uint64Var(&o.Seed, "seed", 1, "seed of initialisation and batch order")
		quiet := fs.Bool("quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if *indexData != "" {
				for _, f := range strings.Split(*indexData, ",") {
					o.IndexData = append(o.IndexData, strings.TrimSpace(f))
				}
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
			return runRetrieverTrain(ctx, o, *quiet, stdout)
		}
	},
}

func runRetrieverTrain(ctx context.Context, o *dense.RunOptions, quiet bool, stdout io.Writer) error {
	res, err := dense.Run(ctx, *o, events(stdout, o.Steps, "training", quiet))
	if res != nil && res.Loop.Steps() > 0 {
		l := res.Loop
		fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); loss %.3f → %.3f, in-batch accuracy %.2f → %.2f (means of the first and last %d steps)\n",
			l.Steps(), l.Time.Seconds(), l.TokensPerSec(), l.FirstMean("loss"), l.LastMean("loss"), l.FirstMean("accuracy"), l.LastMean("accuracy"), l.TrendWindow())
	}
	if stopped(ctx, err, res != nil && res.Loop.Steps() > 0, filepath.Join(o.Out, dense.ModelDir), "; the same command with -resume continues it", stdout) {
		return err
	}
	if err != nil {
		return optionError(err)
	}
	if res.ValPairs > 0 {
		fmt.Fprintf(stdout, "validation (%d pairs): MRR@10 dense %.4f, bm25 %.4f; R@10 dense %.4f, bm25 %.4f\n",
			res.ValPairs, res.ValDense.MRR10, res.ValBM25.MRR10, res.ValDense.Recall10, res.ValBM25.Recall10)
	}
	fmt.Fprintf(stdout, "index: %d documents in %s; model: %s; curves: %s\n", res.IndexDocs, res.Index, res.Model, filepath.Join(o.Out, dense.CurvesFile))
	return nil
}

// optimFlags defines the optimiser flags of retriever train and rerank
// with the given defaults (weight decay 0.01, clip 1).
func optimFlags(fs *flag.FlagSet, steps, warmup *int, lr, minLR, wd, clip *float64, dSteps, dWarmup int, dLR, dMinLR float64) {
	fs.IntVar(steps, "steps", dSteps, "optimiser steps")
	fs.IntVar(warmup, "warmup", dWarmup, "warmup steps")
	fs.Float64Var(lr, "lr", dLR, "peak learning rate (> 0)")
	fs.Float64Var(minLR, "min-lr", dMinLR, "final learning rate")
	fs.Float64Var(wd, "wd", 0.01, "weight decay (not on norms and embeddings)")
	fs.Float64Var(clip, "clip", 1, "global gradient-norm clip (0: none)")
}

// events routes a job's reports: news to stdout, warnings and progress to
// stderr.
func events(stdout io.Writer, steps int, what string, quiet bool) train.Events {
	bar := newProgress(steps, what, quiet)
	return train.Events{
		Log:      func(msg string) { fmt.Fprintln(stdout, msg) },
		Warning:  func(msg string) { warnf("%s", msg) },
		Progress: bar.trainProgress(),
		Task:     func(what string, n int) func(int) { return newProgress(n, what, quiet).fn() },
	}
}

// stopped reports, for a training job that returned err, whether it was
// interrupted, after saying what was kept.
func stopped(ctx context.Context, err error, trained bool, saved, hint string, stdout io.Writer) bool {
	if ctx.Err() == nil || err == nil {
		return false
	}
	if trained {
		fmt.Fprintf(stdout, "interrupted: the model so far is saved in %s%s\n", saved, hint)
	} else {
		fmt.Fprintln(stdout, "interrupted before the first step: nothing written")
	}
	return true
}
