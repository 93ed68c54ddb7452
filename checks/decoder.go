package checks

import (
	"fmt"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

type (
	model64  = model.Model[float64]
	params64 = model.Params[float64]
)

// DecoderOps is the whole model in precision T: the training pass (Full,
// Backward) and the cached inference path, split where the negative controls
// need it: Append reserves cache slots and assigns positions, StepAt runs a
// chunk at those slots.
type DecoderOps[T nn.Float] struct {
	Full     func(m *model.Model[T], a *model.Acts[T], p *model.Params[T], b *model.Batch) (T, int, error)
	Backward func(m *model.Model[T], g, p *model.Params[T], a *model.Acts[T], b *model.Batch)
	Append   func(c *attention.KVCache[T], hq, M int, valid []bool) (int, *attention.Config, error)
	StepAt   func(m *model.Model[T], logits []T, c *attention.KVCache[T], p *model.Params[T], tokens []int, slot int, cfg *attention.Config) error
}

// DecoderImpl is the whole model: its float64 path and its float32 path
// (the fused attention kernels, GEMM, vectorised exp and sigmoid).
type DecoderImpl struct {
	DecoderOps[float64]
	F32 DecoderOps[float32]
	// Config is the model the checks build; nil: the plain model of the
	// decoder checks.
	Config *model.Config
}

// config returns the model the checks of impl build.
func (impl DecoderImpl) config() model.Config {
	if impl.Config != nil {
		return *impl.Config
	}
	return decoderConfig
}

func decoderOps[T nn.Float]() DecoderOps[T] {
	return DecoderOps[T]{
		Full: (*model.Model[T]).Forward, Backward: (*model.Model[T]).Backward,
		Append: (*attention.KVCache[T]).Append, StepAt: (*model.Model[T]).StepAt,
	}
}

// DecoderReference is package model.
var DecoderReference = DecoderImpl{DecoderOps: decoderOps[float64](), F32: decoderOps[float32]()}

// DecoderVariantsReference is package model with the attention variants
// of newer models in its config (DecoderVariantsConfig).
var DecoderVariantsReference = DecoderImpl{DecoderOps: decoderOps[float64](), F32: decoderOps[float32](), Config: &DecoderVariantsConfig}

// DecoderVariantsConfig is the model of the decoder checks with a sliding
// window of 3, attention and final logit softcapping (Gemma 2's keys) and
// attention sinks in every layer.
var DecoderVariantsConfig = func() model.Config {
	c := decoderConfig
	c.SlidingWindow, c.AttnLogitSoftcapping, c.FinalLogitSoftcapping, c.AttentionSinks = 3, 2, 5, true
	return c
}()

// decoderConfig is the model of the checks: 2 layers, GQA, a vocabulary of
// 11.
var decoderConfig = model.Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2,
	NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 11, MaxPositionEmbeddings: 64}

// newDecoder returns the model of cfg in precision T with weights large
// enough that every path carries signal; the same seed gives the same
// weights, rounded, in both precisions.
func newDecoder[T nn.Float](cfg model.Config, seed uint64) (*model.Model[T], *model.Params[T]) {
	m, err := model.New[T](cfg)
	if err != nil {
		panic(err)
	}
	p := m.NewParams()
	m.Init(p, 0.5, seed)
	return m, p
}

// testDecoder is the float64 model of the semantic checks on impl.
func testDecoder(impl DecoderImpl, seed uint64) (*model64, *params64) {
	return newDecoder[float64](impl.config(), seed)
}

func decoderName(cfg model.Config, b *model.Batch) string {
	s := shape("B", b.B, "T", b.T, "layers", cfg.NumHiddenLayers, "Dim", cfg.HiddenSize, "F", cfg.IntermediateSize,
		"Hq", cfg.NumAttentionHeads, "Hkv", cfg.NumKeyValueHeads, "V", cfg.VocabSize)
	if b.Valid != nil {
		s += ", padding"
	}
	if b.Seg != nil {
		s += ", packed documents"
	}
	return s
}

// decoderCase differentiates the loss with respect to every parameter, by
// its Hugging Face name. Backward is seeded with dloss = 1; it adds into
// the buffers, whose increase is then scaled by dout.
func decoderCase[T nn.Float](ops DecoderOps[T], cfg model.Config, b *model.Batch, seed uint64) Case[T] {
	m, p := newDecoder[T](cfg, seed)
	a := m.NewActs(b.B, b.T)
	var inputs []Input[T]
	for _, t := range m.Tensors(p) {
		inputs = append(inputs, Input[T]{t.Name, t.Data})
	}
	return Case[T]{
		Name:   decoderName(cfg, b),
		Inputs: inputs,
		Out:    1,
		Forward: func(out []T) error {
			var err error
			out[0], _, err = ops.Full(m, a, p, b)
			return err
		},
		Backward: func(grads [][]T, dout []T) error {
			if _, _, err := ops.Full(m, a, p, b); err != nil {
				return err
			}
			g := m.NewParams()
			gt := m.Tensors(g)
			for i, t := range gt {
				copy(t.Data, grads[i])
			}
			ops.Backward(m, g, p, a, b)
			for i, t := range gt {
				for j, v := range t.Data {
					grads[i][j] += dout[0] * (v - grads[i][j])
				}
			}
			return nil
		},
	}
}

// decoderFDBatch is the batch of fd-elements: left padding in one row, two
// packed documents in the other.
func decoderFDBatch() *model.Batch {
	return &model.Batch{B: 2, T: 5, Tokens: []int{0, 3, 7, 1, 9, 2, 4, 4, 10, 5},
		Valid: []bool{false, true, true, true, true, true, true, true, true, true},
		Seg:   []int{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}}
}

func decoderCases[T nn.Float](ops DecoderOps[T], cfg model.Config, big bool) []Case[T] {
	if big {
		return nil
	}
	return []Case[T]{decoderCase(ops, cfg, decoderFDBatch(), 1)}
}

// decoderSized is the model at sizes s: 2 layers of width Dim, Hq and Hkv
// heads of Dim/Hq, SwiGLU width F, a vocabulary of 11, B rows of T tokens,
// the first left-padded by one token.
func decoderSized(impl DecoderImpl, s Sizes) (model.Config, *model.Batch) {
	cfg := impl.config()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = s.Dim, s.F, s.Hq, s.Hkv
	cfg.MaxPositionEmbeddings = max(64, s.T)
	b := &model.Batch{B: s.B, T: s.T, Tokens: make([]int, s.B*s.T), Valid: make([]bool, s.B*s.T)}
	for i := range b.Tokens {
		b.Tokens[i] = (i*i*5 + 3*i) % cfg.VocabSize
		b.Valid[i] = i != 0 || s.T == 1
	}
	return cfg, b
}

// The tokens, chunkings and prompts of the semantic checks.
var (
	decoderChunkTokens = []int{1, 5, 9, 2, 2, 7, 0, 3, 10, 4, 6, 8, 1, 3} // 2 rows of 7
	decoderChunkings   = [][]int{{1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 1}, {3, 3, 1}, {5, 2}, {7}, {1, 2, 3, 1}}
	decoderPrefix      = []int{4, 8, 1, 0, 7, 3}
	decoderPrefixCut   = 2
	decoderShort       = []int{3, 9, 4}
	decoderLong        = []int{6, 1, 1, 8, 2}
	decoderDocs        = [][]int{{2, 7, 7}, {5, 1, 0, 9}}
	decoderPrompts     = [][]int{{3, 9, 4}, {6, 1, 1, 8, 2}, {5}}
	decoderGenerate    = 6
)

// chunkings renders chunk sizes as "1+1+1, 2+1".
func chunkings(cs [][]int) string {
	var out []string
	for _, c := range cs {
		var parts []string
		for _, n := range c {
			parts = append(parts, fmt.Sprint(n))
		}
		out = append(out, strings.Join(parts, "+"))
	}
	return strings.Join(out, ", ")
}

func lengths(rows [][]int) []int {
	var n []int
	for _, r := range rows {
		n = append(n, len(r))
	}
	return n
}

// Decoder returns the suite of the whole model.
func Decoder() Suite[DecoderImpl] { return DecoderOf(DecoderReference) }

// DecoderOf is the suite of the decoder whose model is ref's config: the
// float32 check compares with ref's float64 path.
func DecoderOf(ref DecoderImpl) Suite[DecoderImpl] {
	spec := gradSpec[DecoderImpl]{op: "the whole model (every parameter)", ref: ref,
		cases:   func(i DecoderImpl, big bool) []Case[float64] { return decoderCases(i.DecoderOps, i.config(), big) },
		cases32: func(i DecoderImpl, big bool) []Case[float32] { return decoderCases(i.F32, i.config(), big) },
		// Two layers of O(1) weights have larger high derivatives than one
		// op: a smaller step keeps the 4-point truncation error (∝ ε⁴) below
		// 1e-11 while rounding (∝ u/ε) stays near 1e-12.
		eps: 2e-4}
	gen := spec.checks()
	gen[0].Long.Proves = "the whole backward, layer by layer in reverse order, is the derivative of the whole forward"
	gen[0].Long.Cannot = "that the forward is the right model: shifted labels, positions and the cache are the semantic checks' business"
	return Suite[DecoderImpl]{
		Guide: OpGuide{
			What: "The whole model: embedding, L blocks, final RMSNorm, LM head, cross-entropy on next-token targets; and its KV-cache decoding.",
			Forward: []Step{
				{Eq: "x₀ = Embed(tokens);  x_{l+1} = Block_l(x_l);  logits = RMSNorm(x_L) Headᵀ", Shape: "tokens [B,T] → logits [B·T,V]", Why: "the stack"},
				{Eq: "loss = mean over counted t of −log softmax(logits_t)[token_{t+1}]", Shape: "scalar", Why: "position t predicts the next token, within its document"},
			},
			Backward: []Step{
				{Eq: "dloss = 1;  dlogits = (p − onehot(target))/count", Shape: "[B·T,V]",
					Why: "the chain rule is seeded with 1; the mean's 1/count enters here, and ignored targets get 0"},
				{Eq: "dHead = dlogitsᵀ x̂;  dx̂ = dlogits Head", Shape: "Head [V,Dim], x̂ = RMSNorm(x_L) [B·T,Dim]",
					Why: "the LM head is a linear layer"},
				{Eq: "dx_L = RMSNorm backward(dx̂)", Shape: "[B·T,Dim], and the final norm's weight [Dim]", Why: "the final norm"},
				{Eq: "dx_l = Block_l backward(dx_{l+1}),  l = L−1 … 0", Shape: "[B·T,Dim], and each block's weights",
					Why: "blocks in exact reverse order; each adds its parameters' gradients"},
				{Eq: "dEmbed[tokens[t]] += dx₀[t]", Shape: "[V,Dim]",
					Why: "a scatter-add; with a tied head, Head is Embed and both gradients add into the same buffer"},
			},
			Notes: []string{"Decoding with the KV cache must give the full pass's logits: positions continue after the cache, cached keys are rotated once, and a chunk's mask is offset by the cache length."},
		},
		Checks: append(gen,
			Check[DecoderImpl]{Name: "full-equals-decoding", Kind: Semantic, Run: decoderChunks,
				Claim: fmt.Sprintf("the full pass, token-by-token decoding and chunked decoding (%s) give the same logits (≤ %g)", chunkings(decoderChunkings), identical),
				Limit: "rows of equal length; padding is the next check's",
				Long: Long{
					Tests:  fmt.Sprintf("the full pass, token-by-token decoding and chunked decoding (%s) give the same logits (≤ %g)", chunkings(decoderChunkings), identical),
					Shapes: fmt.Sprintf("2 rows of %d tokens, %s", len(decoderChunkTokens)/2, decoderName(decoderConfig, &model.Batch{B: 2, T: len(decoderChunkTokens) / 2})),
					Proves: "the KV cache: positions continue after the cache, cached keys are rotated once, chunk masks are offset",
					Cannot: "rows of different lengths (the padding check)",
				}},
			Check[DecoderImpl]{Name: "prefix-unchanged", Kind: Semantic, Run: decoderPrefixCheck,
				Claim: "changing tokens after position t leaves the logits at positions ≤ t bit-identical",
				Limit: "the full pass; decoding is compared with it above",
				Long: Long{
					Tests:  fmt.Sprintf("changing tokens %d..%d leaves the logits at positions 0..%d bit-identical", decoderPrefixCut+1, len(decoderPrefix)-1, decoderPrefixCut),
					Shapes: fmt.Sprintf("logits [%d,%d]", len(decoderPrefix), decoderConfig.VocabSize),
					Proves: "the whole model is causal",
					Cannot: "decoding (compared with the full pass above)",
				}},
			Check[DecoderImpl]{Name: "padding-invariance", Kind: Semantic, Run: decoderPadding,
				Claim: "left, right or no padding give the same logits for real tokens, in the full pass and in cached decoding of rows of different lengths",
				Limit: "a uniform shift of positions is invisible to RoPE; only the right-padded prefill puts gaps between a row's tokens",
				Long: Long{
					Tests:  "left, right or no padding give the same logits for real tokens, in the full pass and in cached decoding of rows of different lengths",
					Shapes: fmt.Sprintf("rows of %d and %d tokens", len(decoderShort), len(decoderLong)),
					Proves: "padding is masked and positions count real tokens, also after a right-padded prefill",
					Cannot: "a uniform shift of positions (invisible to RoPE)",
				}},
			Check[DecoderImpl]{Name: "packing-equals-separate", Kind: Semantic, Run: decoderPacking,
				Claim: "two documents packed in one row with segment ids give the logits and loss terms of separate runs",
				Limit: "segments as given by the caller",
				Long: Long{
					Tests:  "two documents packed in one row with segment ids give the logits and loss terms of separate runs",
					Shapes: fmt.Sprintf("documents of %s tokens", list(lengths(decoderDocs))),
					Proves: "segments isolate documents through the whole model, loss included",
					Cannot: "segments as the caller assigned them",
				}},
			Check[DecoderImpl]{Name: "batched-generation", Kind: Semantic, Run: decoderGeneration,
				Claim: fmt.Sprintf("greedy generation of %d prompts of different lengths, left-padded into one batch, equals generating each alone", len(decoderPrompts)),
				Limit: "greedy decoding; sampling draws are tested in package model",
				Long: Long{
					Tests:  fmt.Sprintf("greedy generation of %d prompts of different lengths, left-padded into one batch, equals generating each alone", len(decoderPrompts)),
					Shapes: fmt.Sprintf("prompts of %s tokens, %d new tokens each", list(lengths(decoderPrompts)), decoderGenerate),
					Proves: "batching, padding and the cache together do not change what is generated",
					Cannot: "sampling (tested in package model)",
				}},
			Check[DecoderImpl]{Name: "label-shift", Kind: Semantic, Run: decoderLabels,
				Claim: "the loss is the mean of −log softmax(logits[t])[token t+1] within each document: position t predicts the next token",
				Limit: "checks the targets, not the logits",
				Long: Long{
					Tests:  "the loss is the mean of −log softmax(logits[t])[token t+1] within each document",
					Shapes: fmt.Sprintf("documents of %s tokens packed in one row: a scalar loss over %d targets", list(lengths(decoderDocs)), len(decoderDocs[0])+len(decoderDocs[1])-2),
					Proves: "position t predicts the next token, not itself",
					Cannot: "the logits",
				}},
		),
		At: func(impl DecoderImpl, s Sizes, seed uint64) Case[float64] {
			cfg, b := decoderSized(impl, s)
			return decoderCase(impl.DecoderOps, cfg, b, seed)
		},
		At32: func(impl DecoderImpl, s Sizes, seed uint64) Case[float32] {
			cfg, b := decoderSized(impl, s)
			return decoderCase(impl.F32, cfg, b, seed)
		},
		Reads: "2 layers of width Dim, Hq and Hkv heads of Dim/Hq, SwiGLU width F, a vocabulary of 11; B rows of T tokens, the first left-padded by one",
	}
}

// full runs the training pass and returns the logits.
func full(impl DecoderImpl, m *model64, p *params64, b *model.Batch) ([]float64, float64, error) {
	a := m.NewActs(b.B, b.T)
	var loss float64
	err := protect(func() error {
		var err error
		loss, _, err = impl.Full(m, a, p, b)
		return err
	})
	return a.Logits, loss, err
}

// decode runs tokens (B, T) through the cache in chunks of the given sizes
// and returns the logits (B·T, V). valid is (B, T) or nil.
func decode(impl DecoderImpl, m *model64, p *params64, B, T int, tokens []int, valid []bool, sizes []int) ([]float64, error) {
	V := m.Config.VocabSize
	cache := m.NewCache(B, T+2)
	out := make([]float64, B*T*V)
	start := 0
	for _, M := range sizes {
		var chunk []int
		var cv []bool
		for b := range B {
			chunk = append(chunk, tokens[b*T+start:b*T+start+M]...)
			if valid != nil {
				cv = append(cv, valid[b*T+start:b*T+start+M]...)
			}
		}
		logits := make([]float64, B*M*V)
		err := protect(func() error {
			slot, cfg, err := impl.Append(cache, m.Config.NumAttentionHeads, M, cv)
			if err != nil {
				return err
			}
			return impl.StepAt(m, logits, cache, p, chunk, slot, cfg)
		})
		if err != nil {
			return nil, err
		}
		for b := range B {
			copy(out[(b*T+start)*V:(b*T+start+M)*V], logits[b*M*V:(b+1)*M*V])
		}
		start += M
	}
	return out, nil
}

func decoderChunks(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 2)
	const B, T = 2, 7
	tokens := decoderChunkTokens
	want, _, err := full(impl, m, p, &model.Batch{B: B, T: T, Tokens: tokens})
	if err != nil {
		return errored(err, "full pass: %v")
	}
	var worst float64
	for _, sizes := range decoderChunkings {
		got, err := decode(impl, m, p, B, T, tokens, nil, sizes)
		if err != nil {
			return errored(err, fmt.Sprintf("chunks %v: ", sizes)+"%v")
		}
		d, msg := compare(identical, pair{"logits", got, want})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("chunks %v: %s", sizes, msg), d)
		}
	}
	return measured(pass("%d chunkings of %d×%d tokens match the full pass, max error %.1e", len(decoderChunkings), B, T, worst), worst)
}

func decoderPrefixCheck(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 3)
	T, cut := len(decoderPrefix), decoderPrefixCut
	tokens := decoderPrefix
	want, _, err := full(impl, m, p, &model.Batch{B: 1, T: T, Tokens: tokens})
	if err != nil {
		return errored(err, "%v")
	}
	alt := append([]int(nil), tokens[:cut+1]...)
	alt = append(alt, 9, 9, 2)
	got, _, err := full(impl, m, p, &model.Batch{B: 1, T: T, Tokens: alt})
	if err != nil {
		return errored(err, "%v")
	}
	V := m.Config.VocabSize
	for i := range (cut + 1) * V {
		if got[i] != want[i] {
			return fail("logit %d of position %d changed when only positions %d.. changed", i%V, i/V, cut+1)
		}
	}
	return pass("logits at positions 0..%d bit-identical after tokens %d..%d changed", cut, cut+1, T-1)
}

func decoderPadding(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 4)
	V := m.Config.VocabSize
	short, long := decoderShort, decoderLong
	var worst float64
	check := func(name string, got, want []float64) string {
		d, msg := compare(identical, pair{name, got, want})
		worst = max(worst, d)
		return msg
	}
	want := map[int][]float64{}
	for _, seq := range [][]int{short, long} {
		lg, _, err := full(impl, m, p, &model.Batch{B: 1, T: len(seq), Tokens: seq})
		if err != nil {
			return errored(err, "unpadded: %v")
		}
		want[len(seq)] = lg
	}
	// One batch, the short row padded to the long one's length, left and right.
	const T = 5
	for _, left := range []bool{true, false} {
		row := []int{0, 0, 3, 9, 4}
		valid := []bool{false, false, true, true, true, true, true, true, true, true}
		if !left {
			row = []int{3, 9, 4, 0, 0}
			valid = []bool{true, true, true, false, false, true, true, true, true, true}
		}
		tokens := append(append([]int(nil), row...), long...)
		side := map[bool]string{true: "left", false: "right"}[left]
		lg, _, err := full(impl, m, p, &model.Batch{B: 2, T: T, Tokens: tokens, Valid: valid})
		if err != nil {
			return errored(err, side+" padding, full pass: %v")
		}
		off := 0
		if left {
			off = 2
		}
		if msg := check("logits", lg[off*V:(off+3)*V], want[3]); msg != "" {
			return fail("%s padding, full pass, short row: %s", side, msg)
		}
		if msg := check("logits", lg[T*V:], want[5]); msg != "" {
			return fail("%s padding, full pass, long row: %s", side, msg)
		}
		if !left {
			continue
		}
		// Cached decoding of the left-padded batch, one token at a time: the
		// rows hold different numbers of real tokens in the same slots.
		dec, err := decode(impl, m, p, 2, T, tokens, valid, []int{1, 1, 1, 1, 1})
		if err != nil {
			return errored(err, "left padding, decoding: %v")
		}
		if msg := check("logits", dec[off*V:(off+3)*V], want[3]); msg != "" {
			return fail("left padding, decoding, short row: %s", msg)
		}
		if msg := check("logits", dec[T*V:], want[5]); msg != "" {
			return fail("left padding, decoding, long row: %s", msg)
		}
	}
	// A right-padded prefill, then decoding: the short row's next tokens
	// come after two empty slots, and must take positions 3 and 4 all the
	// same.
	shortFull, longFull := []int{3, 9, 4, 7, 2}, []int{6, 1, 1, 8, 2, 5, 0}
	wantShort, _, err := full(impl, m, p, &model.Batch{B: 1, T: 5, Tokens: shortFull})
	if err != nil {
		return errored(err, "%v")
	}
	wantLong, _, err := full(impl, m, p, &model.Batch{B: 1, T: 7, Tokens: longFull})
	if err != nil {
		return errored(err, "%v")
	}
	cache := m.NewCache(2, 8)
	gotShort, gotLong := make([]float64, 0, 5*V), make([]float64, 0, 7*V)
	for _, step := range []struct {
		tokens []int
		valid  []bool
	}{
		{[]int{3, 9, 4, 0, 0, 6, 1, 1, 8, 2}, []bool{true, true, true, false, false, true, true, true, true, true}},
		{[]int{7, 5}, nil},
		{[]int{2, 0}, nil},
	} {
		M := len(step.tokens) / 2
		logits := make([]float64, 2*M*V)
		if err := protect(func() error {
			slot, cfg, err := impl.Append(cache, m.Config.NumAttentionHeads, M, step.valid)
			if err != nil {
				return err
			}
			return impl.StepAt(m, logits, cache, p, step.tokens, slot, cfg)
		}); err != nil {
			return errored(err, "right-padded prefill, then decoding: %v")
		}
		for t := range M {
			if step.valid == nil || step.valid[t] {
				gotShort = append(gotShort, logits[t*V:(t+1)*V]...)
			}
		}
		gotLong = append(gotLong, logits[M*V:]...)
	}
	if msg := check("logits", gotShort, wantShort); msg != "" {
		return fail("right-padded prefill, then decoding, short row: %s", msg)
	}
	if msg := check("logits", gotLong, wantLong); msg != "" {
		return fail("right-padded prefill, then decoding, long row: %s", msg)
	}
	return measured(pass("left and right padding, full pass and decoding (also after a right-padded prefill): real tokens' logits unchanged, max error %.1e", worst), worst)
}

func decoderPacking(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 5)
	V := m.Config.VocabSize
	docs := decoderDocs
	var packed, seg []int
	for d, doc := range docs {
		for _, tok := range doc {
			packed, seg = append(packed, tok), append(seg, d)
		}
	}
	got, _, err := full(impl, m, p, &model.Batch{B: 1, T: len(packed), Tokens: packed, Seg: seg})
	if err != nil {
		return errored(err, "packed: %v")
	}
	var worst float64
	start := 0
	for d, doc := range docs {
		want, _, err := full(impl, m, p, &model.Batch{B: 1, T: len(doc), Tokens: doc})
		if err != nil {
			return errored(err, "alone: %v")
		}
		e, msg := compare(identical, pair{"logits", got[start*V : (start+len(doc))*V], want})
		worst = max(worst, e)
		if msg != "" {
			return fail("document %d: %s", d, msg)
		}
		start += len(doc)
	}
	return measured(pass("documents of %s tokens packed equal separate runs, max error %.1e", list(lengths(docs)), worst), worst)
}

func decoderLabels(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 6)
	V := m.Config.VocabSize
	b := &model.Batch{B: 1}
	for d, doc := range decoderDocs { // the documents packed in one row
		for _, tok := range doc {
			b.Tokens, b.Seg = append(b.Tokens, tok), append(b.Seg, d)
		}
	}
	b.T = len(b.Tokens)
	logits, loss, err := full(impl, m, p, b)
	if err != nil {
		return errored(err, "%v")
	}
	// The definition, computed here: position t predicts token t+1 of its
	// document; the last token of each document predicts nothing.
	var sum float64
	n := 0
	probs := make([]float64, V)
	for t := range b.T - 1 {
		if b.Seg[t] != b.Seg[t+1] {
			continue
		}
		l, _ := nn.CrossEntropy[float64]{V: V, IgnoreIndex: nn.DefaultIgnoreIndex}.Forward(probs, logits[t*V:(t+1)*V], []int{b.Tokens[t+1]}, 1)
		sum += l
		n++
	}
	want := sum / float64(n)
	d, _ := diff([]float64{loss}, []float64{want})
	if d > identical {
		return measured(fail("loss %.9g, but the mean next-token cross-entropy of these logits is %.9g: the labels are not the next tokens", loss, want), d)
	}
	return measured(pass("loss %.6f equals the mean over %d next-token targets, error %.1e", loss, n, d), d)
}

// greedy generates n tokens after each prompt through impl's cache path:
// prompts left-padded to one length, one prefill chunk, then one token per
// step.
func greedy(impl DecoderImpl, m *model64, p *params64, prompts [][]int, n int) ([][]int, error) {
	B, L, V := len(prompts), 0, m.Config.VocabSize
	for _, pr := range prompts {
		L = max(L, len(pr))
	}
	tokens, valid := make([]int, B*L), make([]bool, B*L)
	for r, pr := range prompts {
		copy(tokens[r*L+L-len(pr):], pr)
		for t := L - len(pr); t < L; t++ {
			valid[r*L+t] = true
		}
	}
	cache := m.NewCache(B, L+n)
	out := make([][]int, B)
	M := L
	for range n {
		logits := make([]float64, B*M*V)
		err := protect(func() error {
			slot, cfg, err := impl.Append(cache, m.Config.NumAttentionHeads, M, valid)
			if err != nil {
				return err
			}
			return impl.StepAt(m, logits, cache, p, tokens, slot, cfg)
		})
		if err != nil {
			return nil, err
		}
		next := make([]int, B)
		for r := range B {
			row := logits[(r*M+M-1)*V : (r*M+M)*V]
			for i, v := range row {
				if v > row[next[r]] {
					next[r] = i
				}
			}
			out[r] = append(out[r], next[r])
		}
		tokens, valid, M = next, nil, 1
	}
	return out, nil
}

func decoderGeneration(impl DecoderImpl) Result {
	m, p := testDecoder(impl, 7)
	prompts := decoderPrompts
	batch, err := greedy(impl, m, p, prompts, decoderGenerate)
	if err != nil {
		return errored(err, "batched: %v")
	}
	for r, pr := range prompts {
		alone, err := greedy(impl, m, p, [][]int{pr}, decoderGenerate)
		if err != nil {
			return errored(err, "alone: %v")
		}
		if fmt.Sprint(alone[0]) != fmt.Sprint(batch[r]) {
			return fail("prompt %d: batched %v, alone %v", r, batch[r], alone[0])
		}
	}
	return pass("%d prompts of %s tokens: %d greedy tokens each, batched = alone", len(prompts), list(lengths(prompts)), decoderGenerate)
}
