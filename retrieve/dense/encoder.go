package dense

import (
	"fmt"
	"sync"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

// Encoder is the transformer of a dual encoder: token embedding, the
// pre-norm blocks of package model with bidirectional attention (causal
// with Causal) and padding masks, and a final RMSNorm. It turns B sequences of
// token ids into B·T token vectors; the contrastive head (nn.Head) pools
// and normalises them.
//
// The weights are those of a model.Model with tied embeddings: its LM head
// is never used, so a checkpoint is a Hugging Face Llama directory whose
// lm_head is the embedding.
type Encoder[T nn.Float] struct {
	Model  *model.Model[T]
	Params *model.Params[T]

	// Isolated is the number of blocks, from the first, in which the parts
	// of a sequence (ForwardSegments) do not attend to each other: each is
	// encoded as if alone, and only the blocks above compare them (the
	// split of a modular cross-encoder). It has no effect on Forward.
	Isolated int

	// Causal makes every token attend only to itself and the tokens before
	// it, as in the language model the encoder may start from (which never
	// saw a later token), instead of to the whole sequence.
	Causal bool
}

// Acts holds one batch of B sequences padded on the right to T tokens, and
// what Forward saves for Backward.
type Acts[T nn.Float] struct {
	B, T   int
	Tokens []int  // (B, T), 0 at padding
	Valid  []bool // (B, T)
	Pos    []int  // (B, T): 0, 1, … along each sequence
	Seg    []int  // (B, T): the part of each token (ForwardSegments), 0 otherwise
	X      [][]T  // X[l] is the input of block l (B·T, D); X[L] the final norm's input
	Blocks []*model.BlockActs[T]
	Out    []T // the token vectors: RMSNorm(X[L]) (B·T, D)
	Rstd   []T // (B·T)

	attn    *attention.Config
	sides   *attention.Config // attn with the parts of a sequence kept apart
	paired  bool              // whether the last forward was ForwardSegments
	dx, dxf []T
	// forwardOnly: every block shares one BlockActs (NewForwardActs), so
	// the activations the backward needs are not kept
	forwardOnly bool
}

// NewActs returns activations for B sequences of up to Tn tokens.
func (e *Encoder[T]) NewActs(B, Tn int) *Acts[T] {
	a := e.newActs(B, Tn, false)
	n := B * Tn * e.Model.Config.HiddenSize
	a.dx, a.dxf = make([]T, n), make([]T, n)
	return a
}

// NewForwardActs returns activations for B sequences of T tokens that serve
// Forward and ForwardSegments only: the blocks share one set of
// intermediate buffers, each overwriting the one before it, so they take
// about a block's memory instead of every block's. Backward panics on them.
func (e *Encoder[T]) NewForwardActs(B, Tn int) *Acts[T] { return e.newActs(B, Tn, true) }

// newActs returns the activations of NewActs without the backward's
// scratch; forwardOnly: with one BlockActs shared by every block.
func (e *Encoder[T]) newActs(B, Tn int, forwardOnly bool) *Acts[T] {
	c := e.Model.Config
	n, D := B*Tn, c.HiddenSize
	a := &Acts[T]{B: B, T: Tn, Tokens: make([]int, n), Valid: make([]bool, n), Pos: make([]int, n), Seg: make([]int, n),
		Out: make([]T, n*D), Rstd: make([]T, n), forwardOnly: forwardOnly}
	for range c.NumHiddenLayers + 1 {
		a.X = append(a.X, make([]T, n*D))
	}
	var shared *model.BlockActs[T]
	if forwardOnly {
		shared = e.Model.Block.NewBlockActs(B, Tn)
	}
	for range c.NumHiddenLayers {
		if forwardOnly {
			a.Blocks = append(a.Blocks, shared)
		} else {
			a.Blocks = append(a.Blocks, e.Model.Block.NewBlockActs(B, Tn))
		}
	}
	a.attn = &attention.Config{
		B: B, Hq: c.NumAttentionHeads, Hkv: c.NumKeyValueHeads, M: Tn, N: Tn, D: c.Head(), Dv: c.Head(),
		Causal: e.Causal, QPos: a.Pos, KPos: a.Pos, QValid: a.Valid, KValid: a.Valid,
	}
	sides := *a.attn
	sides.QSeg, sides.KSeg = a.Seg, a.Seg
	a.sides = &sides
	return a
}

// config returns the attention of block l: within each part in the
// isolated blocks of a ForwardSegments, over the whole sequence otherwise.
func (e *Encoder[T]) config(a *Acts[T], l int) *attention.Config {
	if a.paired && l < e.Isolated {
		return a.sides
	}
	return a.attn
}

// Forward encodes seqs (len(seqs) = a.B, each of 1..a.T ids) into a.Out.
// Every token attends to every real token of its own sequence (to those
// up to itself, Causal); padding neither attends nor is attended to.
//
// It returns an error for an empty or too long sequence, an id outside the
// vocabulary, or a position beyond max_position_embeddings.
func (e *Encoder[T]) Forward(a *Acts[T], seqs [][]int) error {
	return e.forward(a, seqs, nil)
}

// ForwardSegments is Forward for sequences made of parts, such as a query,
// a separator and a code document: segs[b][t] is the part of token t of
// sequence b. In the first Isolated blocks a token attends only to tokens
// of its own part; since RoPE makes attention depend only on position
// differences, a part's vectors there are those it would have alone.
func (e *Encoder[T]) ForwardSegments(a *Acts[T], seqs, segs [][]int) error {
	if len(segs) != len(seqs) {
		return fmt.Errorf("dense: segments for %d sequences, want %d", len(segs), len(seqs))
	}
	for b, s := range segs {
		if len(s) != len(seqs[b]) {
			return fmt.Errorf("dense: sequence %d: %d segment ids for %d tokens", b, len(s), len(seqs[b]))
		}
	}
	return e.forward(a, seqs, segs)
}

func (e *Encoder[T]) forward(a *Acts[T], seqs, segs [][]int) error {
	c := e.Model.Config
	if len(seqs) != a.B {
		return fmt.Errorf("dense: %d sequences for activations of %d", len(seqs), a.B)
	}
	if a.T > c.MaxPositionEmbeddings {
		return fmt.Errorf("dense: %d tokens per sequence, beyond max_position_embeddings = %d", a.T, c.MaxPositionEmbeddings)
	}
	for b, s := range seqs {
		if len(s) < 1 || len(s) > a.T {
			return fmt.Errorf("dense: sequence %d has %d tokens, want 1..%d", b, len(s), a.T)
		}
		for t := range a.T {
			i := b*a.T + t
			a.Pos[i] = t
			a.Seg[i] = 0
			if segs != nil && t < len(s) {
				a.Seg[i] = segs[b][t]
			}
			a.Valid[i] = t < len(s)
			a.Tokens[i] = 0
			if t < len(s) {
				if s[t] < 0 || s[t] >= c.VocabSize {
					return fmt.Errorf("dense: sequence %d, token %d is %d, outside the vocabulary [0, %d)", b, t, s[t], c.VocabSize)
				}
				a.Tokens[i] = s[t]
			}
		}
	}
	a.paired = segs != nil
	n, D := a.B*a.T, c.HiddenSize
	nn.Embedding[T]{V: c.VocabSize, D: D}.Forward(a.X[0], a.Tokens, e.Params.Embed)
	for l := range e.Params.Layers {
		if err := e.Model.Block.Forward(a.X[l+1], a.Blocks[l], a.X[l], &e.Params.Layers[l], e.config(a, l)); err != nil {
			return err
		}
	}
	e.Model.Block.Norm.Forward(a.Out, a.Rstd, a.X[len(e.Params.Layers)], e.Params.Norm, n)
	return nil
}

// Backward adds the gradients into g given dOut = ∂L/∂Out (B·T, D), layer by
// layer in exact reverse order of Forward. Padding rows of dOut must be zero
// (mean pooling gives them none); they pass nothing on. Backward adds into
// g; callers zero it.
func (e *Encoder[T]) Backward(g *model.Params[T], a *Acts[T], dOut []T) {
	if a.forwardOnly {
		panic("dense: Backward of activations made by NewForwardActs, which keep no block's intermediates")
	}
	c := e.Model.Config
	n, D := a.B*a.T, c.HiddenSize
	// the chain rule starts from dOut, which the head computed
	// forward was: Out = RMSNorm(X[L])
	clear(a.dx)
	e.Model.Block.Norm.Backward(a.dx, g.Norm, dOut, a.X[len(e.Params.Layers)], e.Params.Norm, a.Rstd, n)
	for l := len(e.Params.Layers) - 1; l >= 0; l-- {
		// forward was: X[l+1] = Block(X[l]); a.dx holds ∂L/∂X[l+1]
		clear(a.dxf)
		e.Model.Block.Backward(a.dxf, &g.Layers[l], a.dx, a.X[l], &e.Params.Layers[l], a.Blocks[l], e.config(a, l))
		a.dx, a.dxf = a.dxf, a.dx
	}
	// forward was: X[0] = Embed[tokens]; padding rows carry no gradient
	for i, ok := range a.Valid {
		if !ok {
			clear(a.dx[i*D : (i+1)*D])
		}
	}
	nn.Embedding[T]{V: c.VocabSize, D: D}.Backward(g.Embed, a.dx, a.Tokens)
}

// Padded returns the length a sequence of n tokens is encoded at when
// encoded alone: n rounded up to a multiple of 16, so that few distinct
// shapes occur and their activations can be reused.
func Padded(n int) int { return (n + 15) &^ 15 }

// ActsCache keeps forward-only activations (NewForwardActs) by batch size
// and padded length, for reuse from call to call. It is safe for
// concurrent use; the zero value is ready.
type ActsCache[T nn.Float] struct {
	pools sync.Map // [2]int{sequences, padded length} → *sync.Pool of *Acts[T]
}

// Get returns activations of e for a sequence of n tokens, padded to
// Padded(n).
func (c *ActsCache[T]) Get(e *Encoder[T], n int) *Acts[T] { return c.GetBatch(e, 1, n) }

// GetBatch returns activations of e for B sequences of up to n tokens,
// padded to Padded(n).
func (c *ActsCache[T]) GetBatch(e *Encoder[T], B, n int) *Acts[T] {
	if p, ok := c.pools.Load([2]int{B, Padded(n)}); ok {
		if a, ok := p.(*sync.Pool).Get().(*Acts[T]); ok {
			return a
		}
	}
	return e.NewForwardActs(B, Padded(n))
}

// Put returns a to the cache.
func (c *ActsCache[T]) Put(a *Acts[T]) {
	p, _ := c.pools.LoadOrStore([2]int{a.B, a.T}, &sync.Pool{})
	p.(*sync.Pool).Put(a)
}
