package rerank

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/train"
)

// Data is a tokenised training split with each query's hard negatives.
type Data struct {
	Queries, Codes [][]int // token ids, truncated
	Negatives      [][]int // per pair: indices of hard-negative codes

	print string // fingerprint, once computed
}

// NewData tokenises pairs as m does and attaches the negatives.
func NewData(m *Model, pairs []retrieve.Pair, negatives [][]int) *Data {
	d := &Data{Negatives: negatives}
	for _, p := range pairs {
		d.Queries = append(d.Queries, m.QueryTokens(p.Query))
		d.Codes = append(d.Codes, m.Tokens(p.Code, m.Settings.MaxCode))
	}
	if d.Negatives == nil {
		d.Negatives = make([][]int, len(pairs))
	}
	return d
}

// MineFirstStage returns, for each pair, up to k hard negatives from the
// top depth of the first stage a search runs (h: BM25 over the pairs' code
// and the dual encoder of x, combined as search combines them): the
// candidates the reranker will be asked to order. Likely false negatives
// are dropped as in retrieve.MineRanked: code equal to the gold's up to white space,
// and the code of another pair with the same query text. The queries are
// mined on GOMAXPROCS goroutines.
func MineFirstStage(ctx context.Context, x *dense.Index, pairs []retrieve.Pair, h retrieve.Hybrid, k, depth int) ([][]int, error) {
	codes := make([]string, len(pairs))
	for i, p := range pairs {
		codes[i] = p.Code
	}
	return retrieve.MineRanked(ctx, h.Ranker(retrieve.NewBM25(codes), x.Ranker()), pairs, k, depth)
}

// Options configures a Trainer.
type Options struct {
	Groups       int            `flag:"groups"`     // queries per step: G
	Candidates   int            `flag:"candidates"` // sequences per group: the positive and Candidates−1 negatives (K)
	Schedule     train.Schedule // learning rate by step
	HeadLRScale  float64        `flag:"head-lr-scale"` // the score head's learning rate over the encoder's (1 when 0): a new head learns faster than pretrained blocks
	Beta1, Beta2 float64
	Eps          float64
	WD           float64 `flag:"wd"`
	Clip         float64 `flag:"clip"`
	Seed         uint64  `flag:"seed"`
}

// Trainer trains a cross-encoder with the listwise loss of
// nn.Listwise: each step takes G queries; each query's group is its
// positive and K−1 negatives drawn without replacement from its hard
// negatives (a query with fewer has its group padded with invalid
// candidates, which the loss leaves out).
//
// The loss is the mean of the groups' losses and a group's loss depends
// only on its own K sequences, so each group is run forward and backward on
// its own with dloss = 1/G: the same gradient as one pass over the batch,
// with the activations of K sequences alive at a time.
type Trainer struct {
	Model *Model
	Opt   Options
	Data  *Data
	Step  int

	grads    *model.Params[float32]
	dw       []float32
	params   []train.Param[float32] // the encoder's, then the head's
	adam     *train.AdamW[float32]  // of the encoder
	headAdam *train.AdamW[float32]  // of the head, at HeadLRScale times the rate
	cur      *train.Cursor
	src      *rand.PCG // the source of rng: its state is checkpointed
	rng      *rand.Rand
	spare    map[int][]*dense.Acts[float32]
	dOut     []float32 // scratch: ∂L/∂(token vectors) of one sequence
}

// NewTrainer returns a trainer of m on data. Data in which no pair has a
// hard negative is an error that counts the pairs.
func NewTrainer(m *Model, data *Data, o Options) (*Trainer, error) {
	switch {
	case o.Groups < 1:
		return nil, fmt.Errorf("rerank: %d groups per step, want >= 1", o.Groups)
	case o.HeadLRScale < 0:
		return nil, fmt.Errorf("rerank: head learning-rate scale %v, want >= 0", o.HeadLRScale)
	case o.Candidates < 2:
		return nil, fmt.Errorf("rerank: %d candidates per group, want >= 2 (the positive and a negative)", o.Candidates)
	case m.Settings.Lexical && len(m.IDF) != m.Enc.Model.Config.VocabSize:
		return nil, fmt.Errorf("rerank: a lexical head needs the IDF of every token id (SetIDF)")
	case len(data.Queries) < o.Groups:
		return nil, fmt.Errorf("rerank: %d training pairs, fewer than %d groups", len(data.Queries), o.Groups)
	}
	if !slices.ContainsFunc(data.Negatives, func(n []int) bool { return len(n) > 0 }) {
		return nil, fmt.Errorf("rerank: none of the %d training pairs has a hard negative: every group would be its positive alone, at loss 0 and accuracy 1", len(data.Queries))
	}
	src := rand.NewPCG(o.Seed, 0x5e1ec7)
	t := &Trainer{Model: m, Opt: o, Data: data,
		grads: m.Enc.Model.NewParams(), dw: make([]float32, len(m.W)),
		adam:     train.NewAdamW[float32](o.Beta1, o.Beta2, o.Eps, o.WD),
		headAdam: train.NewAdamW[float32](o.Beta1, o.Beta2, o.Eps, o.WD),
		cur:      train.NewCursor(len(data.Queries), o.Seed),
		src:      src,
		rng:      rand.New(src),
		spare:    map[int][]*dense.Acts[float32]{},
	}
	t.params = append(train.Params(m.Enc.Model, m.Enc.Params, t.grads, false),
		train.Param[float32]{Name: headTensor, X: m.W, Grad: t.dw, Decay: true})
	return t, nil
}

// StepResult reports one optimiser step.
type StepResult struct {
	Step     int
	Loss     float64
	Accuracy float64 // fraction of groups whose positive scores strictly highest
	LR       float64
	GradNorm float64 // before clipping
	Pairs    int     // sequences encoded
	Tokens   int
}

// ErrNonFinite is returned by TrainStep when the loss or gradient is NaN or
// infinite; the weights are left as they were before the step.
var ErrNonFinite = train.ErrNonFinite // one policy for every trainer: see train.Loop

// TrainStep runs one optimiser step on the next G queries.
func (t *Trainer) TrainStep() (StepResult, error) { return t.TrainStepContext(context.Background()) }

// TrainStepContext is TrainStep that gives the step up when ctx is done,
// between two sequences, and returns ctx's error with the trainer as it
// was before the step (weights, place in the data, the negatives' random
// state): a checkpoint saved then resumes exactly.
func (t *Trainer) TrainStepContext(ctx context.Context) (StepResult, error) {
	o := t.Opt
	m := t.Model
	D, K := m.Dim(), o.Candidates
	epoch, next := t.cur.Epoch, t.cur.Next
	rng, err := t.src.MarshalBinary()
	if err != nil {
		return StepResult{}, err
	}
	giveUp := func() (StepResult, error) {
		t.cur.Restore(epoch, next)
		if err := t.src.UnmarshalBinary(rng); err != nil {
			return StepResult{}, err
		}
		return StepResult{}, ctx.Err()
	}
	idx := t.cur.Take(o.Groups)
	G := len(idx)
	F := m.Features() // the pooled pair, then any lexical features
	head := nn.Listwise[float32]{G: 1, K: K, D: F}
	la := head.NewActs()
	pool := nn.PairPool[float32]{D: D}
	pa := make([]*nn.PairPoolActs[float32], K)
	for k := range pa {
		pa[k] = pool.NewActs(1)
	}
	p, dp := make([]float32, K*F), make([]float32, K*F)
	valid := make([]bool, K)
	acts := make([]*dense.Acts[float32], K)

	m.Enc.Model.Zero(t.grads)
	clear(t.dw)
	var loss float64
	res := StepResult{Step: t.Step + 1}
	for _, i := range idx {
		// the group: the positive, then negatives drawn without replacement
		negs := t.Data.Negatives[i]
		cands := []int{i}
		for _, j := range t.rng.Perm(len(negs))[:min(K-1, len(negs))] {
			cands = append(cands, negs[j])
		}
		// pass 1: encode and pool each pair of the group
		clear(p)
		nq := []int{len(t.Data.Queries[i])}
		for k := range K {
			valid[k] = k < len(cands)
			acts[k] = nil
			if !valid[k] {
				continue
			}
			if ctx.Err() != nil {
				return giveUp()
			}
			seq := m.Pair(t.Data.Queries[i], t.Data.Codes[cands[k]])
			Tn := dense.Padded(len(seq))
			a := t.take(Tn)
			if err := m.Enc.ForwardSegments(a, [][]int{seq}, [][]int{m.segments(nq[0], len(seq))}); err != nil {
				return StepResult{}, err
			}
			m.features(p[k*F:(k+1)*F], pa[k], a, t.Data.Queries[i], t.Data.Codes[cands[k]])
			acts[k] = a
			res.Pairs++
			res.Tokens += len(seq)
		}
		// pass 2: scores and the group's loss
		l := head.Forward(la, p, m.W, valid)
		loss += float64(l)
		won := true // the positive scores strictly above every valid negative
		for k := 1; k < K; k++ {
			if valid[k] && la.S[k] >= la.S[0] {
				won = false
			}
		}
		if won {
			res.Accuracy++
		}
		// The chain rule starts with dloss = 1/G (the mean over groups) and
		// runs back through the head and the pooling into each sequence.
		clear(dp)
		head.Backward(dp, t.dw, 1/float32(G), p, m.W, valid, la)
		for k, a := range acts {
			if a == nil {
				continue
			}
			if ctx.Err() != nil {
				return giveUp()
			}
			if cap(t.dOut) < len(a.Out) {
				t.dOut = make([]float32, len(a.Out))
			}
			dOut := t.dOut[:len(a.Out)]
			clear(dOut) // PairPool.Backward adds into it; the lexical features are inputs and get no gradient
			pool.Backward(dOut, dp[k*F:k*F+D], nq, a.Valid, 1, a.T, pa[k])
			m.Enc.Backward(t.grads, a, dOut)
			t.spare[a.T] = append(t.spare[a.T], a) // free for the next group
		}
	}
	res.Loss = loss / float64(G)
	res.Accuracy /= float64(G)
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return StepResult{}, fmt.Errorf("rerank: step %d: %w", t.Step+1, ErrNonFinite)
	}
	norm := train.ClipGradNorm(t.params, o.Clip)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return StepResult{}, fmt.Errorf("rerank: step %d: %w", t.Step+1, ErrNonFinite)
	}
	res.LR = o.Schedule.At(t.Step)
	res.GradNorm = norm
	scale := o.HeadLRScale
	if scale == 0 {
		scale = 1
	}
	n := len(t.params) - 1
	t.adam.Update(t.params[:n], res.LR)
	t.headAdam.Update(t.params[n:], res.LR*scale)
	t.Step++
	return res, nil
}

// take returns activations for one sequence of Tn padded tokens, reusing a
// spare one: each group gives its activations back after its backward.
func (t *Trainer) take(Tn int) *dense.Acts[float32] {
	if s := t.spare[Tn]; len(s) > 0 {
		t.spare[Tn] = s[:len(s)-1]
		return s[len(s)-1]
	}
	return t.Model.Enc.NewActs(1, Tn)
}
