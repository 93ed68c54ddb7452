package conform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Card values.
const (
	AlignPosition    = "position"     // attnlab's rule: logical positions decide (DESIGN §2)
	AlignBottomRight = "bottom-right" // the last query aligned with the last key by index
	AlignTopLeft     = "top-left"     // the first query aligned with the first key: tril(ones(M, N))
	AlignOther       = "other"        // measured, and matching no rule

	// NA is a card field that could not be measured: the implementation
	// cannot be asked (no cache, no causal flag, no float32); the reason
	// is in Card.NotMeasured.
	NA = "n/a"

	EmptyError   = "error"
	EmptyZero    = "zero"
	EmptyNaN     = "nan"
	EmptyUniform = "uniform"
	EmptyOther   = "other"

	GQAContiguous  = "contiguous"  // query head h reads K/V head h / (Hq/Hkv), as repeat_kv
	GQAInterleaved = "interleaved" // query head h reads K/V head h mod Hkv
	GQAUnsupported = "unsupported"

	ScaleInvSqrtD = "1/sqrt(D)"
	ScaleInvD     = "1/D" // scaled twice: (q/√D)·(k/√D)
	ScaleOne      = "1"

	WindowW     = "W"   // a window of W sees W keys, the current one included (DESIGN §2, HF, llama.cpp)
	WindowWPlus = "W+1" // W keys before the current one, and it

	OK = "ok"

	// The variants of docs/design.md §3.1: declared or not, then how each
	// behaves.
	Supported   = "supported"
	NotDeclared = "not declared"

	SinkGradReturned = "returned" // dsinks answered, and equal to the reference's
	SinkGradMissing  = "missing"  // no dsinks in the answer
	SinkGradWrong    = "wrong"    // dsinks answered, and not the reference's

	SoftcapBeforeMask = "before-mask" // a masked key stays masked under softcap
	SoftcapAfterMask  = "after-mask"  // a masked key is read: −∞ capped to −c

	AlibiPositions = "positions" // the bias from logical positions, qpos − kpos
	AlibiSlots     = "slots"     // from array slots, i − j: wrong after a cache
)

// Places of an empty row in Card.EmptyRowAt.
var EmptyRowPlaces = []string{"first", "middle", "last", "leading"}

// Card is the semantics of an implementation, as measured.
type Card struct {
	CausalMLtN string `json:"causal_m_lt_n"` // a chunk of M queries after a cache, M < N
	CausalMGtN string `json:"causal_m_gt_n"` // more queries than keys
	// CausalM1 is one query after a cache (decode, M = 1): the position
	// rule lets it see every key, as bottom-right does; top-left lets it
	// see the first. Some implementations switch the mask off at M = 1
	// only: right for decode, wrong for a longer chunk.
	CausalM1 string `json:"causal_m_1"`
	EmptyRow string `json:"empty_row"` // what a valid query with no visible key gets
	// EmptyRowAt is what such a row gets as the first, a middle or the
	// last row, and in a leading block of rows: kernels that handle one
	// place and not another exist.
	EmptyRowAt map[string]string `json:"empty_row_at,omitempty"`
	// EmptyRowBackwardConsistent says whether the backward on such a row is
	// the derivative of the forward there (finite differences of the
	// implementation's own forward); null without gradients or when the
	// row is an error.
	EmptyRowBackwardConsistent *bool  `json:"empty_row_backward_consistent"`
	PaddingRows                string `json:"padding_rows"` // what a padding query gets: zero, nan, other, unsupported
	GQA                        string `json:"gqa"`
	Scale                      string `json:"scale"` // the default scale
	// WindowKeys is how many keys a sliding window of W lets a query see.
	WindowKeys string `json:"window_keys"`
	// ExtremeLogits is "ok" when scores shifted by −1e4 and −1e5 (every
	// visible score of a row very negative), at 65, 129 and 257 keys (just
	// past tile sizes), give the reference's output and gradients; else
	// what went wrong.
	ExtremeLogits string `json:"extreme_logits"`
	// CacheLayouts: a static cache with empty trailing slots, a left-padded
	// cache, and keys in another order than their positions (a paged
	// cache's view), each "ok" or what differs from the reference.
	CacheLayouts map[string]string `json:"cache_layouts,omitempty"`
	// Float32ErrorRatio is the implementation's float32 error against
	// attnlab's float64 reference, over that of a plain float32
	// implementation (attnlab's reference: scores, softmax and product
	// materialised) on the same inputs: root mean square error of the
	// output, B=1, H=4, M=N=128, D=64, N(0,1) inputs; null when not
	// measured.
	Float32ErrorRatio *float64 `json:"float32_error_ratio"`
	// Sinks, Softcap and Alibi are "supported" when the implementation
	// declares the variant (docs/design.md §3.1), else "not declared".
	Sinks   string `json:"sinks"`
	Softcap string `json:"softcap"`
	Alibi   string `json:"alibi"`
	// SinksEmptyRow is what a valid row with no visible key gets with
	// sinks: zero (defined: the sink takes all the weight), error, other,
	// n/a.
	SinksEmptyRow string `json:"sinks_empty_row"`
	// SinksGrad is whether dσ comes back and equals the reference's:
	// returned, missing, wrong, n/a.
	SinksGrad string `json:"sinks_grad"`
	// SoftcapOrder is whether softcap is applied before the mask (a masked
	// key stays masked) or after it (−∞ capped to −c lets it in):
	// before-mask, after-mask, n/a.
	SoftcapOrder string `json:"softcap_order"`
	// AlibiDistance is what ALiBi's distance is measured in, probed on a
	// chunk after a cache with q = 0: positions, slots, other, n/a.
	AlibiDistance string `json:"alibi_distance"`
	// NotMeasured gives, for each field that says n/a (or is null), why.
	NotMeasured map[string]string `json:"not_measured,omitempty"`
	// Refused lists the fields among those that say n/a because the
	// implementation refused a probe made only of what it declares (a
	// causal chunk after a cache, with kv_cache and the causal flag
	// declared): the verdict cannot rest on them, so it is not established.
	Refused []string `json:"refused,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

func (card *Card) notef(format string, args ...any) {
	card.Notes = append(card.Notes, fmt.Sprintf(format, args...))
}

// na records why field could not be measured and returns NA.
func (card *Card) na(field, format string, args ...any) string {
	if card.NotMeasured == nil {
		card.NotMeasured = map[string]string{}
	}
	card.NotMeasured[field] = fmt.Sprintf(format, args...)
	return NA
}

// refused records that the implementation refused field's probe, made of
// what it declares, and returns NA.
func (card *Card) refused(field, format string, args ...any) string {
	card.Refused = append(card.Refused, field)
	return card.na(field, format, args...)
}

// prober asks an implementation for plain forward passes.
type prober struct {
	impl  Implementation
	caps  Capabilities
	card  *Card
	dtype string // the most precise dtype it has
}

func newProber(impl Implementation, card *Card) *prober {
	p := &prober{impl: impl, caps: impl.Capabilities(), card: card, dtype: "float64"}
	if !p.caps.HasDType("float64") {
		p.dtype = "float32"
	}
	return p
}

// tol is what counts as a change in a probe.
func (p *prober) tol() float64 {
	if p.dtype == "float32" {
		return 1e-5
	}
	return 1e-10
}

// agreeTol is the largest error, relative to the largest value, of an
// answer that agrees with the reference.
func (p *prober) agreeTol() float64 {
	if p.dtype == "float32" {
		return 1e-4
	}
	return 1e-9
}

// capabilityRefused is the failure of an adapter that refuses what it
// declares.
func (p *prober) capabilityRefused(what, answer string) error {
	return &Error{Adapter: p.caps.Name, Request: what, Err: fmt.Errorf("it declares %s, then refused it: %s", what, answer)}
}

// randomRequest returns a request of the given sizes with N(0,1) inputs.
func randomRequest(seed uint64, B, Hq, Hkv, M, N, D int) *Request {
	r := rand.New(rand.NewPCG(seed, 0xca4d))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	return &Request{B: B, Hq: Hq, Hkv: Hkv, M: M, N: N, D: D, Dv: D,
		Q: fill(B * Hq * M * D), K: fill(B * Hkv * N * D), V: fill(B * Hkv * N * D), DO: fill(B * Hq * M * D)}
}

// forward runs r without gradients; the error is the adapter's failure,
// a refusal is resp.Err.
func (p *prober) forward(r *Request) (*Response, error) {
	q := *r
	q.DO, q.DType = nil, p.dtype
	return p.impl.Attention(&q)
}

// explicit sets the scale of r to 1/√D when the implementation takes a
// scale, so that a probe does not depend on its default.
func (p *prober) explicit(r *Request) *Request {
	if p.caps.Scale {
		r.Scale = 1 / math.Sqrt(float64(r.D))
	}
	return r
}

// refScale is the scale the implementation applies to r: r's own, or its
// measured default; 0 when that default is not one conform knows.
func (p *prober) refScale(r *Request) float64 {
	if r.Scale != 0 {
		return r.Scale
	}
	return defaultScale(p.card, r.D)
}

// reference is attnlab's float64 answer to r at the scale the
// implementation applies, with gradients when withGrads.
func (p *prober) reference(r *Request, withGrads bool) (*Response, error) {
	q := *r
	q.DType, q.Scale = "float64", p.refScale(r)
	if !withGrads {
		q.DO = nil
	}
	return Reference().Attention(&q)
}

// visibility probes which keys each query row reads (B = 1, one head): it
// changes value row j and watches which output rows move.
func (p *prober) visibility(r *Request) ([][]bool, string, error) {
	base, err := p.forward(r)
	if err != nil || base.Err != "" {
		msg := ""
		if base != nil {
			msg = base.Err
		}
		return nil, msg, err
	}
	vis := make([][]bool, r.M)
	for i := range vis {
		vis[i] = make([]bool, r.N)
	}
	for j := range r.N {
		q := *r
		q.V = append([]float64(nil), r.V...)
		for d := range r.Dv {
			q.V[j*r.Dv+d] += 1
		}
		out, err := p.forward(&q)
		if err != nil {
			return nil, "", err
		}
		if out.Err != "" {
			return nil, out.Err, nil
		}
		for i := range r.M {
			for d := range r.Dv {
				if delta := math.Abs(out.O[i*r.Dv+d] - base.O[i*r.Dv+d]); delta > p.tol() || math.IsNaN(delta) != math.IsNaN(base.O[i*r.Dv+d]) {
					vis[i][j] = true
				}
			}
		}
	}
	return vis, "", nil
}

// alignment names the pattern of vis: which causal convention sees
// exactly these keys. At M > N the first M − N rows see no key under the
// position rule and bottom-right: rows that see every key or none there
// are empty rows (what those get is the card's empty-row field), not a
// sign of another alignment.
func alignment(vis [][]bool, M, N int) string {
	all := func(row []bool, v bool) bool {
		for _, x := range row {
			if x != v {
				return false
			}
		}
		return true
	}
	match := func(rule func(i, j int) bool, emptyRows bool) bool {
		for i := range M {
			if emptyRows && i < M-N && (all(vis[i], true) || all(vis[i], false)) {
				continue
			}
			for j := range N {
				if vis[i][j] != rule(i, j) {
					return false
				}
			}
		}
		return true
	}
	switch {
	case match(func(i, j int) bool { return j <= i+N-M }, true):
		return AlignBottomRight
	case match(func(i, j int) bool { return j <= i }, false):
		return AlignTopLeft
	}
	return AlignOther
}

// measureCard measures the card of impl. An error is the adapter's
// failure, or a capability it declares and then refuses.
func measureCard(impl Implementation) (*Card, error) {
	card := &Card{}
	p := newProber(impl, card)
	var err error
	if card.Scale, err = p.scale(); err != nil {
		return nil, err
	}
	if card.CausalMLtN, err = p.causal("causal_m_lt_n", 3, 7); err != nil {
		return nil, err
	}
	if card.CausalMGtN, err = p.causal("causal_m_gt_n", 6, 3); err != nil {
		return nil, err
	}
	if card.CausalM1, err = p.causal("causal_m_1", 1, 5); err != nil {
		return nil, err
	}
	if err := p.emptyRow(); err != nil {
		return nil, err
	}
	if card.PaddingRows, err = p.padding(); err != nil {
		return nil, err
	}
	if card.GQA, err = p.gqa(); err != nil {
		return nil, err
	}
	if card.WindowKeys, err = p.window(); err != nil {
		return nil, err
	}
	if card.ExtremeLogits, err = p.extremeLogits(); err != nil {
		return nil, err
	}
	if card.CacheLayouts, err = p.cacheLayouts(); err != nil {
		return nil, err
	}
	if card.Float32ErrorRatio, err = p.float32Ratio(); err != nil {
		return nil, err
	}
	if err := p.variants(); err != nil {
		return nil, err
	}
	return card, nil
}

// causal finds where the causal flag puts the diagonal for M queries
// against N keys. An implementation that takes positions is asked the
// position question too: with the chunk's queries behind the last cached
// keys, does it follow the positions or the slots?
func (p *prober) causal(field string, M, N int) (string, error) {
	card := p.card
	if M != N && !p.caps.KVCache {
		return card.na(field, "M = %d, N = %d: not asked (no kv_cache capability)", M, N), nil
	}
	if !p.caps.Has(MaskCausal) && !p.caps.Has(MaskPositions) {
		return card.na(field, "no causal flag and no positions: the causal alignment cannot be asked"), nil
	}
	r := randomRequest(11, 1, 1, 1, M, N, 4)
	r.Causal = true
	vis, refused, err := p.visibility(r)
	if err != nil {
		return "", err
	}
	if refused != "" && M > N && p.caps.Has(MaskValidity) {
		// rows before the first key see nothing: mark them padding and ask
		// about the others
		r.QValid = make([]int64, M)
		for i := M - N; i < M; i++ {
			r.QValid[i] = 1
		}
		if vis, refused, err = p.visibility(r); err != nil {
			return "", err
		}
		if vis != nil {
			for i := range M - N {
				for j := range N {
					vis[i][j] = j <= i+N-M // not asked: padding
				}
			}
			card.notef("M = %d, N = %d: the first %d queries see no key under the position rule; asked with them as padding", M, N, M-N)
		}
	}
	switch {
	case refused != "" && M > N && !p.caps.Has(MaskValidity):
		// its first M − N rows see no key under the position rule, and
		// refusing an empty row is the contract's answer (DESIGN §2)
		return card.na(field, "M = %d, N = %d causal: refused (%s); its first %d rows see no key, and without validity they cannot be marked padding", M, N, refused, M-N), nil
	case refused != "":
		return card.refused(field, "M = %d, N = %d causal: refused (%s), although it declares kv_cache and the causal flag", M, N, refused), nil
	}
	a := alignment(vis, M, N)
	if a != AlignBottomRight {
		return a, nil
	}
	if M == 1 || !p.caps.Has(MaskPositions) {
		// one query sees every key under both rules; without positions
		// there is nothing more to ask
		if M == 1 {
			return AlignPosition, nil
		}
		return a, nil
	}
	// positions against slots: the chunk's queries at positions behind the
	// last cached keys (a draft rolled back, a rewritten cache): by
	// positions they may not read those keys, by slots they do
	g := randomRequest(12, 1, 1, 1, M, N, 4)
	g.Causal = true
	g.QPos = make([]int64, M)
	for i := range M {
		g.QPos[i] = int64(max(N-M-2+i, 0))
	}
	vis, refused, err = p.visibility(g)
	if err != nil {
		return "", err
	}
	if refused != "" {
		card.notef("M = %d, N = %d with explicit query positions: refused (%s)", M, N, refused)
		return a, nil
	}
	want := g.Config()
	for i := range M {
		for j := range N {
			if vis[i][j] != want.Visible(0, i, j) {
				card.notef("M = %d, N = %d with explicit query positions: slots followed, not positions (query %d, key %d)", M, N, i, j)
				return AlignBottomRight, nil
			}
		}
	}
	return AlignPosition, nil
}

// emptyRequest is a request of 4 queries and 4 keys in which the rows
// empty see no key, expressed with segments (and positions) or a boolean
// mask; nil when the implementation can express neither.
func (p *prober) emptyRequest(seed uint64, empty ...int) *Request {
	r := randomRequest(seed, 1, 1, 1, 4, 4, 4)
	switch {
	case p.caps.Has(MaskSegments) && p.caps.Has(MaskPositions):
		r.QSeg, r.KSeg = make([]int64, 4), make([]int64, 4) // segment 7 has no key
		for _, i := range empty {
			r.QSeg[i] = 7
		}
	case p.caps.Has(MaskBool):
		r.Mask = make([]bool, 4*4)
		for i := range 4 {
			for j := range 4 {
				r.Mask[i*4+j] = !slices.Contains(empty, i)
			}
		}
	default:
		return nil
	}
	return r
}

// emptyKind names what the rows of out got: error, zero, nan, uniform or
// other.
func (p *prober) emptyKind(r *Request, out *Response, rows []int) string {
	if out.Err != "" {
		return EmptyError
	}
	uniform := make([]float64, r.Dv)
	for j := range r.N {
		for d := range r.Dv {
			uniform[d] += r.V[j*r.Dv+d] / float64(r.N)
		}
	}
	kind := ""
	for _, row := range rows {
		o := out.O[row*r.Dv : (row+1)*r.Dv]
		k := EmptyOther
		switch {
		case allOf(o, math.IsNaN):
			k = EmptyNaN
		case allOf(o, func(x float64) bool { return x == 0 }):
			k = EmptyZero
		case maxDiff(o, uniform) < 1e3*p.tol():
			k = EmptyUniform
		}
		if kind != "" && k != kind {
			return EmptyOther
		}
		kind = k
	}
	return kind
}

// emptyRow asks what a valid query that sees no key gets, in each place
// of EmptyRowPlaces, and whether the backward there is the derivative of
// that forward.
func (p *prober) emptyRow() error {
	card := p.card
	places := map[string][]int{"first": {0}, "middle": {1}, "last": {3}, "leading": {0, 1}}
	if p.emptyRequest(13, 1) == nil {
		card.EmptyRow = card.na("empty_row", "not expressible without segments or a boolean mask")
		return nil
	}
	card.EmptyRowAt = map[string]string{}
	for x, place := range EmptyRowPlaces {
		r := p.emptyRequest(uint64(20+x), places[place]...)
		out, err := p.forward(r)
		if err != nil {
			return err
		}
		card.EmptyRowAt[place] = p.emptyKind(r, out, places[place])
		if place == "middle" && out.Err != "" {
			card.notef("empty row: %s", out.Err)
		}
	}
	card.EmptyRow = card.EmptyRowAt["middle"]
	for _, place := range EmptyRowPlaces {
		if card.EmptyRowAt[place] != card.EmptyRow {
			card.notef("empty row: %s as the middle row, %s as the %s", card.EmptyRow, card.EmptyRowAt[place], place)
		}
	}
	if !p.caps.Gradients || card.EmptyRow == EmptyError {
		return nil
	}
	const row = 1
	r := p.emptyRequest(13, row)
	if card.EmptyRow == EmptyNaN {
		// a NaN forward has no derivative to compare with: say what the
		// backward gives instead
		note, err := p.nanRowBackward(r, row)
		if err != nil {
			return err
		}
		card.notef("empty row: the forward is NaN, so its backward cannot be its derivative; the backward of a loss on that row gives %s", note)
		return nil
	}
	ok, note, err := p.consistentRow(r, row)
	if err != nil {
		return err
	}
	card.EmptyRowBackwardConsistent = &ok
	if note != "" {
		card.notef("empty row backward: %s", note)
	}
	return nil
}

// nanRowBackward describes the gradients of a loss on row alone.
func (p *prober) nanRowBackward(r *Request, row int) (string, error) {
	g := make([]float64, len(r.DO))
	copy(g[row*r.Dv:(row+1)*r.Dv], r.DO[row*r.Dv:(row+1)*r.Dv])
	q := *r
	q.DO, q.DType = g, p.dtype
	back, err := p.impl.Attention(&q)
	if err != nil {
		return "", err
	}
	if back.Err != "" {
		return "an error (" + back.Err + ")", nil
	}
	return fmt.Sprintf("dq of the row %s, dk %s, dv %s", finiteness(back.DQ[row*r.D:(row+1)*r.D]), finiteness(back.DK), finiteness(back.DV)), nil
}

// finiteness names what x holds: NaN, zero, finite, partly NaN, or
// infinite (some values ±Inf, none NaN).
func finiteness(x []float64) string {
	switch {
	case allOf(x, math.IsNaN):
		return "NaN"
	case allOf(x, func(v float64) bool { return v == 0 }):
		return "zero"
	case allOf(x, func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }):
		return "finite"
	case allOf(x, func(v float64) bool { return !math.IsNaN(v) }):
		return "partly infinite"
	}
	return "partly NaN"
}

// consistentRow compares the backward of the loss Σ O[row] ⊙ G with
// central differences of the implementation's own forward: NaN where the
// differences are NaN counts as agreeing.
func (p *prober) consistentRow(r *Request, row int) (bool, string, error) {
	g := make([]float64, len(r.DO))
	copy(g[row*r.Dv:(row+1)*r.Dv], r.DO[row*r.Dv:(row+1)*r.Dv])
	q := *r
	q.DO, q.DType = g, p.dtype
	back, err := p.impl.Attention(&q)
	if err != nil {
		return false, "", err
	}
	if back.Err != "" {
		return false, "the backward refused: " + back.Err, nil
	}
	eps, tol := 1e-6, 1e-6
	if p.dtype == "float32" {
		eps, tol = 1e-2, 1e-2
	}
	loss := func(x *Request) (float64, error) {
		out, err := p.forward(x)
		if err != nil {
			return 0, err
		}
		if out.Err != "" {
			return math.NaN(), nil
		}
		var l float64
		for i, v := range out.O {
			l += v * g[i]
		}
		return l, nil
	}
	for _, in := range []struct {
		name string
		x    []float64
		grad []float64
	}{{"q", r.Q, back.DQ}, {"k", r.K, back.DK}, {"v", r.V, back.DV}} {
		for i := range in.x {
			var l [2]float64
			for s, sign := range []float64{1, -1} {
				x := *r
				buf := append([]float64(nil), in.x...)
				buf[i] += sign * eps
				switch in.name {
				case "q":
					x.Q = buf
				case "k":
					x.K = buf
				default:
					x.V = buf
				}
				if l[s], err = loss(&x); err != nil {
					return false, "", err
				}
			}
			fd := (l[0] - l[1]) / (2 * eps)
			a := in.grad[i]
			if math.IsNaN(fd) && math.IsNaN(a) {
				continue
			}
			if math.IsNaN(fd) != math.IsNaN(a) || math.Abs(fd-a) > tol*(1+math.Abs(a)) {
				return false, fmt.Sprintf("d%s[%d] = %.4g, the forward's difference %.4g", in.name, i, a, fd), nil
			}
		}
	}
	return true, "", nil
}

func allOf(x []float64, f func(float64) bool) bool {
	for _, v := range x {
		if !f(v) {
			return false
		}
	}
	return len(x) > 0
}

func maxDiff(a, b []float64) float64 {
	var m float64
	for i := range a {
		if a[i] == b[i] {
			continue // equal infinities too
		}
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// relDiff is max|a − b| over max(1, the largest finite |b|): infinite
// when a holds NaN, or an infinity b does not hold there, or when the
// lengths differ. (Over max|b| itself, one infinity in b made every a
// agree: Inf/Inf is NaN, and NaN > tol is false.)
func relDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	scale := 1.0
	for _, v := range b {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			scale = max(scale, math.Abs(v))
		}
	}
	return maxDiff(a, b) / scale
}

// padding asks what a padding query row gets.
func (p *prober) padding() (string, error) {
	if !p.caps.Has(MaskValidity) {
		return "unsupported", nil
	}
	r := randomRequest(14, 1, 1, 1, 3, 3, 4)
	r.QValid, r.KValid = []int64{1, 0, 1}, []int64{1, 1, 1}
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return EmptyError, nil
	}
	o := out.O[4:8]
	switch {
	case allOf(o, func(x float64) bool { return x == 0 }):
		return EmptyZero, nil
	case allOf(o, math.IsNaN):
		return EmptyNaN, nil
	}
	return EmptyOther, nil
}

// gqa finds which K/V head each query head reads.
func (p *prober) gqa() (string, error) {
	if !p.caps.GQA {
		return GQAUnsupported, nil
	}
	r := p.explicit(randomRequest(15, 1, 4, 2, 3, 3, 4))
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return "", p.capabilityRefused("gqa (Hq = 4, Hkv = 2)", out.Err)
	}
	if p.refScale(r) == 0 {
		return p.card.na("gqa", "the default scale (%s) is not one conform knows, and the implementation takes no scale", p.card.Scale), nil
	}
	for _, m := range []struct {
		name string
		kv   func(h int) int
	}{{GQAContiguous, func(h int) int { return h / 2 }}, {GQAInterleaved, func(h int) int { return h % 2 }}} {
		// attnlab on K, V repeated per query head by the mapping
		mha := *r
		mha.Hkv = 4
		mha.K, mha.V = make([]float64, 0, 4*3*4), make([]float64, 0, 4*3*4)
		for h := range 4 {
			mha.K = append(mha.K, r.K[m.kv(h)*12:(m.kv(h)+1)*12]...)
			mha.V = append(mha.V, r.V[m.kv(h)*12:(m.kv(h)+1)*12]...)
		}
		want, err := p.reference(&mha, false)
		if err != nil {
			return "", err
		}
		if maxDiff(out.O, want.O) < 1e3*p.tol() {
			return m.name, nil
		}
	}
	return AlignOther, nil
}

// scale finds the default scale: 1/√D, 1/D, 1 or another.
func (p *prober) scale() (string, error) {
	r := randomRequest(16, 1, 1, 1, 3, 3, 16)
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return p.card.refused("scale", "the plain request was refused: %s", out.Err), nil
	}
	for _, s := range []struct {
		name  string
		scale float64
	}{{ScaleInvSqrtD, 0.25}, {ScaleInvD, 1.0 / 16}, {ScaleOne, 1}} {
		want, err := Reference().Attention(&Request{B: 1, Hq: 1, Hkv: 1, M: 3, N: 3, D: 16, Dv: 16, Q: r.Q, K: r.K, V: r.V, DType: "float64", Scale: s.scale})
		if err != nil {
			return "", err
		}
		if maxDiff(out.O, want.O) < 1e3*p.tol() {
			return s.name, nil
		}
	}
	return "other", nil
}

// window finds how many keys a causal sliding window of W = 2 lets each
// query see.
func (p *prober) window() (string, error) {
	if !p.caps.Has(MaskWindow) {
		return p.card.na("window_keys", "no window mask"), nil
	}
	if !p.caps.Has(MaskCausal) && !p.caps.Has(MaskPositions) {
		// the window is measured on a causal pass: without a causal flag
		// or positions the implementation cannot be asked one
		return p.card.na("window_keys", "no causal flag and no positions: a causal window cannot be asked"), nil
	}
	const M, W = 6, 2
	r := randomRequest(18, 1, 1, 1, M, M, 4)
	r.Causal, r.Window = true, W
	vis, refused, err := p.visibility(r)
	if err != nil {
		return "", err
	}
	if refused != "" {
		return p.card.refused("window_keys", "refused: %s, although it declares the window mask", refused), nil
	}
	got := ""
	for i := W + 1; i < M; i++ { // rows far enough from the start to see a full window
		n := 0
		for j := range M {
			if vis[i][j] {
				n++
			}
		}
		k := map[int]string{W: WindowW, W + 1: WindowWPlus}[n]
		if k == "" || got != "" && k != got {
			p.card.notef("window of %d: query %d sees %d keys", W, i, n)
			return AlignOther, nil
		}
		got = k
	}
	return got, nil
}

// extremeLogits compares the implementation with the reference where every
// visible score of a row is very negative, causal, at lengths just past
// tile sizes, forward and (when it has them) gradients.
func (p *prober) extremeLogits() (string, error) {
	causal := p.caps.Has(MaskCausal) || p.caps.Has(MaskPositions)
	for x, n := range []int{65, 129, 257} {
		for y, shift := range []float64{-1e4, -1e5} {
			r := p.explicit(randomRequest(uint64(30+3*x+y), 1, 1, 1, n, n, 8))
			r.Causal = causal
			if p.refScale(r) == 0 {
				return p.card.na("extreme_logits", "the default scale (%s) is not one conform knows", p.card.Scale), nil
			}
			// every query's first component is big; every key's first one
			// moves by −c: each score moves by scale·big·(−c) = shift, and a
			// row's spread stays a few units
			const big = 10.0
			c := -shift / (p.refScale(r) * big)
			for i := range n {
				r.Q[i*8] = big
				r.K[i*8] -= c
			}
			if !p.caps.Gradients {
				r.DO = nil
			}
			q := *r
			q.DType = p.dtype
			got, err := p.impl.Attention(&q)
			if err != nil {
				return "", err
			}
			where := fmt.Sprintf("N = %d, scores near %.0e", n, shift)
			if got.Err != "" {
				return where + ": refused (" + got.Err + ")", nil
			}
			want, err := p.reference(r, p.caps.Gradients)
			if err != nil {
				return "", err
			}
			// float32 rounds a score of |shift| to |shift|·2⁻²⁴, an error
			// the weights inherit, and the gradients through keys of size
			// |shift|/(scale·big) more: O within 8 such roundings, the
			// gradients 64 (a NaN, a zero or a masked key let through is
			// off by the whole value). In float64 the log-sum-exp of
			// scores near shift is off by a few |shift|·2⁻⁵³, which scales
			// every weight alike; dq = scale·dS·K then no longer cancels the
			// keys' common part c, and its error grows by scale·c =
			// |shift|/big: dq and dk within 64·|shift|²/big·2⁻⁵³ of their
			// largest value (7e-6 at 1e5, where the fused kernel's tile
			// order measures 1.7e-8), O and dV within the agreement tolerance
			ulp := math.Abs(shift) * 0x1p-24
			ulp64 := math.Abs(shift) * 0x1p-53 * math.Abs(shift) / big
			for _, t := range []struct {
				name      string
				got, want []float64
				ulps      float64
				keys      bool // the product runs through the big keys
			}{{"o", got.O, want.O, 8, false}, {"dq", got.DQ, want.DQ, 64, true}, {"dk", got.DK, want.DK, 64, true}, {"dv", got.DV, want.DV, 64, false}} {
				if t.want == nil {
					continue
				}
				tol := p.agreeTol()
				switch {
				case p.dtype == "float32":
					tol = max(tol, t.ulps*ulp)
				case t.keys:
					tol = max(tol, t.ulps*ulp64)
				}
				switch f := finiteness(t.got); {
				case f == "NaN" || f == "partly NaN" || f == "partly infinite":
					return fmt.Sprintf("%s: %s %s", where, t.name, f), nil
				case f == "zero" && finiteness(t.want) != "zero":
					return fmt.Sprintf("%s: %s all zero", where, t.name), nil
				}
				if e := relDiff(t.got, t.want); e > tol {
					return fmt.Sprintf("%s: %s off by %.2g of its largest value", where, t.name, e), nil
				}
			}
		}
	}
	return OK, nil
}

// cacheLayouts compares the implementation with the reference on three
// layouts of a cache, given as positions and validity.
func (p *prober) cacheLayouts() (map[string]string, error) {
	if !p.caps.KVCache || !p.caps.Has(MaskPositions) || !p.caps.Has(MaskValidity) {
		p.card.na("cache_layouts", "needs kv_cache with positions and validity masks")
		return nil, nil
	}
	layouts := []struct {
		name       string
		kpos, qpos []int64
		kvalid     []int64
	}{
		// 5 of 8 slots filled (3 cached, the 2 new tokens), 3 empty
		{"static", []int64{0, 1, 2, 3, 4, 0, 0, 0}, []int64{3, 4}, []int64{1, 1, 1, 1, 1, 0, 0, 0}},
		// 2 pads before 6 real tokens, positions counting the real ones
		{"left-padded", []int64{0, 0, 0, 1, 2, 3, 4, 5}, []int64{4, 5}, []int64{0, 0, 1, 1, 1, 1, 1, 1}},
		// the slots in another order than the positions (a paged view)
		{"out-of-order", []int64{5, 2, 7, 0, 3, 1, 6, 4}, []int64{6, 7}, []int64{1, 1, 1, 1, 1, 1, 1, 1}},
	}
	out := map[string]string{}
	for x, l := range layouts {
		r := p.explicit(randomRequest(uint64(40+x), 1, 1, 1, 2, 8, 4))
		r.Causal, r.KPos, r.QPos, r.KValid = true, l.kpos, l.qpos, l.kvalid
		if p.refScale(r) == 0 {
			out[l.name] = NA
			continue
		}
		if !p.caps.Gradients {
			r.DO = nil
		}
		q := *r
		q.DType = p.dtype
		got, err := p.impl.Attention(&q)
		if err != nil {
			return nil, err
		}
		if got.Err != "" {
			out[l.name] = "refused (" + got.Err + ")"
			continue
		}
		want, err := p.reference(r, p.caps.Gradients)
		if err != nil {
			return nil, err
		}
		out[l.name] = OK
		for _, t := range []struct {
			name      string
			got, want []float64
		}{{"o", got.O, want.O}, {"dq", got.DQ, want.DQ}, {"dk", got.DK, want.DK}, {"dv", got.DV, want.DV}} {
			if t.want != nil {
				if e := relDiff(t.got, t.want); e > p.agreeTol() {
					out[l.name] = fmt.Sprintf("%s differs from the reference by %.2g", t.name, e)
					break
				}
			}
		}
	}
	return out, nil
}

// float32Ratio measures the float32 error of the implementation against
// attnlab's float64 reference, over that of attnlab's plain float32
// reference (scores, softmax and product materialised) on the same inputs.
func (p *prober) float32Ratio() (*float64, error) {
	if !p.caps.HasDType("float32") {
		p.card.na("float32_error_ratio", "no float32")
		return nil, nil
	}
	r := p.explicit(randomRequest(17, 1, 4, 4, 128, 128, 64))
	scale := p.refScale(r)
	if scale == 0 {
		p.card.na("float32_error_ratio", "the default scale (%s) is not one conform knows, and the implementation takes no scale", p.card.Scale)
		return nil, nil
	}
	// float32 inputs, so that both sides start from the same numbers
	for _, x := range [][]float64{r.Q, r.K, r.V} {
		for i := range x {
			x[i] = float64(float32(x[i]))
		}
	}
	got, err := p.impl.Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 128, N: 128, D: 64, Dv: 64, Q: r.Q, K: r.K, V: r.V, DType: "float32", Scale: r.Scale})
	if err != nil {
		return nil, err
	}
	if got.Err != "" {
		p.card.na("float32_error_ratio", "refused: %s", got.Err)
		return nil, nil
	}
	ask := func(dtype string) (*Response, error) {
		return Reference().Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 128, N: 128, D: 64, Dv: 64, Q: r.Q, K: r.K, V: r.V, DType: dtype, Scale: scale})
	}
	exact, err := ask("float64")
	if err != nil {
		return nil, err
	}
	plain, err := ask("float32")
	if err != nil {
		return nil, err
	}
	ratio := rmsDiff(got.O, exact.O) / rmsDiff(plain.O, exact.O)
	return &ratio, nil
}

// rmsDiff is the root mean square of a − b: the error of every element
// weighs, where the largest one alone is often just the output's own
// float32 rounding.
func rmsDiff(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return math.Sqrt(s / float64(len(a)))
}

// rows lists the card's fields as (label, value) for the text report.
func (card *Card) rows() [][2]string {
	consistent := NA
	if card.EmptyRowBackwardConsistent != nil {
		consistent = map[bool]string{true: "yes", false: "no"}[*card.EmptyRowBackwardConsistent]
	}
	ratio := NA
	if card.Float32ErrorRatio != nil {
		ratio = fmt.Sprintf("%.2f", *card.Float32ErrorRatio)
	}
	joined := func(m map[string]string, keys []string) string {
		if m == nil {
			return NA
		}
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+" "+m[k])
		}
		return strings.Join(parts, ", ")
	}
	return [][2]string{
		{"causal, M < N", card.CausalMLtN}, {"causal, M > N", card.CausalMGtN}, {"causal, M = 1 (decode)", card.CausalM1},
		{"fully masked valid row", card.EmptyRow}, {"  as first, middle, last row, leading block", joined(card.EmptyRowAt, EmptyRowPlaces)},
		{"  backward consistent there", consistent},
		{"padding query rows", card.PaddingRows}, {"GQA head mapping", card.GQA}, {"default scale", card.Scale},
		{"window of W sees", card.WindowKeys}, {"extreme logits (−1e4, −1e5; 65…257 keys)", card.ExtremeLogits},
		{"cache layouts", joined(card.CacheLayouts, []string{"static", "left-padded", "out-of-order"})},
		{"float32 error / plain float32's", ratio},
		{"sinks", card.Sinks}, {"  valid row with no visible key", card.SinksEmptyRow}, {"  dσ (dsinks)", card.SinksGrad},
		{"softcap", card.Softcap}, {"  applied", card.SoftcapOrder},
		{"ALiBi", card.Alibi}, {"  distance by", card.AlibiDistance},
	}
}
