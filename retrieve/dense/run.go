package dense

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// Folders and files of a run of the dual encoder.
const (
	ModelDir   = "model"
	IndexDir   = "index"
	CurvesFile = "curves.csv"
)

// RunOptions describe a whole training run of the dual encoder.
type RunOptions struct {
	Data      string   // folder of train.jsonl and val.jsonl (retriever data's output)
	IndexData []string // JSONL files whose code OUT/index holds (default DATA/test.jsonl)
	Out       string   // the run folder: model, index, curves
	Force     bool     // replace an Out that holds a run
	Resume    bool     // continue the run in Out (the same options and data)
	SaveEvery int      // checkpoint every SaveEvery steps (0: at the end and on an interrupt only)

	Settings Settings     // text, sequence lengths, τ
	Vocab    int          // tokenizer size
	Model    model.Config // sizes of the encoder
	// Init is a checkpoint to start from: a language model (FromLM), whose
	// tokenizer and transformer replace Vocab, Model and Settings.Text, or
	// a dual encoder to fine-tune further, whose Settings but τ also
	// replace these.
	Init string
	// InitLayers keeps the first InitLayers blocks of Init (0: all).
	InitLayers int

	Batch, HardNegatives int
	MineDepth            int
	MineMargin           float64
	// DenseNegatives mines this many hard negatives per query from the
	// top MineDepth of the dual encoder Init, before training, beside
	// BM25's: the two lists are interleaved, its first, and each step
	// takes the first HardNegatives (0: BM25's alone). It needs Init to be
	// a dual encoder; a resumed run mines with Init again, not with the
	// checkpoint, so it continues on the same negatives.
	DenseNegatives      int
	LearnTau, Symmetric bool
	Chunk               int
	// ShortQueries is the probability with which a training pair's query
	// is cut as a developer types it, to at most ShortWords content words
	// (ShortenQueries; the hard negatives are mined with the full query).
	ShortQueries float64
	ShortWords   int

	Steps, Warmup       int
	LR, MinLR, WD, Clip float64
	InitStd             float64
	Seed                uint64
}

// Validate checks the options before any work.
func (o RunOptions) Validate() error {
	switch {
	case o.Data == "":
		return errors.New("no data folder")
	case o.Resume && o.Force:
		return errors.New("resume and force: choose one")
	case o.SaveEvery < 0:
		return fmt.Errorf("save-every %d: want 0 (at the end only) or more steps", o.SaveEvery)
	case o.Steps < 1 || o.Batch < 2 || o.HardNegatives < 0 || o.Warmup < 0 || o.Chunk < 0:
		return fmt.Errorf("steps %d, batch %d, hard-negatives %d, warmup %d, chunk %d: want steps >= 1, batch >= 2, the others >= 0",
			o.Steps, o.Batch, o.HardNegatives, o.Warmup, o.Chunk)
	case o.Settings.MaxQuery < 1 || o.Settings.MaxCode < 1:
		return fmt.Errorf("max-query %d, max-code %d: want >= 1", o.Settings.MaxQuery, o.Settings.MaxCode)
	case !(o.Settings.Tau > 0) || math.IsInf(o.Settings.Tau, 0):
		return fmt.Errorf("tau %v: want a finite value > 0", o.Settings.Tau)
	case o.Settings.Text != TextTerms && o.Settings.Text != TextRaw:
		return fmt.Errorf("text %q: want %s or %s", o.Settings.Text, TextTerms, TextRaw)
	case o.MineDepth < 1:
		return fmt.Errorf("mine-depth %d: want >= 1", o.MineDepth)
	case math.IsNaN(o.MineMargin):
		return errors.New("mine-margin NaN: want a number (negative: keep all)")
	case !(o.ShortQueries >= 0 && o.ShortQueries <= 1):
		return fmt.Errorf("short-queries %v: want a probability in [0, 1]", o.ShortQueries)
	case o.ShortQueries > 0 && o.ShortWords < 1:
		return fmt.Errorf("short-words %d: want >= 1 content words", o.ShortWords)
	case !(o.InitStd > 0) || math.IsInf(o.InitStd, 0):
		return fmt.Errorf("init-std %v: want a finite value > 0", o.InitStd)
	}
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"batch", o.Batch, MaxCount}, {"hard-negatives", o.HardNegatives, MaxCount}, {"mine-depth", o.MineDepth, MaxCount},
		{"chunk", o.Chunk, MaxCount}, {"max-query", o.Settings.MaxQuery, model.MaxPositions}, {"max-code", o.Settings.MaxCode, model.MaxPositions},
	} {
		if f.v > f.max {
			return fmt.Errorf("%s %d: want at most %d", f.name, f.v, f.max)
		}
	}
	if err := o.optim().Validate(); err != nil {
		return err
	}
	if o.DenseNegatives < 0 || o.DenseNegatives > MaxCount {
		return fmt.Errorf("dense-negatives %d: want 0 to %d", o.DenseNegatives, MaxCount)
	}
	if o.DenseNegatives > 0 && o.Init == "" {
		return fmt.Errorf("dense-negatives %d without init: the negatives are mined with the dual encoder -init gives", o.DenseNegatives)
	}
	if o.InitLayers != 0 && o.Init == "" {
		return fmt.Errorf("init-layers %d without init: the layers are those of a language model to start from", o.InitLayers)
	}
	if o.InitLayers < 0 {
		return fmt.Errorf("init-layers %d: want 0 (all) or more", o.InitLayers)
	}
	if o.Init != "" || o.Resume {
		return nil // the model is Init's or the run's: Run checks its memory once loaded
	}
	if err := o.config().Validate(); err != nil {
		return err
	}
	return o.checkMemory(o.config())
}

// MaxCount bounds the counts of the options (batch, hard negatives, mining
// depth, chunk), far above any run's; what their activations need is held
// against the memory available besides.
const MaxCount = 1 << 20

// checkMemory holds a step's peak against the memory available: the
// encoder cfg's weights, gradient and AdamW's two moments (float32), and
// the activations of the sequences kept at once (the whole step's queries,
// positives and hard negatives, or Chunk of them), each of up to the
// longest sequence.
func (o RunOptions) checkMemory(cfg model.Config) error {
	seqs := memlimit.Mul(o.Batch, 2+o.HardNegatives)
	if o.Chunk > 0 {
		seqs = min(seqs, o.Chunk)
	}
	T := Padded(max(o.Settings.MaxQuery, o.Settings.MaxCode))
	cfg.VocabSize = 0 // an encoder has no logits
	need := memlimit.Mul(memlimit.Add(memlimit.Mul(4, cfg.NumParams()), memlimit.Mul(seqs, cfg.ActsSize(1, T, false))), 4)
	return memlimit.Check(fmt.Sprintf("batch %d × (2 + hard-negatives %d) sequences of up to %d tokens", o.Batch, o.HardNegatives, T),
		need, "activations, weights and optimiser state")
}

func (o RunOptions) optim() train.Options {
	return train.Options{Schedule: train.Schedule{Peak: o.LR, Min: o.MinLR, Warmup: o.Warmup, Total: o.Steps},
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: o.WD, Clip: o.Clip}
}

func (o RunOptions) config() model.Config {
	c := o.Model
	c.VocabSize = o.Vocab
	c.RMSNormEps, c.RopeTheta, c.TieWordEmbeddings = 1e-5, 10000, true
	c.MaxPositionEmbeddings = Padded(max(o.Settings.MaxQuery, o.Settings.MaxCode))
	return c
}

// RunResult is what a run did.
type RunResult struct {
	Params              int
	Loop                train.LoopResult
	Model, Index        string // the folders written
	IndexDocs           int
	ValPairs            int
	ValDense, ValBM25   retrieve.Metrics
	Tokenizer, Negative string // what the data preparation did, in words
}

// Run trains the dual encoder as o describes, then reports validation MRR@10
// beside BM25's and writes the index of o.IndexData.
//
// An Out that holds a run is refused unless o.Force (start over) or
// o.Resume (continue it from its last checkpoint: the weights, the
// optimiser's moments and the place in the data, so that the resumed run
// takes the steps the whole run would have taken, bit for bit): the folder
// is a train.Session's. An interrupt before the first step writes nothing;
// after it, the model so far is saved with its training state and ctx's
// error returned. A non-finite step keeps the last checkpoint.
func Run(ctx context.Context, o RunOptions, ev train.Events) (*RunResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	indexFiles := o.IndexData
	if len(indexFiles) == 0 {
		indexFiles = []string{retrieve.SplitFile(o.Data, retrieve.SplitTest)}
	}
	s, err := train.OpenSession(train.SessionOptions{Layout: o.Layout(), Resume: o.Resume, Force: o.Force, Kind: model.KindDualEncoder,
		Inputs: append([]string{o.Data, o.Init}, indexFiles...)}, ev)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	d, err := readRunData(o, indexFiles, ev)
	if err != nil {
		return nil, err
	}
	m, err := o.encoder(s, d.train, ev)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tr, err := o.trainer(ctx, m, d.train, ev)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &RunResult{Model: s.Checkpoint, Index: filepath.Join(o.Out, IndexDir), ValPairs: len(d.val)}
	for _, t := range m.Enc.Model.Tensors(m.Enc.Params) {
		res.Params += len(t.Data)
	}
	cfg := m.Enc.Model.Config
	ev.Logf("encoder: %d parameters (dim %d, %d blocks, %d/%d heads, ffn %d); batch %d pairs + %d hard negatives each, τ %g%s, %s loss, %d steps",
		res.Params, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.IntermediateSize, o.Batch, o.HardNegatives,
		o.Settings.Tau, map[bool]string{true: " learned", false: " fixed"}[o.LearnTau], map[bool]string{true: "symmetric", false: "query→code"}[o.Symmetric], o.Steps)

	loop := &train.Loop{Steps: o.Steps, WriteEvery: 50, SaveEvery: o.SaveEvery, Progress: ev.Progress,
		Columns: []string{"step", "loss", "accuracy", "lr", "grad_norm", "tau", "docs", "tokens"},
		Step: func() (train.Record, error) {
			st, err := tr.TrainStepContext(ctx)
			if err != nil {
				return nil, err
			}
			return train.Record{"step": float64(st.Step), "loss": st.Loss, "accuracy": st.Accuracy, "lr": st.LR, "grad_norm": st.GradNorm,
				"tau": st.Tau, "docs": float64(st.Docs), "tokens": float64(st.Tokens)}, nil
		},
	}
	if err := s.Restore(tr, loop); err != nil {
		return nil, err
	}
	save := func(dir string, files map[string][]byte) error {
		m.Settings.Tau = tr.Tau
		return m.SaveWith(dir, files)
	}
	if res.Loop, err = s.Train(ctx, loop, tr, save); err != nil {
		return res, err
	}
	if res.ValDense, res.ValBM25, err = validate(ctx, m, d.val, ev); err != nil {
		return res, err
	}

	// The index of IndexData, for attnlab search.
	x, err := NewIndex(ctx, m, d.index, ev.Count("embedding the index", len(d.index)))
	if err != nil {
		return res, err
	}
	if err := x.Save(res.Index); err != nil {
		return res, err
	}
	res.IndexDocs = len(d.index)
	return res, nil
}

// Layout is where a run of o keeps its files.
func (o RunOptions) Layout() train.Layout {
	return train.Layout{Out: o.Out, Checkpoint: filepath.Join(o.Out, ModelDir), Curves: filepath.Join(o.Out, CurvesFile)}
}

// runData are the pairs of a run.
type runData struct {
	train, val, index []retrieve.Pair
}

// readRunData reads the training and validation pairs of o.Data and the
// pairs of the index files.
func readRunData(o RunOptions, indexFiles []string, ev train.Events) (*runData, error) {
	var d runData
	var err error
	if d.train, err = retrieve.ReadJSONL(retrieve.SplitFile(o.Data, retrieve.SplitTrain)); err != nil {
		return nil, err
	}
	if d.val, err = retrieve.ReadJSONL(retrieve.SplitFile(o.Data, retrieve.SplitVal)); err != nil {
		return nil, err
	}
	for _, f := range indexFiles {
		ps, err := retrieve.ReadJSONL(f)
		if err != nil {
			return nil, err
		}
		d.index = append(d.index, ps...)
	}
	if len(d.train) < o.Batch {
		return nil, fmt.Errorf("dense: %s: %d pairs, fewer than a batch of %d", retrieve.SplitFile(o.Data, retrieve.SplitTrain), len(d.train), o.Batch)
	}
	if len(d.index) == 0 {
		return nil, fmt.Errorf("dense: the index files %s hold no pairs: the index would be empty", strings.Join(indexFiles, ", "))
	}
	if len(d.val) == 0 {
		ev.Warn(fmt.Sprintf("%s holds no pairs: no validation", retrieve.SplitFile(o.Data, retrieve.SplitVal)))
	}
	return &d, nil
}

// encoder returns the run's encoder: the checkpoint's when resuming, a
// language model's or a dual encoder's (o.Init), or a fresh one with a
// tokenizer learned on the pairs.
func (o RunOptions) encoder(s *train.Session, pairs []retrieve.Pair, ev train.Events) (*Model, error) {
	if o.Resume {
		return Load(s.Checkpoint)
	}
	if o.Init == "" {
		t0 := time.Now()
		tok, err := TrainTokenizer(pairs, o.Vocab, o.Settings)
		if err != nil {
			return nil, err
		}
		ev.Logf("tokenizer: %d ids learned on the code and queries (%s) of %d training pairs (%.1fs)", tok.VocabSize(), o.Settings.Text, len(pairs), time.Since(t0).Seconds())
		cfg := o.config()
		cfg.VocabSize = tok.VocabSize()
		return New(cfg, tok, o.Settings, o.InitStd, o.Seed)
	}
	kind, err := model.ReadKind(o.Init)
	if err != nil {
		return nil, err
	}
	if kind != model.KindDualEncoder {
		m, err := FromLM(o.Init, o.Settings, o.InitLayers)
		if err != nil {
			return nil, err
		}
		ev.Logf("encoder: the language model %s (its tokenizer of %d ids, raw text)", o.Init, m.Tok.VocabSize())
		return m, nil
	}
	if o.InitLayers != 0 {
		return nil, fmt.Errorf("dense: init-layers %d with the dual encoder %s: its blocks are kept whole", o.InitLayers, o.Init)
	}
	m, err := Load(o.Init)
	if err != nil {
		return nil, err
	}
	m.Settings.Tau = o.Settings.Tau
	ev.Logf("encoder: fine-tuning the dual encoder %s (its tokenizer of %d ids, its text, lengths, attention and query prefix %q)",
		o.Init, m.Tok.VocabSize(), m.Settings.QueryPrefix)
	return m, nil
}

// trainer mines the hard negatives of the pairs and returns the trainer
// of m on them.
func (o RunOptions) trainer(ctx context.Context, m *Model, pairs []retrieve.Pair, ev train.Events) (*Trainer, error) {
	t0 := time.Now()
	negs, ms := retrieve.MineHardNegatives(pairs, retrieve.MineOptions{K: max(o.HardNegatives, 1), Depth: o.MineDepth, Margin: o.MineMargin})
	ev.Logf("hard negatives: %d kept for %d queries (top %d of BM25); dropped %d with the gold's code, %d within %.0f%% of the gold's score; %d queries short (%.1fs)",
		ms.Kept, ms.Queries, o.MineDepth, ms.Same, ms.Near, 100*o.MineMargin, ms.Short, time.Since(t0).Seconds())
	if o.DenseNegatives > 0 {
		dn, err := o.mineDense(ctx, pairs, ev)
		if err != nil {
			return nil, err
		}
		negs = retrieve.MergeNegatives(dn, negs)
	}
	if o.HardNegatives == 0 {
		negs = nil
	}
	if err := o.checkMemory(m.Enc.Model.Config); err != nil {
		return nil, &train.OptionError{Err: err} // the model's sizes are Init's or the run's
	}
	words := 0
	if o.ShortQueries > 0 {
		words = o.ShortWords
		var n int
		pairs, n = ShortenQueries(pairs, o.ShortQueries, words, o.Seed)
		ev.Logf("short queries: %d of %d training queries cut to at most %d content words (probability %g)", n, len(pairs), words, o.ShortQueries)
	}
	opt := o.optim()
	return NewTrainer(m.Enc, NewData(m, pairs, negs), Options{
		Batch: o.Batch, HardNegatives: o.HardNegatives, Tau: o.Settings.Tau, LearnTau: o.LearnTau, Symmetric: o.Symmetric,
		Schedule: opt.Schedule, Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, WD: o.WD, Clip: o.Clip, Seed: o.Seed, Chunk: o.Chunk,
		ShortQueries: o.ShortQueries, ShortWords: words, DenseNegatives: o.DenseNegatives,
	})
}

// mineDense returns the DenseNegatives hard negatives of each pair from
// the top MineDepth of the dual encoder Init over the pairs' code.
func (o RunOptions) mineDense(ctx context.Context, pairs []retrieve.Pair, ev train.Events) ([][]int, error) {
	t0 := time.Now()
	im, err := Load(o.Init)
	if err != nil {
		return nil, fmt.Errorf("dense: dense-negatives: %w", err)
	}
	x, err := NewIndex(ctx, im, pairs, ev.Count("embedding the training code to mine", len(pairs)))
	if err != nil {
		return nil, err
	}
	dn, err := retrieve.MineRanked(ctx, x.Ranker(), pairs, o.DenseNegatives, o.MineDepth)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, l := range dn {
		n += len(l)
	}
	ev.Logf("dense negatives: %d kept for %d queries (top %d of %s; the gold's code and other pairs with the same query dropped) (%.1fs)",
		n, len(pairs), o.MineDepth, o.Init, time.Since(t0).Seconds())
	return dn, nil
}

// validate returns MRR@10 of m and of BM25 over the validation pairs
// (zero metrics when there are none).
func validate(ctx context.Context, m *Model, val []retrieve.Pair, ev train.Events) (dense, bm25 retrieve.Metrics, err error) {
	if len(val) == 0 {
		return dense, bm25, nil
	}
	valIndex, err := NewIndex(ctx, m, val, ev.Count("embedding the validation code", len(val)))
	if err != nil {
		return dense, bm25, err
	}
	queries, codes := make([]string, len(val)), make([]string, len(val))
	for i, p := range val {
		queries[i], codes[i] = p.Query, p.Code
	}
	if dense, err = retrieve.Evaluate(ctx, valIndex.Ranker(), queries, len(codes), retrieve.EvalOptions{Progress: ev.Count("validating dense", len(queries))}); err != nil {
		return dense, bm25, err
	}
	bm25, err = retrieve.Evaluate(ctx, retrieve.NewBM25(codes), queries, len(codes), retrieve.EvalOptions{Progress: ev.Count("validating bm25", len(queries))})
	return dense, bm25, err
}
