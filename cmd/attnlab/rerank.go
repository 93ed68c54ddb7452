package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/attnlab/attnlab/dense"
	"github.com/attnlab/attnlab/rerank"
	"github.com/attnlab/attnlab/retrieve"
)

type retrieverRerankOpts struct {
	data, out, model    string
	maxQuery, maxCode   int
	groups, candidates  int
	bm25Negs, denseNegs int
	randomNegs          int
	cross               int
	lexical             bool
	std                 float64
	mineDepth           int
	mineMargin          float64
	optimFlags
	headLR float64
	depth  int
	seed   uint64
	quiet  bool
}

func retrieverRerankFlags() (*flag.FlagSet, *retrieverRerankOpts) {
	o := &retrieverRerankOpts{}
	fs := flag.NewFlagSet("retriever rerank", flag.ContinueOnError)
	fs.StringVar(&o.data, "data", "", "folder of train.jsonl and val.jsonl, as retriever data writes it (required)")
	fs.StringVar(&o.out, "out", "retriever-run", "output folder: OUT/reranker and OUT/rerank-curves.csv")
	fs.StringVar(&o.model, "model", "", "the trained dual encoder the reranker starts from and mines negatives with (default OUT/model)")
	fs.IntVar(&o.maxQuery, "max-query", 32, "query tokens kept")
	fs.IntVar(&o.maxCode, "max-code", 128, "code tokens kept")
	fs.IntVar(&o.cross, "cross-layers", 1, "new blocks above the dual encoder's, where query and code attend to each other (0: they do in every block)")
	fs.BoolVar(&o.lexical, "lexical", true, "the score head also weighs two exact-match features (the IDF-weighted and the plain share of the query's tokens found in the code)")
	fs.Float64Var(&o.std, "init-std", 0.02, "standard deviation of the new blocks' initial weights")
	fs.IntVar(&o.groups, "groups", 8, "queries per step")
	fs.IntVar(&o.candidates, "candidates", 8, "sequences per query and step: the positive and candidates−1 hard negatives")
	fs.IntVar(&o.bm25Negs, "bm25-negatives", 8, "hard negatives mined per query from BM25")
	fs.IntVar(&o.denseNegs, "dense-negatives", 8, "hard negatives mined per query from the dual encoder")
	fs.IntVar(&o.randomNegs, "random-negatives", 0, "negatives drawn uniformly from the training code per query, added to the mined ones")
	fs.IntVar(&o.mineDepth, "mine-depth", 30, "results of each first stage examined per query when mining")
	fs.Float64Var(&o.mineMargin, "mine-margin", 0.05, "drop BM25 candidates scoring at least (1 − margin)·the gold's score (negative: keep all)")
	o.register(fs, 500, 30, 1e-4, 1e-5)
	fs.Float64Var(&o.headLR, "head-lr-scale", 100, "the score head's learning rate over the blocks'")
	fs.IntVar(&o.depth, "depth", 20, "candidates re-scored per query in the validation report")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the query order and the negatives drawn")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bars")
	return fs, o
}

// newBar returns a progress bar on stderr, or nil with quiet or when
// stderr is not a terminal.
func newBar(n int, what string, quiet bool) *progressbar.ProgressBar {
	if fi, err := os.Stderr.Stat(); quiet || err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return progressbar.NewOptions(n, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetDescription(what), progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
}

func runRetrieverRerank(ctx context.Context, args []string, stdout io.Writer) error {
	fs, o := retrieverRerankFlags()
	if err := parseSub(fs, args); err != nil {
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
	switch {
	case o.data == "":
		return usageError{"-data is required"}
	case o.steps < 1 || o.groups < 1 || o.candidates < 2 || o.warmup < 0 || o.depth < 1 || o.headLR < 0:
		return usageError{"-steps, -groups and -depth must be positive, -candidates at least 2, -warmup at least 0"}
	case o.maxQuery < 1 || o.maxCode < 1:
		return usageError{"-max-query and -max-code must be positive"}
	case o.bm25Negs < 0 || o.denseNegs < 0 || o.randomNegs < 0 || o.bm25Negs+o.denseNegs+o.randomNegs == 0 || o.mineDepth < 1:
		return usageError{"-bm25-negatives, -dense-negatives and -random-negatives must be at least 0 and not all 0; -mine-depth positive"}
	}
	if o.model == "" {
		o.model = filepath.Join(o.out, "model")
	}
	start := time.Now()
	trainPairs, err := retrieve.ReadJSONL(filepath.Join(o.data, "train.jsonl"))
	if err != nil {
		return err
	}
	valPairs, err := retrieve.ReadJSONL(filepath.Join(o.data, "val.jsonl"))
	if err != nil {
		return err
	}
	if len(trainPairs) < o.groups {
		return fmt.Errorf("%s: %d pairs, fewer than %d groups", filepath.Join(o.data, "train.jsonl"), len(trainPairs), o.groups)
	}
	dm, err := loadDenseModel(o.model)
	if err != nil {
		return err
	}
	m, err := rerank.FromDense(dm, o.maxQuery, o.maxCode, o.cross, o.lexical, o.std, o.seed)
	if err != nil {
		return err
	}

	// Hard negatives: BM25's and the dual encoder's, interleaved.
	t0 := time.Now()
	bm, ms := retrieve.MineHardNegatives(trainPairs, retrieve.MineOptions{K: max(o.bm25Negs, 1), Depth: o.mineDepth, Margin: o.mineMargin})
	if o.bm25Negs == 0 {
		bm = nil
	}
	fmt.Fprintf(stdout, "bm25 negatives: %d kept for %d queries (top %d); dropped %d with the gold's code, %d within %.0f%% of the gold's score (%.1fs)\n",
		ms.Kept, ms.Queries, o.mineDepth, ms.Same, ms.Near, 100*o.mineMargin, time.Since(t0).Seconds())
	var dn [][]int
	if o.denseNegs > 0 {
		t0 = time.Now()
		x := dense.NewIndex(dm, trainPairs, barFunc(newBar(len(trainPairs), "embedding the training code", o.quiet)))
		dn = rerank.MineDense(x, trainPairs, o.denseNegs, o.mineDepth)
		kept := 0
		for _, l := range dn {
			kept += len(l)
		}
		fmt.Fprintf(stdout, "dense negatives: %d kept for %d queries (top %d of %s; the gold's code and other pairs with the same query dropped) (%.1fs)\n",
			kept, len(trainPairs), o.mineDepth, o.model, time.Since(t0).Seconds())
	}
	var rnd [][]int
	if o.randomNegs > 0 {
		rng := rand.New(rand.NewPCG(o.seed, 0x7a4d))
		rnd = make([][]int, len(trainPairs))
		for i := range rnd {
			for len(rnd[i]) < o.randomNegs {
				if j := rng.IntN(len(trainPairs)); j != i && trainPairs[j].Query != trainPairs[i].Query {
					rnd[i] = append(rnd[i], j)
				}
			}
		}
	}
	negs := rerank.Merge(bm, dn, rnd)
	none := 0
	for _, l := range negs {
		if len(l) == 0 {
			none++
		}
	}

	data := rerank.NewData(m, trainPairs, negs)
	if o.lexical {
		m.SetIDF(data.Codes)
	}
	tr, err := rerank.NewTrainer(m, data, rerank.Options{
		Groups: o.groups, Candidates: o.candidates,
		Schedule: o.schedule(), HeadLRScale: o.headLR,
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WD: o.wd, Clip: o.clip, Seed: o.seed,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reranker: the %d blocks of %s (query and code apart) + %d cross blocks, dim %d; pairs of up to %d query + 1 + %d code tokens; %d queries × %d candidates per step (%d queries have no negative), %d steps\n",
		m.Enc.Isolated, o.model, m.Enc.Model.Config.NumHiddenLayers-m.Enc.Isolated, m.Dim(), o.maxQuery, o.maxCode, o.groups, o.candidates, none, o.steps)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	curves := filepath.Join(o.out, "rerank-curves.csv")
	run, err := stepLoop(ctx, o.steps, tr.Step, func() (loopStep, error) {
		res, err := tr.TrainStep()
		return loopStep{Step: res.Step, Loss: res.Loss, Accuracy: res.Accuracy, Tokens: res.Tokens,
			Row: fmt.Sprintf("%d,%.6f,%.4f,%.6g,%.6g,%d,%d", res.Step, res.Loss, res.Accuracy, res.LR, res.GradNorm, res.Pairs, res.Tokens)}, err
	}, "step,loss,accuracy,lr,grad_norm,pairs,tokens", curves, o.quiet)
	if err != nil {
		return err
	}
	if tr.Step == 0 {
		fmt.Fprintf(stdout, "%v at step 0: nothing trained, nothing saved\n", run.Stopped)
		return errFailed
	}
	dir := filepath.Join(o.out, "reranker")
	if err := m.Save(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); loss %.3f → %.3f, group accuracy %.2f → %.2f\n",
		tr.Step, run.Time.Seconds(), float64(run.Tokens)/run.Time.Seconds(), run.First.Loss, run.Last.Loss, run.First.Accuracy, run.Last.Accuracy)
	if run.Stopped != nil {
		fmt.Fprintf(stdout, "%v at step %d: the reranker so far is saved in %s\n", run.Stopped, tr.Step, dir)
		return errFailed
	}

	// Validation: whole-corpus MRR@10 of each first stage and of its reranking.
	t0 = time.Now()
	env := &retrieverEnv{pairs: valPairs, model: dm, reranker: m, depth: o.depth}
	queries := make([]string, len(valPairs))
	env.codes = make([]string, len(valPairs))
	for i, p := range valPairs {
		queries[i], env.codes[i] = p.Query, p.Code
	}
	var parts []string
	for _, name := range []string{"bm25", "dense", "hybrid", "hybrid+rerank"} {
		r, _, err := retrieverSystems[name](env)
		if err != nil {
			return err
		}
		mt := retrieve.Evaluate(r, queries, len(env.codes), retrieve.EvalOptions{NoCSN: true})
		parts = append(parts, fmt.Sprintf("%s %.4f", name, mt.MRR10))
	}
	fmt.Fprintf(stdout, "validation (%d pairs, depth %d): MRR@10 %s (%.0fs)\n", len(valPairs), o.depth, strings.Join(parts, ", "), time.Since(t0).Seconds())
	fmt.Fprintf(stdout, "reranker: %s; curves: %s; total %.0f s\n", dir, curves, time.Since(start).Seconds())
	return nil
}
