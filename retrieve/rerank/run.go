package rerank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/train"
)

// Folders and files a reranker run writes into its run folder.
const (
	RerankerDir = "reranker"
	CurvesFile  = "rerank-curves.csv"
)

// RunOptions describe a whole training run of the reranker.
type RunOptions struct {
	Data  string // folder of train.jsonl and val.jsonl
	Out   string // the run folder: OUT/reranker and OUT/rerank-curves.csv
	Model string // the dual encoder it starts from and mines with (default OUT/model)
	// Init, when set, is a trained reranker to start from (fine-tuned)
	// instead of the dual encoder's blocks and new cross blocks; its
	// lengths, cross blocks and lexical features are kept.
	Init  string
	Force bool // replace an OUT/reranker
	// Resume continues the run in OUT/reranker from its last checkpoint
	// (the same options and data).
	Resume    bool
	SaveEvery int // checkpoint every SaveEvery steps (0: at the end and on an interrupt only)

	MaxQuery, MaxCode int
	Cross             int  // new blocks where query and code meet
	Lexical           bool // exact-match features in the head
	ZeroCross         bool // the cross blocks start as the identity (Model.ZeroCross)
	InitStd           float64

	// TrainPairs, when > 0, trains on a seeded sample of that many of
	// the training pairs (negatives are mined among them): the steps a
	// run can afford may see fewer queries than the data holds.
	TrainPairs int

	Groups, Candidates              int
	BM25Negs, DenseNegs, RandomNegs int
	// FirstNegs are mined from the top MineDepth of the first stage a
	// search runs (MineFirstStage with Hybrid): what the reranker will
	// re-score.
	FirstNegs                        int
	Hybrid                           retrieve.Hybrid
	MineDepth                        int
	MineMargin                       float64
	Steps, Warmup                    int
	LR, MinLR, WD, Clip, HeadLRScale float64
	Depth                            int // candidates re-scored in the validation report
	Seed                             uint64
}

// Validate checks the options before any work.
func (o RunOptions) Validate() error {
	switch {
	case o.Data == "":
		return errors.New("no data folder")
	case o.Resume && o.Force:
		return errors.New("resume and force: choose one")
	case o.SaveEvery < 0 || o.TrainPairs < 0:
		return fmt.Errorf("save-every %d, train-pairs %d: want >= 0", o.SaveEvery, o.TrainPairs)
	case o.Steps < 1 || o.Groups < 1 || o.Candidates < 2 || o.Warmup < 0 || o.Depth < 1:
		return fmt.Errorf("steps %d, groups %d, candidates %d, warmup %d, rerank-depth %d: want steps, groups and rerank-depth >= 1, candidates >= 2, warmup >= 0",
			o.Steps, o.Groups, o.Candidates, o.Warmup, o.Depth)
	case o.MaxQuery < 1 || o.MaxCode < 1:
		return fmt.Errorf("max-query %d, max-code %d: want >= 1", o.MaxQuery, o.MaxCode)
	case o.BM25Negs < 0 || o.DenseNegs < 0 || o.RandomNegs < 0 || o.FirstNegs < 0 || o.BM25Negs+o.DenseNegs+o.RandomNegs+o.FirstNegs == 0:
		return fmt.Errorf("bm25-negatives %d, dense-negatives %d, first-stage-negatives %d, random-negatives %d: want >= 0 and not all 0", o.BM25Negs, o.DenseNegs, o.FirstNegs, o.RandomNegs)
	case o.Hybrid.Validate() != nil:
		return o.Hybrid.Validate()
	case o.MineDepth < 1 || o.Cross < 0:
		return fmt.Errorf("mine-depth %d, cross-layers %d: want mine-depth >= 1, cross-layers >= 0", o.MineDepth, o.Cross)
	case !(o.HeadLRScale > 0) || math.IsInf(o.HeadLRScale, 0):
		return fmt.Errorf("head-lr-scale %v: want a finite value > 0", o.HeadLRScale)
	case !(o.InitStd > 0) || math.IsInf(o.InitStd, 0):
		return fmt.Errorf("init-std %v: want a finite value > 0", o.InitStd)
	case math.IsNaN(o.MineMargin):
		return errors.New("mine-margin NaN: want a number (negative: keep all)")
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"groups", o.Groups, dense.MaxCount}, {"candidates", o.Candidates, dense.MaxCount}, {"bm25-negatives", o.BM25Negs, dense.MaxCount},
		{"dense-negatives", o.DenseNegs, dense.MaxCount}, {"random-negatives", o.RandomNegs, dense.MaxCount}, {"first-stage-negatives", o.FirstNegs, dense.MaxCount},
		{"mine-depth", o.MineDepth, dense.MaxCount}, {"rerank-depth", o.Depth, dense.MaxCount},
		{"max-query", o.MaxQuery, model.MaxPositions}, {"max-code", o.MaxCode, model.MaxPositions}, {"cross-layers", o.Cross, model.MaxLayers},
	} {
		if f.v > f.max {
			return fmt.Errorf("%s %d: want at most %d", f.name, f.v, f.max)
		}
	}
	return o.optim().Validate()
}

// checkMemory holds a step's peak against the memory available: the
// reranker cfg's weights, gradient and AdamW's two moments (float32), and
// the activations of a step's groups × candidates sequences of up to
// max-query + 1 + max-code tokens.
func (o RunOptions) checkMemory(cfg model.Config) error {
	T := dense.Padded(o.MaxQuery + 1 + o.MaxCode)
	cfg.VocabSize = 0 // the score head reads pooled vectors, not logits
	need := memlimit.Mul(memlimit.Add(memlimit.Mul(4, cfg.NumParams()), memlimit.Mul(o.Groups, o.Candidates, cfg.ActsSize(1, T, false))), 4)
	return memlimit.Check(fmt.Sprintf("groups %d × candidates %d sequences of up to %d tokens", o.Groups, o.Candidates, T),
		need, "activations, weights and optimiser state")
}

func (o RunOptions) optim() train.Options {
	return train.Options{Schedule: train.Schedule{Peak: o.LR, Min: o.MinLR, Warmup: o.Warmup, Total: o.Steps},
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: o.WD, Clip: o.Clip}
}

// RunResult is what a run did.
type RunResult struct {
	Loop     train.LoopResult
	Reranker string // the folder written
	Curves   string
	// Validation MRR@10 of each system, in the order of ValSystems.
	ValPairs   int
	ValSystems []string
	ValMRR     []float64
}

// Run trains the reranker as o describes and reports validation MRR@10 of
// the first stages and of hybrid + rerank. OUT/reranker is a
// train.Session's: an existing one is refused unless o.Force (start over)
// or o.Resume (continue it from its last checkpoint, taking the steps the
// whole run would have taken, bit for bit); an interrupt before the first
// step writes nothing, after it saves the reranker so far with its
// training state and returns ctx's error.
func Run(ctx context.Context, o RunOptions, ev train.Events) (*RunResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Model == "" {
		o.Model = filepath.Join(o.Out, dense.ModelDir)
	}
	s, err := train.OpenSession(train.SessionOptions{Layout: o.Layout(), Resume: o.Resume, Force: o.Force, Kind: model.KindReranker,
		Inputs: []string{o.Data, o.Model, o.Init}}, ev)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res := &RunResult{Reranker: s.Checkpoint, Curves: s.Curves}
	trainPairs, valPairs, err := o.readPairs(ev)
	if err != nil {
		return nil, err
	}
	dm, err := dense.LoadFolder(o.Model)
	if err != nil {
		return nil, err
	}
	m, err := o.reranker(s, dm)
	if err != nil {
		return nil, err
	}
	if err := o.checkMemory(m.Enc.Model.Config); err != nil {
		return nil, &train.OptionError{Err: err}
	}
	negs, none, err := o.negatives(ctx, dm, trainPairs, ev)
	if err != nil {
		return nil, err
	}
	data := NewData(m, trainPairs, negs)
	if o.Lexical {
		m.SetIDF(data.Codes)
	}
	opt := o.optim()
	tr, err := NewTrainer(m, data, Options{
		Groups: o.Groups, Candidates: o.Candidates, Schedule: opt.Schedule, HeadLRScale: o.HeadLRScale,
		Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, WD: o.WD, Clip: o.Clip, Seed: o.Seed,
	})
	if err != nil {
		return nil, err
	}
	ev.Logf("reranker: the %d blocks of %s (query and code apart) + %d cross blocks, dim %d; pairs of up to %d query + 1 + %d code tokens; %d queries × %d candidates per step (%d queries have no negative), %d steps",
		m.Enc.Isolated, o.Model, m.Enc.Model.Config.NumHiddenLayers-m.Enc.Isolated, m.Dim(), o.MaxQuery, o.MaxCode, o.Groups, o.Candidates, none, o.Steps)

	loop := &train.Loop{Steps: o.Steps, WriteEvery: 50, SaveEvery: o.SaveEvery, Progress: ev.Progress,
		Columns: []string{"step", "loss", "accuracy", "lr", "grad_norm", "pairs", "tokens"},
		Step: func() (train.Record, error) {
			st, err := tr.TrainStepContext(ctx)
			if err != nil {
				return nil, err
			}
			return train.Record{"step": float64(st.Step), "loss": st.Loss, "accuracy": st.Accuracy, "lr": st.LR, "grad_norm": st.GradNorm,
				"pairs": float64(st.Pairs), "tokens": float64(st.Tokens)}, nil
		},
	}
	if err := s.Restore(tr, loop); err != nil {
		return nil, err
	}
	if res.Loop, err = s.Train(ctx, loop, tr, m.SaveWith); err != nil {
		return res, err
	}
	if len(valPairs) == 0 {
		return res, nil
	}
	res.ValPairs = len(valPairs)
	res.ValSystems, res.ValMRR, err = o.validate(ctx, m, dm, valPairs, ev)
	return res, err
}

// Layout is where a run of o keeps its files: the reranker's folder in
// OUT, which the run owns alone, and its curves beside it.
func (o RunOptions) Layout() train.Layout {
	dir := filepath.Join(o.Out, RerankerDir)
	return train.Layout{Out: o.Out, Claim: dir, Checkpoint: dir, Curves: filepath.Join(o.Out, CurvesFile)}
}

// readPairs reads the training pairs (a seeded sample of o.TrainPairs of
// them) and the validation pairs.
func (o RunOptions) readPairs(ev train.Events) (trainPairs, valPairs []retrieve.Pair, err error) {
	if trainPairs, err = retrieve.ReadJSONL(retrieve.SplitFile(o.Data, retrieve.SplitTrain)); err != nil {
		return nil, nil, err
	}
	if valPairs, err = retrieve.ReadJSONL(retrieve.SplitFile(o.Data, retrieve.SplitVal)); err != nil {
		return nil, nil, err
	}
	if o.TrainPairs > 0 && o.TrainPairs < len(trainPairs) {
		r := rand.New(rand.NewPCG(o.Seed, 0x5a3b1e))
		r.Shuffle(len(trainPairs), func(i, j int) { trainPairs[i], trainPairs[j] = trainPairs[j], trainPairs[i] })
		trainPairs = trainPairs[:o.TrainPairs]
		ev.Logf("training pairs: a sample of %d (seed %d)", o.TrainPairs, o.Seed)
	}
	if len(trainPairs) < o.Groups {
		return nil, nil, fmt.Errorf("rerank: %s: %d pairs, fewer than %d groups", retrieve.SplitFile(o.Data, retrieve.SplitTrain), len(trainPairs), o.Groups)
	}
	if len(valPairs) == 0 {
		ev.Warn(fmt.Sprintf("%s holds no pairs: no validation", retrieve.SplitFile(o.Data, retrieve.SplitVal)))
	}
	return trainPairs, valPairs, nil
}

// reranker returns the run's reranker: the checkpoint's when resuming
// (which must have the sizes o asks for), else one started from the dual
// encoder dm.
func (o RunOptions) reranker(s *train.Session, dm *dense.Model) (*Model, error) {
	from, what := s.Checkpoint, "resume"
	switch {
	case o.Resume:
	case o.Init != "":
		// fine-tune a trained reranker instead of starting from the encoder's blocks
		from, what = o.Init, "init"
	default:
		m, err := FromDense(dm, o.MaxQuery, o.MaxCode, o.Cross, o.Lexical, o.InitStd, o.Seed)
		if err == nil && o.ZeroCross {
			m.ZeroCross()
		}
		return m, err
	}
	m, err := Load(from)
	if err != nil {
		return nil, err
	}
	st, cross := m.Settings, m.Enc.Model.Config.NumHiddenLayers-m.Enc.Isolated
	if st.MaxQuery != o.MaxQuery || st.MaxCode != o.MaxCode || st.Lexical != o.Lexical || cross != o.Cross {
		return nil, fmt.Errorf("rerank: %s: %s has max-query %d, max-code %d, lexical %v, cross-layers %d; this run asks for %d, %d, %v, %d",
			what, from, st.MaxQuery, st.MaxCode, st.Lexical, cross, o.MaxQuery, o.MaxCode, o.Lexical, o.Cross)
	}
	return m, nil
}

// negatives returns the hard negatives of the training pairs: BM25's, the
// dual encoder's and random ones, interleaved, and how many pairs have
// none.
func (o RunOptions) negatives(ctx context.Context, dm *dense.Model, pairs []retrieve.Pair, ev train.Events) ([][]int, int, error) {
	t0 := time.Now()
	var bm [][]int
	if o.BM25Negs > 0 {
		var ms retrieve.MineStats
		bm, ms = retrieve.MineHardNegatives(pairs, retrieve.MineOptions{K: o.BM25Negs, Depth: o.MineDepth, Margin: o.MineMargin})
		ev.Logf("bm25 negatives: %d kept for %d queries (top %d); dropped %d with the gold's code, %d within %.0f%% of the gold's score (%.1fs)",
			ms.Kept, ms.Queries, o.MineDepth, ms.Same, ms.Near, 100*o.MineMargin, time.Since(t0).Seconds())
	}
	var dn, fn [][]int
	if o.DenseNegs > 0 || o.FirstNegs > 0 {
		t0 = time.Now()
		x, err := dense.NewIndex(ctx, dm, pairs, ev.Count("embedding the training code", len(pairs)))
		if err != nil {
			return nil, 0, err
		}
		if o.DenseNegs > 0 {
			if dn, err = retrieve.MineRanked(ctx, x.Ranker(), pairs, o.DenseNegs, o.MineDepth); err != nil {
				return nil, 0, err
			}
			ev.Logf("dense negatives: %d kept for %d queries (top %d of %s; the gold's code and other pairs with the same query dropped) (%.1fs)",
				count(dn), len(pairs), o.MineDepth, o.Model, time.Since(t0).Seconds())
		}
		if o.FirstNegs > 0 {
			t0 = time.Now()
			if fn, err = MineFirstStage(ctx, x, pairs, o.Hybrid, o.FirstNegs, o.MineDepth); err != nil {
				return nil, 0, err
			}
			ev.Logf("first-stage negatives: %d kept for %d queries (top %d of the hybrid, %s; the gold's code and other pairs with the same query dropped) (%.1fs)",
				count(fn), len(pairs), o.MineDepth, o.Hybrid, time.Since(t0).Seconds())
		}
	}
	negs := retrieve.MergeNegatives(fn, bm, dn, o.randomNegatives(pairs))
	none := 0
	for _, l := range negs {
		if len(l) == 0 {
			none++
		}
	}
	if none == len(negs) {
		return nil, 0, fmt.Errorf("rerank: none of the %d training pairs has a hard negative (other code than its own, under another query): nothing to learn", len(negs))
	}
	return negs, none, ctx.Err()
}

// randomNegatives draws o.RandomNegs negatives of each pair among the
// others (nil for none).
func (o RunOptions) randomNegatives(pairs []retrieve.Pair) [][]int {
	if o.RandomNegs == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7a4d))
	rnd := make([][]int, len(pairs))
	keys := make([]string, len(pairs))
	for i, p := range pairs {
		keys[i] = retrieve.CodeKey(p.Code)
	}
	for i := range rnd {
		for tries := 0; len(rnd[i]) < o.RandomNegs && tries < 100*o.RandomNegs; tries++ {
			// a copy of the gold's code, or the gold of the same query, is no negative
			if j := rng.IntN(len(pairs)); j != i && pairs[j].Query != pairs[i].Query && keys[j] != keys[i] {
				rnd[i] = append(rnd[i], j)
			}
		}
	}
	return rnd
}

// validate returns whole-corpus MRR@10 of each first stage and of its
// reranking by m over the validation pairs.
func (o RunOptions) validate(ctx context.Context, m *Model, dm *dense.Model, valPairs []retrieve.Pair, ev train.Events) ([]string, []float64, error) {
	sys := retrieve.NewSystems(valPairs)
	sys.Dense = func(ctx context.Context) (retrieve.Ranker, error) {
		x, err := dense.NewIndex(ctx, dm, valPairs, ev.Count("embedding the validation code", len(valPairs)))
		if err != nil {
			return nil, err
		}
		return x.Ranker(), nil
	}
	sys.Rerank = func(first retrieve.Ranker, fused bool) retrieve.Ranker {
		r := NewRanker(m, first, sys.Codes, o.Depth)
		r.Fuse = fused
		return r
	}
	var names []string
	var mrr []float64
	for _, name := range []string{"bm25", "dense", "hybrid", "hybrid+rerank"} {
		r, err := sys.Get(ctx, name)
		if err != nil {
			return names, mrr, err
		}
		mt, err := retrieve.Evaluate(ctx, r.Ranker, sys.Queries, len(sys.Codes),
			retrieve.EvalOptions{NoCSN: true, Progress: ev.Count("validating "+name, len(sys.Queries))})
		if err != nil {
			return names, mrr, err
		}
		names, mrr = append(names, name), append(mrr, mt.MRR10)
	}
	return names, mrr, nil
}

// count is the number of negatives in lists.
func count(lists [][]int) int {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	return n
}
