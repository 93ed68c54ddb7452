package model

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/nn"
)

// Params are the weights of a model, in Hugging Face layout. The same type
// holds gradients: var params, grads model.Params.
type Params[T nn.Float] struct {
	Embed  []T               // model.embed_tokens.weight (V, D)
	Layers []BlockWeights[T] // model.layers.{i}.*
	Norm   []T               // model.norm.weight (D)
	LMHead []T               // lm_head.weight (V, D); nil when tied to Embed
}

// Model is a Llama-style decoder: embedding, L pre-norm blocks, a final
// RMSNorm and the LM head, trained with cross-entropy on shifted labels.
type Model[T nn.Float] struct {
	Config Config
	Block  Block[T]
}

// New returns the model of cfg, or the error of cfg.Validate, or an error
// when the weights of cfg (NumParams elements of T) do not fit in the
// memory available.
func New[T nn.Float](cfg Config) (*Model[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var z T
	n := cfg.NumParams()
	if err := memlimit.Check(fmt.Sprintf("model: a config of %d parameters", n), memlimit.Mul(n, int(unsafe.Sizeof(z))), fmt.Sprintf("%T weights", z)); err != nil {
		return nil, err
	}
	dh := cfg.Head()
	return &Model[T]{Config: cfg, Block: Block[T]{
		Attn: attention.Layer[T]{Dim: cfg.HiddenSize, Hq: cfg.NumAttentionHeads, Hkv: cfg.NumKeyValueHeads, HeadDim: dh,
			RoPE: nn.RoPE[T]{D: dh, Base: cfg.RopeTheta}, Sinks: cfg.AttentionSinks},
		MLP:  nn.SwiGLU[T]{D: cfg.HiddenSize, F: cfg.IntermediateSize},
		Norm: nn.RMSNorm[T]{D: cfg.HiddenSize, Eps: T(cfg.RMSNormEps)},
	}}, nil
}

// NewParams returns zeroed parameters of the model's shapes.
func (m *Model[T]) NewParams() *Params[T] {
	c := m.Config
	p := &Params[T]{Embed: make([]T, c.VocabSize*c.HiddenSize), Norm: make([]T, c.HiddenSize)}
	for range c.NumHiddenLayers {
		p.Layers = append(p.Layers, *m.Block.NewBlockWeights())
	}
	if !c.TieWordEmbeddings {
		p.LMHead = make([]T, c.VocabSize*c.HiddenSize)
	}
	return p
}

// Head returns the LM head's weight: LMHead, or Embed when tied.
func (p *Params[T]) Head() []T {
	if p.LMHead == nil {
		return p.Embed
	}
	return p.LMHead
}

// Tensor is one named parameter tensor.
type Tensor[T nn.Float] struct {
	Name  string
	Shape []int
	Data  []T
}

// Tensors lists every parameter under its Hugging Face name, in a fixed
// order. The slices alias p.
func (m *Model[T]) Tensors(p *Params[T]) []Tensor[T] {
	c := m.Config
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	q, kv := c.NumAttentionHeads*c.Head(), c.NumKeyValueHeads*c.Head()
	ts := []Tensor[T]{{"model.embed_tokens.weight", []int{V, D}, p.Embed}}
	for i, l := range p.Layers {
		pre := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			Tensor[T]{pre + "input_layernorm.weight", []int{D}, l.AttnNorm},
			Tensor[T]{pre + "self_attn.q_proj.weight", []int{q, D}, l.Attn.Wq},
			Tensor[T]{pre + "self_attn.k_proj.weight", []int{kv, D}, l.Attn.Wk},
			Tensor[T]{pre + "self_attn.v_proj.weight", []int{kv, D}, l.Attn.Wv},
			Tensor[T]{pre + "self_attn.o_proj.weight", []int{D, q}, l.Attn.Wo},
			Tensor[T]{pre + "post_attention_layernorm.weight", []int{D}, l.MLPNorm},
			Tensor[T]{pre + "mlp.gate_proj.weight", []int{F, D}, l.Gate},
			Tensor[T]{pre + "mlp.up_proj.weight", []int{F, D}, l.Up},
			Tensor[T]{pre + "mlp.down_proj.weight", []int{D, F}, l.Down},
		)
		if c.AttentionSinks {
			ts = append(ts, Tensor[T]{pre + "self_attn.sinks", []int{c.NumAttentionHeads}, l.Attn.Sinks})
		}
	}
	ts = append(ts, Tensor[T]{"model.norm.weight", []int{D}, p.Norm})
	if p.LMHead != nil {
		ts = append(ts, Tensor[T]{"lm_head.weight", []int{V, D}, p.LMHead})
	}
	return ts
}

// Zero sets every parameter to zero (for gradients).
func (m *Model[T]) Zero(p *Params[T]) {
	for _, t := range m.Tensors(p) {
		clear(t.Data)
	}
}

// Batch is B sequences of T tokens with their mask data, each (B, T).
type Batch struct {
	B, T    int
	Tokens  []int
	Valid   []bool // nil: every token real
	Seg     []int  // nil: one document per row
	Pos     []int  // nil: Positions(Valid, Seg)
	Targets []int  // nil: ShiftedTargets; nn.DefaultIgnoreIndex where no loss
}

// Positions returns the positions of b's tokens: Pos when given, else counted
// over real tokens from 0, restarting where the segment id changes (packed
// documents each begin at position 0).
func (b *Batch) Positions() []int {
	if b.Pos != nil {
		return b.Pos
	}
	pos := make([]int, b.B*b.T)
	for r := range b.B {
		n := 0
		for t := range b.T {
			i := r*b.T + t
			if b.Seg != nil && t > 0 && b.Seg[i] != b.Seg[i-1] {
				n = 0
			}
			pos[i] = n
			if b.Valid == nil || b.Valid[i] {
				n++
			}
		}
	}
	return pos
}

// ShiftedTargets returns the labels of a causal language model: position t
// predicts token t+1 of the same row and segment; padding, the last token of
// a row and the last token of each document get nn.DefaultIgnoreIndex, so
// no position is asked to predict across a document boundary.
func (b *Batch) ShiftedTargets() []int {
	if b.Targets != nil {
		return b.Targets
	}
	tg := make([]int, b.B*b.T)
	for i := range tg {
		tg[i] = nn.DefaultIgnoreIndex
		t := i % b.T
		switch {
		case t+1 >= b.T:
		case b.Valid != nil && (!b.Valid[i] || !b.Valid[i+1]):
		case b.Seg != nil && b.Seg[i] != b.Seg[i+1]:
		default:
			tg[i] = b.Tokens[i+1]
		}
	}
	return tg
}

// Attention returns the mask of b: causal self-attention by position, with
// b's validity and segments, and m's sliding window and softcap.
func (b *Batch) Attention(m Config) *attention.Config {
	pos := b.Positions()
	return &attention.Config{
		B: b.B, Hq: m.NumAttentionHeads, Hkv: m.NumKeyValueHeads, M: b.T, N: b.T, D: m.Head(), Dv: m.Head(),
		Causal: true, QPos: pos, KPos: pos, QValid: b.Valid, KValid: b.Valid, QSeg: b.Seg, KSeg: b.Seg,
		Window: m.SlidingWindow, Softcap: m.AttnLogitSoftcapping,
	}
}

// capLogits applies final_logit_softcapping c to logits in place:
// z ← c · tanh(z / c).
func capLogits[T nn.Float](logits []T, c float64) {
	if c == 0 {
		return
	}
	for x, z := range logits {
		logits[x] = T(c * math.Tanh(float64(z)/c))
	}
}

// capLogitsGrad takes dlogits back through capLogits, given the capped
// logits t: forward was t = c · tanh(z / c), so dz = dt ⊙ (1 − (t / c)²).
func capLogitsGrad[T nn.Float](dlogits, capped []T, c float64) {
	if c == 0 {
		return
	}
	for x, t := range capped {
		r := float64(t) / c
		dlogits[x] *= T(1 - r*r)
	}
}

// Check validates b against the model: shapes, token ids, positions within
// max_position_embeddings. Errors name the offending field and index.
func (b *Batch) Check(m Config) error {
	n := b.B * b.T
	if b.B < 1 || b.T < 1 {
		return fmt.Errorf("model: batch %d×%d is empty", b.B, b.T)
	}
	if len(b.Tokens) != n {
		return fmt.Errorf("model: batch has %d tokens, want B*T = %d", len(b.Tokens), n)
	}
	for i, tok := range b.Tokens {
		if (b.Valid == nil || b.Valid[i]) && (tok < 0 || tok >= m.VocabSize) {
			return fmt.Errorf("model: token %d (row %d, position %d) is %d, outside the vocabulary [0, %d)", i, i/b.T, i%b.T, tok, m.VocabSize)
		}
	}
	for _, s := range []struct {
		name string
		n    int
		set  bool
	}{{"valid", len(b.Valid), b.Valid != nil}, {"seg", len(b.Seg), b.Seg != nil}, {"pos", len(b.Pos), b.Pos != nil}, {"targets", len(b.Targets), b.Targets != nil}} {
		if s.set && s.n != n {
			return fmt.Errorf("model: batch %s has %d entries, want B*T = %d", s.name, s.n, n)
		}
	}
	// One rule for segments: a document is contiguous. An id that comes
	// back after another would join two documents in attention while
	// positions restart at each change.
	if b.Seg != nil {
		for r := range b.B {
			seen := map[int]bool{}
			for t := range b.T {
				i := r*b.T + t
				if t > 0 && b.Seg[i] == b.Seg[i-1] {
					continue
				}
				if seen[b.Seg[i]] {
					return fmt.Errorf("model: batch seg: row %d: segment id %d reappears at position %d after segment %d; a segment must be contiguous", r, b.Seg[i], t, b.Seg[i-1])
				}
				seen[b.Seg[i]] = true
			}
		}
	}
	for i, p := range b.Positions() {
		if p < 0 || p >= m.MaxPositionEmbeddings {
			return fmt.Errorf("model: token %d (row %d) has position %d, outside [0, max_position_embeddings = %d)", i, i/b.T, p, m.MaxPositionEmbeddings)
		}
	}
	for i, tg := range b.ShiftedTargets() {
		if tg != nn.DefaultIgnoreIndex && (tg < 0 || tg >= m.VocabSize) {
			return fmt.Errorf("model: target %d is %d, outside the vocabulary [0, %d)", i, tg, m.VocabSize)
		}
	}
	return nil
}

// Acts holds what Forward saves for Backward.
type Acts[T nn.Float] struct {
	X      [][]T           // X[l] is the input of block l (B·T, D); X[L] the final norm's input
	Blocks []*BlockActs[T] // per block
	XF     []T             // final RMSNorm output (B·T, D)
	RstdF  []T
	Logits []T // (B·T, V)
	Probs  []T // softmax of Logits, kept for the backward

	targets      []int
	count        int
	dlogits      []T // the backward's ∂L/∂logits, kept to be reused
	dx, dxf      []T
	checkpointed bool
}

// NewActs returns activations for B sequences of T tokens, keeping every
// block's activations for the backward.
func (m *Model[T]) NewActs(B, Tn int) *Acts[T] {
	return m.newActs(B, Tn, m.Config.NumHiddenLayers)
}

// NewCheckpointedActs returns activations for B sequences of T tokens that
// keep only each block's input: the backward recomputes a block's
// activations, one block at a time, into a single shared buffer (activation
// checkpointing). Gradients are bit-identical to those of NewActs; the
// memory of L−1 blocks' activations is saved for one extra forward pass.
func (m *Model[T]) NewCheckpointedActs(B, Tn int) *Acts[T] {
	a := m.newActs(B, Tn, 1)
	a.checkpointed = true
	return a
}

func (m *Model[T]) newActs(B, Tn, blocks int) *Acts[T] {
	c := m.Config
	n, D, V := B*Tn, c.HiddenSize, c.VocabSize
	a := &Acts[T]{XF: make([]T, n*D), RstdF: make([]T, n), Logits: make([]T, n*V), Probs: make([]T, n*V),
		dx: make([]T, n*D), dxf: make([]T, n*D)}
	for range c.NumHiddenLayers + 1 {
		a.X = append(a.X, make([]T, n*D))
	}
	for range blocks {
		a.Blocks = append(a.Blocks, m.Block.NewBlockActs(B, Tn))
	}
	return a
}

// block returns the activations of block l.
func (a *Acts[T]) block(l int) *BlockActs[T] {
	if a.checkpointed {
		return a.Blocks[0]
	}
	return a.Blocks[l]
}

// Forward runs the model on b, leaving the logits in a.Logits, and returns the
// mean cross-entropy over b's counted targets and their number (0 and 0 when
// no token has a target). It returns an error for bad input (see
// Batch.Check) or a valid token that sees nothing.
func (m *Model[T]) Forward(a *Acts[T], p *Params[T], b *Batch) (loss T, count int, err error) {
	if err := b.Check(m.Config); err != nil {
		return 0, 0, err
	}
	c := m.Config
	n, D, V := b.B*b.T, c.HiddenSize, c.VocabSize
	tokens := b.Tokens
	if b.Valid != nil { // padding may hold any id; embed token 0 there
		tokens = append([]int(nil), tokens...)
		for i, ok := range b.Valid {
			if !ok {
				tokens[i] = 0
			}
		}
	}
	nn.Embedding[T]{V: V, D: D}.Forward(a.X[0], tokens, p.Embed)
	ac := b.Attention(c)
	for l := range p.Layers {
		if err := m.Block.Forward(a.X[l+1], a.block(l), a.X[l], &p.Layers[l], ac); err != nil {
			return 0, 0, err
		}
	}
	L := len(p.Layers)
	m.Block.Norm.Forward(a.XF, a.RstdF, a.X[L], p.Norm, n)
	nn.Linear[T]{In: D, Out: V}.Forward(a.Logits, a.XF, p.Head(), nil, n)
	capLogits(a.Logits, c.FinalLogitSoftcapping)
	a.targets = b.ShiftedTargets()
	loss, a.count = nn.CrossEntropy[T]{V: V, IgnoreIndex: nn.DefaultIgnoreIndex}.Forward(a.Probs, a.Logits, a.targets, n)
	return loss, a.count, nil
}

// Backward adds the gradient of the loss of the last Forward into g, layer by
// layer in exact reverse order. Backward adds into g; callers zero it.
func (m *Model[T]) Backward(g, p *Params[T], a *Acts[T], b *Batch) {
	m.BackwardScaled(g, p, a, b, 1)
}

// BackwardScaled is Backward of dloss times the loss: the gradient of a
// part of a larger batch, weighted by its share of the targets, so that
// the parts' gradients sum to the whole batch's.
func (m *Model[T]) BackwardScaled(g, p *Params[T], a *Acts[T], b *Batch, dloss T) {
	c := m.Config
	n, D, V := b.B*b.T, c.HiddenSize, c.VocabSize
	// We kick off the chain rule with dloss (1 for the loss itself): the
	// loss is the mean over count targets, so each counted row gets
	// dlogits = dloss·(p − onehot)/count.
	if len(a.dlogits) < n*V {
		a.dlogits = make([]T, n*V)
	}
	dlogits := a.dlogits[:n*V]
	clear(dlogits) // CrossEntropy.Backward adds into it
	nn.CrossEntropy[T]{V: V, IgnoreIndex: nn.DefaultIgnoreIndex}.Backward(dlogits, a.Probs, a.targets, n, a.count, dloss)
	// forward was: logits = c · tanh(z / c) (final_logit_softcapping)
	capLogitsGrad(dlogits, a.Logits, c.FinalLogitSoftcapping)
	// forward was: logits = XF headᵀ (the head may be the embedding: tied)
	clear(a.dxf)
	nn.Linear[T]{In: D, Out: V}.Backward(a.dxf, g.Head(), nil, dlogits, a.XF, p.Head(), n)
	// forward was: XF = RMSNorm(X[L])
	clear(a.dx)
	m.Block.Norm.Backward(a.dx, g.Norm, a.dxf, a.X[len(p.Layers)], p.Norm, a.RstdF, n)
	ac := b.Attention(c)
	for l := len(p.Layers) - 1; l >= 0; l-- {
		// forward was: X[l+1] = Block(X[l]); a.dx holds ∂L/∂X[l+1]
		if a.checkpointed {
			// recompute the block's activations from its saved input; the
			// output, already in X[l+1], is written again with the same bits
			m.Block.Forward(a.X[l+1], a.Blocks[0], a.X[l], &p.Layers[l], ac)
		}
		clear(a.dxf)
		m.Block.Backward(a.dxf, &g.Layers[l], a.dx, a.X[l], &p.Layers[l], a.block(l), ac)
		a.dx, a.dxf = a.dxf, a.dx
	}
	// forward was: X[0] = Embed[tokens]; padding rows carry no gradient
	tokens := b.Tokens
	if b.Valid != nil {
		tokens = append([]int(nil), tokens...)
		for i, ok := range b.Valid {
			if !ok {
				tokens[i] = 0
				clear(a.dx[i*D : (i+1)*D])
			}
		}
	}
	nn.Embedding[T]{V: V, D: D}.Backward(g.Embed, a.dx, tokens)
}
