package checks

import (
	"fmt"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

type (
	model64  = model.Model[float64]
	params64 = model.Params[float64]
	mActs64  = model.Acts[float64]
	cache64  = attention.KVCache[float64]
)

// DecoderImpl is the whole model in float64: the training pass (Full,
// Backward) and the cached inference path, split where the negative controls
// need it: Append reserves cache slots and assigns positions, StepAt runs a
// chunk at those slots.
type DecoderImpl struct {
	Full     func(m *model64, a *mActs64, p *params64, b *model.Batch) (float64, int, error)
	Backward func(m *model64, g, p *params64, a *mActs64, b *model.Batch)
	Append   func(c *cache64, hq, M int, valid []bool) (int, *attention.Config, error)
	StepAt   func(m *model64, logits []float64, c *cache64, p *params64, tokens []int, slot int, cfg *attention.Config) error
}

// DecoderReference is package model.
var DecoderReference = DecoderImpl{
	Full: (*model64).Forward, Backward: (*model64).Backward,
	Append: (*cache64).Append, StepAt: (*model64).StepAt,
}

// testDecoder is a 2-layer GQA model with weights large enough that every
// path carries signal.
func testDecoder(seed uint64) (*model64, *params64) {
	m, err := model.New[float64](model.Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 11, MaxPositionEmbeddings: 64})
	if err != nil {
		panic(err)
	}
	p := m.NewParams()
	m.Init(p, 0.5, seed)
	return m, p
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

// Decoder returns the checks of the whole model.
func Decoder() []Check[DecoderImpl] {
	return []Check[DecoderImpl]{
		{Name: "fd-elements", Kind: Gradient, Run: decoderFD,
			Claim: "every parameter gradient of a 2-layer GQA model (left padding, two packed documents) equals the 4-point difference of the loss",
			Limit: "agreement with the forward as written"},
		{Name: "full-equals-decoding", Kind: Semantic, Run: decoderChunks,
			Claim: "the full pass, token-by-token decoding and chunked decoding (1, 2+2+2+1, 3+3+1, 5+2, 7, 1+2+3+1) give the same logits (≤ 1e-12)",
			Limit: "rows of equal length; padding is the next check's"},
		{Name: "prefix-unchanged", Kind: Semantic, Run: decoderPrefix,
			Claim: "changing tokens after position t leaves the logits at positions ≤ t bit-identical",
			Limit: "the full pass; decoding is compared with it above"},
		{Name: "padding-invariance", Kind: Semantic, Run: decoderPadding,
			Claim: "left, right or no padding give the same logits for real tokens, in the full pass and in cached decoding of rows of different lengths",
			Limit: "a uniform shift of positions is invisible to RoPE; only the right-padded prefill puts gaps between a row's tokens"},
		{Name: "packing-equals-separate", Kind: Semantic, Run: decoderPacking,
			Claim: "two documents packed in one row with segment ids give the logits and loss terms of separate runs",
			Limit: "segments as given by the caller"},
		{Name: "batched-generation", Kind: Semantic, Run: decoderGeneration,
			Claim: "greedy generation of 3 prompts of different lengths, left-padded into one batch, equals generating each alone",
			Limit: "greedy decoding; sampling draws are tested in package model"},
		{Name: "label-shift", Kind: Semantic, Run: decoderLabels,
			Claim: "the loss is the mean of −log softmax(logits[t])[token t+1] within each document: position t predicts the next token",
			Limit: "checks the targets, not the logits"},
	}
}

func decoderFD(impl DecoderImpl) Result {
	m, p := testDecoder(1)
	b := &model.Batch{B: 2, T: 5, Tokens: []int{0, 3, 7, 1, 9, 2, 4, 4, 10, 5},
		Valid: []bool{false, true, true, true, true, true, true, true, true, true},
		Seg:   []int{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}}
	a := m.NewActs(b.B, b.T)
	loss := func() float64 {
		l, _, err := impl.Full(m, a, p, b)
		if err != nil {
			panic(err)
		}
		return l
	}
	g := m.NewParams()
	var r gradcheck.Report
	if err := protect(func() error {
		loss()
		impl.Backward(m, g, p, a, b)
		var ps []gradcheck.Param
		gt := m.Tensors(g)
		for i, t := range m.Tensors(p) {
			ps = append(ps, gradcheck.Param{Name: t.Name, X: t.Data, Grad: gt[i].Data})
		}
		// Two layers of O(1) weights have larger high derivatives than one
		// op: a smaller step keeps the 4-point truncation error (∝ ε⁴) below
		// 1e-11 while rounding (∝ u/ε) stays near 1e-12.
		r = gradcheck.Check(loss, ps, gradcheck.Options{Precise: true, Eps: 2e-4, Abs: fdAbs, Rel: fdRel, Fixed: true})
		return nil
	}); err != nil {
		return errored(err, "%v")
	}
	res := pass("%d elements, max rel %.1e, max abs %.1e, norm rel %.1e, ε = %g (4-point)", r.Checked, r.MaxRel, r.MaxAbs, r.NormRel, r.Eps)
	if err := r.Err(); err != nil {
		res = fail("%v", err)
	}
	res.Error = r.MaxRel
	return res
}

func decoderChunks(impl DecoderImpl) Result {
	m, p := testDecoder(2)
	const B, T = 2, 7
	tokens := []int{1, 5, 9, 2, 2, 7, 0, 3, 10, 4, 6, 8, 1, 3}
	want, _, err := full(impl, m, p, &model.Batch{B: B, T: T, Tokens: tokens})
	if err != nil {
		return errored(err, "full pass: %v")
	}
	var worst float64
	for _, sizes := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 1}, {3, 3, 1}, {5, 2}, {7}, {1, 2, 3, 1}} {
		got, err := decode(impl, m, p, B, T, tokens, nil, sizes)
		if err != nil {
			return errored(err, fmt.Sprintf("chunks %v: ", sizes)+"%v")
		}
		d, msg := compare(identical, pair{"logits", got, want})
		worst = max(worst, d)
		if msg != "" {
			res := fail("chunks %v: %s", sizes, msg)
			res.Error = d
			return res
		}
	}
	res := pass("6 chunkings of 2×7 tokens match the full pass, max error %.1e", worst)
	res.Error = worst
	return res
}

func decoderPrefix(impl DecoderImpl) Result {
	m, p := testDecoder(3)
	const T, cut = 6, 2
	tokens := []int{4, 8, 1, 0, 7, 3}
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
	m, p := testDecoder(4)
	V := m.Config.VocabSize
	short, long := []int{3, 9, 4}, []int{6, 1, 1, 8, 2}
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
	res := pass("left and right padding, full pass and decoding (also after a right-padded prefill): real tokens' logits unchanged, max error %.1e", worst)
	res.Error = worst
	return res
}

func decoderPacking(impl DecoderImpl) Result {
	m, p := testDecoder(5)
	V := m.Config.VocabSize
	docs := [][]int{{2, 7, 7}, {5, 1, 0, 9}}
	packed := append(append([]int(nil), docs[0]...), docs[1]...)
	got, _, err := full(impl, m, p, &model.Batch{B: 1, T: 7, Tokens: packed, Seg: []int{0, 0, 0, 1, 1, 1, 1}})
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
	res := pass("documents of 3 and 4 tokens packed equal separate runs, max error %.1e", worst)
	res.Error = worst
	return res
}

func decoderLabels(impl DecoderImpl) Result {
	m, p := testDecoder(6)
	V := m.Config.VocabSize
	b := &model.Batch{B: 1, T: 7, Tokens: []int{2, 7, 7, 5, 1, 0, 9}, Seg: []int{0, 0, 0, 1, 1, 1, 1}}
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
	res := pass("loss %.6f equals the mean over %d next-token targets, error %.1e", loss, n, d)
	if d > identical {
		res = fail("loss %.9g, but the mean next-token cross-entropy of these logits is %.9g: the labels are not the next tokens", loss, want)
	}
	res.Error = d
	return res
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
	m, p := testDecoder(7)
	prompts := [][]int{{3, 9, 4}, {6, 1, 1, 8, 2}, {5}}
	batch, err := greedy(impl, m, p, prompts, 6)
	if err != nil {
		return errored(err, "batched: %v")
	}
	for r, pr := range prompts {
		alone, err := greedy(impl, m, p, [][]int{pr}, 6)
		if err != nil {
			return errored(err, "alone: %v")
		}
		if fmt.Sprint(alone[0]) != fmt.Sprint(batch[r]) {
			return fail("prompt %d: batched %v, alone %v", r, batch[r], alone[0])
		}
	}
	return pass("3 prompts of 3, 5 and 1 tokens: 6 greedy tokens each, batched = alone")
}
