package dense

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// Data is a tokenised training split with its mined hard negatives.
type Data struct {
	Queries, Codes [][]int  // token ids, truncated
	Keys           []string // retrieve.CodeKey of each code
	QueryText      []string // for masking other pairs with the same query
	Negatives      [][]int  // per pair: indices of hard-negative codes

	print string // fingerprint, once computed
}

// NewData tokenises pairs as m does (its text preparation, tokenizer and
// limits) and attaches the hard negatives (nil: none).
func NewData(m *Model, pairs []retrieve.Pair, negatives [][]int) *Data {
	d := &Data{Negatives: negatives}
	for _, p := range pairs {
		d.Queries = append(d.Queries, m.QueryTokens(p.Query))
		d.Codes = append(d.Codes, m.Tokens(p.Code, m.Settings.MaxCode))
		d.Keys = append(d.Keys, retrieve.CodeKey(p.Code))
		d.QueryText = append(d.QueryText, p.Query)
	}
	if d.Negatives == nil {
		d.Negatives = make([][]int, len(pairs))
	}
	return d
}

// Unmasked returns how many pairs have a negative the loss can see: another
// pair whose code is another document (by Keys) and whose query another
// text, or one of its first hard hard negatives whose code is another
// document. A
// pair without one has every negative masked as a false negative in every
// batch; its loss is 0 and its accuracy 1 whatever the weights.
func (d *Data) Unmasked(hard int) int {
	byKey, byQuery, byBoth := map[string]int{}, map[string]int{}, map[[2]string]int{}
	for i, k := range d.Keys {
		byKey[k]++
		byQuery[d.QueryText[i]]++
		byBoth[[2]string{k, d.QueryText[i]}]++
	}
	n := 0
	for i, k := range d.Keys {
		q := d.QueryText[i]
		if byKey[k]+byQuery[q]-byBoth[[2]string{k, q}] < len(d.Keys) {
			n++
			continue
		}
		negs := d.Negatives[i]
		if slices.ContainsFunc(negs[:min(len(negs), hard)], func(j int) bool { return d.Keys[j] != k }) {
			n++
		}
	}
	return n
}

// Options configures a Trainer.
type Options struct {
	Batch         int            `flag:"batch"`          // pairs per step: B
	HardNegatives int            `flag:"hard-negatives"` // hard negatives per query used each step (at most those mined)
	Tau           float64        `flag:"tau"`            // temperature, or its starting value when learned
	LearnTau      bool           `flag:"learn-tau"`      // learn log τ with the weights (τ kept ≥ 0.01)
	Symmetric     bool           `flag:"symmetric"`      // add the code→query direction to the loss
	Schedule      train.Schedule // learning rate by step
	Beta1, Beta2  float64
	Eps           float64
	WD            float64 `flag:"wd"`
	Clip          float64 `flag:"clip"`
	Seed          uint64  `flag:"seed"`
	// Chunk is the number of sequences whose activations are alive at once
	// in the backward (GradCache: Gao et al., "Scaling Deep Contrastive
	// Learning Batch Size under Memory Limited Setup", 2021). With Chunk > 0
	// a step encodes every sequence twice: once for its embedding alone,
	// then Chunk at a time for the backward. The gradients are the same bit
	// for bit; the price is one more forward pass per sequence. Sequences
	// are encoded one at a time, so Chunk 1 costs no more compute than a
	// larger chunk. 0 keeps the activations of the whole step.
	Chunk int `flag:"chunk"`
	// ShortQueries is the probability with which a training pair's query
	// is cut as a developer types it (ShortQuery, at most ShortWords
	// content words); 0 keeps every query. Run applies it to the pairs
	// (ShortenQueries, drawn with Seed) before NewData; it is recorded here
	// so that a resume with another value is refused by name.
	ShortQueries float64 `flag:"short-queries"`
	ShortWords   int     `flag:"short-words"`
	// DenseNegatives is the number of hard negatives per query Run mined
	// with the dual encoder it started from (RunOptions.DenseNegatives),
	// recorded so that a resume with another value is refused by name.
	DenseNegatives int `flag:"dense-negatives"`
}

// Trainer trains an encoder with InfoNCE over in-batch and hard negatives.
type Trainer struct {
	Enc   *Encoder[float32]
	Opt   Options
	Data  *Data
	Step  int
	Tau   float64 // the current temperature
	grads *model.Params[float32]
	adam  *train.AdamW[float32]
	cur   *train.Cursor

	params []train.Param[float32]
	logTau []float32 // learned temperature: log τ and its gradient
	dTau   []float32

	spare map[int][]*Acts[float32] // activations of the last step, by padded length, for reuse
	dOut  []float32                // ∂L/∂Out of one sequence, reused
	peak  int                      // most Acts holding activations at once in the last step
}

// NewTrainer returns a trainer of enc (initialised by the caller) on data.
// Data in which no pair has a negative the loss can see (Unmasked is 0) is
// an error that counts its distinct documents and queries.
func NewTrainer(enc *Encoder[float32], data *Data, o Options) (*Trainer, error) {
	switch {
	case o.Batch < 2:
		return nil, fmt.Errorf("dense: batch %d: in-batch negatives need at least 2 pairs", o.Batch)
	case len(data.Queries) < o.Batch:
		return nil, fmt.Errorf("dense: %d training pairs, fewer than a batch of %d", len(data.Queries), o.Batch)
	case !(o.Tau > 0) || math.IsInf(o.Tau, 0):
		return nil, fmt.Errorf("dense: temperature %v, want a finite value > 0", o.Tau)
	case o.HardNegatives < 0:
		return nil, fmt.Errorf("dense: %d hard negatives", o.HardNegatives)
	case o.Chunk < 0:
		return nil, fmt.Errorf("dense: chunk %d, want 0 (the whole step) or more sequences", o.Chunk)
	}
	if data.Unmasked(o.HardNegatives) == 0 {
		return nil, fmt.Errorf("dense: every negative of the %d training pairs is masked (distinct code documents: %d, distinct queries: %d): a pair's copies and same-query pairs are false negatives, so the loss would be 0 and the accuracy 1",
			len(data.Queries), distinct(data.Keys), distinct(data.QueryText))
	}
	t := &Trainer{Enc: enc, Opt: o, Data: data, Tau: o.Tau,
		grads: enc.Model.NewParams(),
		adam:  train.NewAdamW[float32](o.Beta1, o.Beta2, o.Eps, o.WD),
		cur:   train.NewCursor(len(data.Queries), o.Seed),
		spare: map[int][]*Acts[float32]{},
	}
	t.params = train.Params(enc.Model, enc.Params, t.grads, false)
	if o.LearnTau {
		t.logTau, t.dTau = []float32{float32(math.Log(o.Tau))}, []float32{0}
		t.params = append(t.params, train.Param[float32]{Name: "log_temperature", X: t.logTau, Grad: t.dTau})
	}
	return t, nil
}

// distinct returns the number of distinct strings of x.
func distinct(x []string) int {
	seen := map[string]bool{}
	for _, s := range x {
		seen[s] = true
	}
	return len(seen)
}

// StepResult reports one optimiser step.
type StepResult struct {
	Step     int
	Loss     float64
	Accuracy float64 // fraction of queries whose positive has the row's largest similarity
	LR       float64
	GradNorm float64 // before clipping
	Tau      float64
	Docs     int // documents in the step (positives and hard negatives)
	Tokens   int // tokens of the step's sequences
	Forwards int // encoder forward passes: one per sequence, two with Chunk > 0
}

// ErrNonFinite is returned by TrainStep when the loss or gradient is NaN or
// infinite; the weights are left as they were before the step.
var ErrNonFinite = train.ErrNonFinite // one policy for every trainer: see train.Loop

// actsPool hands out the activations of a step's sequences, one Acts (a
// batch of one) per sequence at its padded length. An Acts given back is
// reused within the step; the previous step's are reused before new ones
// are made.
type actsPool struct {
	enc        *Encoder[float32]
	last, free map[int][]*Acts[float32] // the previous step's; those given back in this one
	used       map[int][]*Acts[float32] // every Acts of this step, for the next
	live, peak int                      // Acts handed out and not given back: now, at most
	forwards   int
}

func newActsPool(enc *Encoder[float32], last map[int][]*Acts[float32]) *actsPool {
	return &actsPool{enc: enc, last: last, free: map[int][]*Acts[float32]{}, used: map[int][]*Acts[float32]{}}
}

// encode runs the encoder on one sequence and returns its activations,
// which stay the caller's until put.
func (p *actsPool) encode(ids []int) (*Acts[float32], error) {
	Tn := Padded(len(ids))
	var a *Acts[float32]
	if s := p.free[Tn]; len(s) > 0 {
		a, p.free[Tn] = s[len(s)-1], s[:len(s)-1]
	} else {
		if s := p.last[Tn]; len(s) > 0 {
			a, p.last[Tn] = s[len(s)-1], s[:len(s)-1]
		} else {
			a = p.enc.NewActs(1, Tn)
		}
		p.used[Tn] = append(p.used[Tn], a)
	}
	p.live++
	p.peak = max(p.peak, p.live)
	if err := p.enc.Forward(a, [][]int{ids}); err != nil {
		p.put(a)
		return nil, err
	}
	p.forwards++
	return a, nil
}

// put gives a back for reuse.
func (p *actsPool) put(a *Acts[float32]) {
	p.free[a.T] = append(p.free[a.T], a)
	p.live--
}

// backward adds the gradients of one sequence into t.grads given
// dp = ∂L/∂pooled, its row.
func (t *Trainer) backward(a *Acts[float32], dp []float32) {
	if cap(t.dOut) < len(a.Out) {
		t.dOut = make([]float32, len(a.Out))
	}
	dOut := t.dOut[:len(a.Out)]
	clear(dOut)
	// forward was: pooled = MeanPool(Out)
	nn.MeanPool[float32]{D: len(dp)}.Backward(dOut, dp, a.Valid, 1, a.T)
	t.Enc.Backward(t.grads, a, dOut)
}

// TrainStep runs one optimiser step on the next batch.
func (t *Trainer) TrainStep() (StepResult, error) { return t.TrainStepContext(context.Background()) }

// TrainStepContext is TrainStep that gives the step up when ctx is done,
// between two sequences, and returns ctx's error with the trainer as it
// was before the step (weights, τ, place in the data): a checkpoint saved
// then resumes exactly.
func (t *Trainer) TrainStepContext(ctx context.Context) (StepResult, error) {
	o := t.Opt
	D := t.Enc.Model.Config.HiddenSize
	epoch, next := t.cur.Epoch, t.cur.Next
	giveUp := func() (StepResult, error) {
		t.cur.Restore(epoch, next)
		return StepResult{}, ctx.Err()
	}
	idx := t.cur.Take(o.Batch)
	B := len(idx)

	// The documents: the B positives, then each query's hard negatives.
	docs := slices.Clone(idx)
	for _, i := range idx {
		negs := t.Data.Negatives[i]
		docs = append(docs, negs[:min(len(negs), o.HardNegatives)]...)
	}
	N := len(docs)
	keys := make([]string, N)
	for j, d := range docs {
		keys[j] = t.Data.Keys[d]
	}
	// False negatives: copies of a positive's code, and the positives of
	// other queries with the same text.
	mask := make([]bool, B*N)
	nn.DuplicateMask(mask, keys, B)
	for i := range B {
		for j := range B {
			if j != i && t.Data.QueryText[idx[i]] == t.Data.QueryText[idx[j]] {
				mask[i*N+j] = true
			}
		}
	}

	// pass 1: encode every sequence and pool it; with Chunk > 0 only the
	// pooled vector is kept, and one Acts per padded length serves them all
	pool := newActsPool(t.Enc, t.spare)
	defer func() {
		t.spare, t.peak = pool.used, pool.peak // what this step used is what the next one may reuse
	}()
	seqs := make([][]int, 0, B+N)
	for _, i := range idx {
		seqs = append(seqs, t.Data.Queries[i])
	}
	for _, d := range docs {
		seqs = append(seqs, t.Data.Codes[d])
	}
	acts := make([]*Acts[float32], len(seqs))
	pooled := make([]float32, len(seqs)*D)
	tokens := 0
	for x, ids := range seqs {
		if ctx.Err() != nil {
			return giveUp()
		}
		a, err := pool.encode(ids)
		if err != nil {
			return StepResult{}, err
		}
		nn.MeanPool[float32]{D: D}.Forward(pooled[x*D:(x+1)*D], a.Out, a.Valid, 1, a.T)
		tokens += len(ids)
		if o.Chunk > 0 {
			pool.put(a)
		} else {
			acts[x] = a
		}
	}

	// pass 2: normalise, similarities, loss: the contrastive head
	head := nn.Head[float32]{Loss: nn.InfoNCE[float32]{B: B, N: N, D: D, Symmetric: o.Symmetric}, Eps: 1e-12}
	ha := head.NewActs()
	copy(ha.PQ, pooled[:B*D])
	copy(ha.PD, pooled[B*D:])
	tau := float32(t.Tau)
	la := ha.Loss
	l := head.ForwardPooled(ha, tau, mask)
	if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
		return StepResult{}, fmt.Errorf("dense: step %d: %w", t.Step+1, ErrNonFinite)
	}
	acc := 0
	for i := range B {
		row := la.S[i*N : (i+1)*N]
		best := i
		for j, s := range row {
			if s > row[best] && !mask[i*N+j] {
				best = j
			}
		}
		if best == i {
			acc++
		}
	}

	// The chain rule starts with dloss = 1 and runs back through the head
	// into each sequence's token vectors, then through the encoder.
	t.Enc.Model.Zero(t.grads)
	var dtau float32
	// forward was: the head on the pooled vectors
	dpooled := make([]float32, len(pooled))
	head.BackwardPooled(dpooled[:B*D], dpooled[B*D:], &dtau, 1, ha, tau, mask)

	// pass 3: the backward of each sequence, Chunk at a time. The loss
	// depends on the weights θ only through the pooled vectors p_x, so
	//
	//	∂L/∂θ = Σ_x (∂L/∂p_x)ᵀ ∂p_x/∂θ
	//
	// and the term of sequence x needs ∂L/∂p_x (a row of dpooled) and x's
	// own activations, nothing else. With Chunk > 0 pass 1 kept none: each
	// chunk is encoded again, and the forward being deterministic, its
	// activations are those pass 1 computed. The terms are added in the
	// same order either way, so the gradients are the same bit for bit.
	chunk := o.Chunk
	if chunk == 0 {
		chunk = len(seqs)
	}
	for lo := 0; lo < len(seqs); lo += chunk {
		hi := min(lo+chunk, len(seqs))
		if ctx.Err() != nil {
			return giveUp()
		}
		if o.Chunk > 0 {
			for x := lo; x < hi; x++ {
				a, err := pool.encode(seqs[x])
				if err != nil {
					return StepResult{}, err
				}
				acts[x] = a
			}
		}
		for x := lo; x < hi; x++ {
			if ctx.Err() != nil {
				return giveUp()
			}
			t.backward(acts[x], dpooled[x*D:(x+1)*D])
			pool.put(acts[x])
			acts[x] = nil
		}
	}
	if t.logTau != nil {
		t.dTau[0] = dtau * tau // ∂L/∂log τ = τ·∂L/∂τ
	}

	norm := train.ClipGradNorm(t.params, o.Clip)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return StepResult{}, fmt.Errorf("dense: step %d: %w", t.Step+1, ErrNonFinite)
	}
	lr := o.Schedule.At(t.Step)
	t.adam.Update(t.params, lr)
	if t.logTau != nil {
		t.logTau[0] = max(t.logTau[0], float32(math.Log(0.01)))
		t.Tau = math.Exp(float64(t.logTau[0]))
	}
	t.Step++
	return StepResult{Step: t.Step, Loss: float64(l), Accuracy: float64(acc) / float64(B), LR: lr, GradNorm: norm,
		Tau: float64(tau), Docs: N, Tokens: tokens, Forwards: pool.forwards}, nil
}
