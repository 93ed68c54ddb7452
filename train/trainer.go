package train

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

// Options are a training run's hyper-parameters.
type Options struct {
	BatchSize   int      `flag:"batch"` // windows per micro-batch
	Accum       int      `flag:"accum"` // micro-batches per optimiser step (gradients averaged)
	Steps       int      `flag:"steps"` // optimiser steps of the run
	Schedule    Schedule // learning rate per step
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64 `flag:"wd"`
	DecayAll    bool    // decay norms and embeddings too
	Clip        float64 `flag:"clip"` // global gradient-norm clip; 0: none
	Seed        uint64  `flag:"seed"` // data order
	// CheckpointActivations keeps only each block's input and recomputes its
	// activations in the backward: less memory, one more forward pass, the
	// same gradients bit for bit.
	CheckpointActivations bool `flag:"checkpoint-activations"`
	// Shards splits each micro-batch into this many equal parts that run
	// forward and backward at the same time, one goroutine each, into
	// gradient buffers of their own, summed in shard order: data
	// parallelism across cores. The result depends on Shards (the sums
	// round in another order), never on the number of cores or the
	// scheduling. 0 or 1: one part.
	Shards int `flag:"shards"`
}

// Trainer holds a run's state: model, parameters, gradients, optimiser and
// the place in the data.
type Trainer[T nn.Float] struct {
	Model   *model.Model[T]
	Params  *model.Params[T]
	Grads   *model.Params[T]
	Opt     *AdamW[T]
	Data    *Windows
	Cursor  *Cursor
	Options Options
	Step    int // optimiser steps taken

	acts   []*model.Acts[T]   // per shard
	grads  []*model.Params[T] // per shard; grads[0] is Grads
	params []Param[T]

	fingerprint string // of Data, once computed
}

// shards is the number of parts of a micro-batch.
func (o Options) shards() int { return max(o.Shards, 1) }

// NewTrainer starts a run at step 0 on data with parameters p.
func NewTrainer[T nn.Float](m *model.Model[T], p *model.Params[T], data *Windows, o Options) (*Trainer[T], error) {
	switch {
	case o.BatchSize < 1 || o.Accum < 1:
		return nil, fmt.Errorf("train: batch size %d and accumulation %d must be positive", o.BatchSize, o.Accum)
	case data.T > m.Config.MaxPositionEmbeddings:
		return nil, fmt.Errorf("train: window of %d tokens is longer than max_position_embeddings = %d", data.T, m.Config.MaxPositionEmbeddings)
	case len(data.Tokens) == 0:
		return nil, errors.New("train: no training windows")
	case o.Shards < 0 || o.BatchSize%o.shards() != 0:
		return nil, fmt.Errorf("train: batch size %d does not split into %d shards", o.BatchSize, o.Shards)
	}
	t := &Trainer[T]{Model: m, Params: p, Grads: m.NewParams(), Opt: NewAdamW[T](o.Beta1, o.Beta2, o.Eps, o.WeightDecay),
		Data: data, Cursor: NewCursor(len(data.Tokens), o.Seed), Options: o}
	per := o.BatchSize / o.shards()
	for s := range o.shards() {
		if o.CheckpointActivations {
			t.acts = append(t.acts, m.NewCheckpointedActs(per, data.T))
		} else {
			t.acts = append(t.acts, m.NewActs(per, data.T))
		}
		g := t.Grads
		if s > 0 {
			g = m.NewParams()
		}
		t.grads = append(t.grads, g)
	}
	t.params = Params(m, p, t.Grads, o.DecayAll)
	return t, nil
}

// StepResult reports one optimiser step.
type StepResult struct {
	Step     int     // the step just taken, 1-based
	Loss     float64 // mean over its micro-batches
	GradNorm float64 // before clipping
	LR       float64
	Tokens   int // tokens with a target
}

// ErrNonFinite is returned, wrapped with the step, when a loss or gradient
// is NaN or infinite; the parameters are then left as they were before the
// step.
var ErrNonFinite = errors.New("loss or gradient is not finite")

// TrainStep takes one optimiser step: Accum micro-batches forward and
// backward, gradients averaged, clipped, and applied by AdamW at the
// schedule's rate.
func (t *Trainer[T]) TrainStep() (StepResult, error) {
	o := t.Options
	S := o.shards()
	for _, g := range t.grads {
		t.Model.Zero(g)
	}
	var res StepResult
	batches := make([]*model.Batch, S)
	losses, counts, errs := make([]T, S), make([]int, S), make([]error, S)
	for range o.Accum {
		idx := t.Cursor.Take(o.BatchSize)
		per := o.BatchSize / S
		t.parallel(func(s int) {
			batches[s] = t.Data.Batch(idx[s*per : (s+1)*per])
			losses[s], counts[s], errs[s] = t.Model.Forward(t.acts[s], t.Params, batches[s])
		})
		var loss float64
		count := 0
		for s := range S {
			if errs[s] != nil {
				return res, errs[s]
			}
			loss += float64(losses[s]) * float64(counts[s])
			count += counts[s]
		}
		if count > 0 {
			loss /= float64(count)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("train: step %d: %w (loss %v)", t.Step+1, ErrNonFinite, loss)
		}
		// each shard's gradient weighted by its share of the targets: the
		// shards' sum is the gradient of the micro-batch's mean loss
		t.parallel(func(s int) {
			if counts[s] == 0 {
				return
			}
			dloss := T(1)
			if S > 1 {
				dloss = T(float64(counts[s]) / float64(count))
			}
			t.Model.BackwardScaled(t.grads[s], t.Params, t.acts[s], batches[s], dloss)
		})
		res.Loss += loss / float64(o.Accum)
		res.Tokens += count
	}
	for s := 1; s < S; s++ { // in shard order: the same sums on any machine
		dst, src := t.Model.Tensors(t.Grads), t.Model.Tensors(t.grads[s])
		for i := range dst {
			for j, v := range src[i].Data {
				dst[i].Data[j] += v
			}
		}
	}
	if o.Accum > 1 { // the mean of the micro-batches' mean losses
		inv := T(1 / float64(o.Accum))
		for _, p := range t.params {
			for i := range p.Grad {
				p.Grad[i] *= inv
			}
		}
	}
	res.GradNorm = ClipGradNorm(t.params, o.Clip)
	if math.IsNaN(res.GradNorm) || math.IsInf(res.GradNorm, 0) {
		return res, fmt.Errorf("train: step %d: %w (gradient norm %v)", t.Step+1, ErrNonFinite, res.GradNorm)
	}
	res.LR = o.Schedule.At(t.Step)
	t.Opt.Update(t.params, res.LR)
	t.Step++
	res.Step = t.Step
	return res, nil
}

// Evaluate returns the mean loss per target token over the windows of data
// (all of them, B at a time), and the total loss in nats.
func Evaluate[T nn.Float](m *model.Model[T], p *model.Params[T], data *Windows, B int) (mean, total float64, tokens int, err error) {
	a := m.NewActs(B, data.T)
	for start := 0; start < len(data.Tokens); start += B {
		idx := make([]int, 0, B)
		for i := start; i < min(start+B, len(data.Tokens)); i++ {
			idx = append(idx, i)
		}
		b := data.Batch(idx)
		if len(idx) != B {
			a = m.NewActs(len(idx), data.T)
		}
		loss, count, err := m.Forward(a, p, b)
		if err != nil {
			return 0, 0, 0, err
		}
		total += float64(loss) * float64(count)
		tokens += count
	}
	if tokens == 0 {
		return 0, 0, 0, errors.New("train: no validation tokens")
	}
	return total / float64(tokens), total, tokens, nil
}

// parallel runs f for each shard, one goroutine a shard, and waits.
func (t *Trainer[T]) parallel(f func(s int)) {
	S := t.Options.shards()
	if S == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for s := range S {
		wg.Go(func() { f(s) })
	}
	wg.Wait()
}
