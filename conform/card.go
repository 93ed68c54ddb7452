package conform

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Card values.
const (
	AlignPosition    = "position"     // attnlab's rule: logical positions decide (DESIGN §2)
	AlignBottomRight = "bottom-right" // the last query aligned with the last key by index
	AlignTopLeft     = "top-left"     // the first query aligned with the first key: tril(ones(M, N))
	AlignOther       = "other"

	EmptyError   = "error"
	EmptyZero    = "zero"
	EmptyNaN     = "nan"
	EmptyUniform = "uniform"
	EmptyOther   = "other"

	GQAContiguous  = "contiguous"  // query head h reads K/V head h / (Hq/Hkv), as repeat_kv
	GQAInterleaved = "interleaved" // query head h reads K/V head h mod Hkv
	GQAUnsupported = "unsupported"

	ScaleInvSqrtD = "1/sqrt(D)"
)

// Card is the semantics of an implementation, as measured.
type Card struct {
	CausalMLtN string `json:"causal_m_lt_n"` // a chunk of M queries after a cache, M < N
	CausalMGtN string `json:"causal_m_gt_n"` // more queries than keys
	EmptyRow   string `json:"empty_row"`     // what a valid query with no visible key gets
	// EmptyRowBackwardConsistent says whether the backward on such a row is
	// the derivative of the forward there (finite differences of the
	// implementation's own forward); null without gradients or when the
	// row is an error.
	EmptyRowBackwardConsistent *bool  `json:"empty_row_backward_consistent"`
	PaddingRows                string `json:"padding_rows"` // what a padding query gets: zero, nan, other, unsupported
	GQA                        string `json:"gqa"`
	Scale                      string `json:"scale"` // the default scale
	// Float32ErrorRatio is the implementation's float32 error against
	// attnlab's float64 reference, over that of a plain float32
	// implementation (attnlab's reference: scores, softmax and product
	// materialised) on the same inputs: root mean square error of the
	// output, B=1, H=4, M=N=128, D=64, N(0,1) inputs; null without float32.
	Float32ErrorRatio *float64 `json:"float32_error_ratio"`
	Notes             []string `json:"notes,omitempty"`
}

func (card *Card) notef(format string, args ...any) {
	card.Notes = append(card.Notes, fmt.Sprintf(format, args...))
}

// prober asks an implementation for plain forward passes.
type prober struct {
	impl  Implementation
	caps  Capabilities
	dtype string // the most precise dtype it has
}

func newProber(impl Implementation) *prober {
	p := &prober{impl: impl, caps: impl.Capabilities(), dtype: "float64"}
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
// exactly these keys (rows that see nothing under bottom-right excepted,
// when skipEmpty).
func alignment(vis [][]bool, M, N int) string {
	match := func(rule func(i, j int) bool) bool {
		for i := range M {
			for j := range N {
				if vis[i][j] != rule(i, j) {
					return false
				}
			}
		}
		return true
	}
	switch {
	case match(func(i, j int) bool { return j <= i+N-M }):
		return AlignBottomRight
	case match(func(i, j int) bool { return j <= i }):
		return AlignTopLeft
	}
	return AlignOther
}

// measureCard measures the card of impl.
func measureCard(impl Implementation) (*Card, error) {
	p := newProber(impl)
	card := &Card{}
	var err error
	if card.CausalMLtN, err = p.causal(card, 3, 7); err != nil {
		return nil, err
	}
	if card.CausalMGtN, err = p.causal(card, 6, 3); err != nil {
		return nil, err
	}
	if err := p.emptyRow(card); err != nil {
		return nil, err
	}
	if card.PaddingRows, err = p.padding(); err != nil {
		return nil, err
	}
	if card.GQA, err = p.gqa(); err != nil {
		return nil, err
	}
	if card.Scale, err = p.scale(); err != nil {
		return nil, err
	}
	if card.Float32ErrorRatio, err = p.float32Ratio(); err != nil {
		return nil, err
	}
	return card, nil
}

// causal finds where the causal flag puts the diagonal for M queries
// against N keys. An implementation that takes positions is asked the
// position question too: with a left-padded cache (empty slots the
// positions skip), does it follow the positions or the slots?
func (p *prober) causal(card *Card, M, N int) (string, error) {
	if M != N && !p.caps.KVCache {
		card.notef("M = %d, N = %d: not asked (no kv_cache capability)", M, N)
		return AlignOther, nil
	}
	if !p.caps.Has(MaskCausal) && !p.caps.Has(MaskPositions) {
		card.notef("no causal flag: the causal alignment is not asked")
		return AlignOther, nil
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
	if refused != "" {
		card.notef("M = %d, N = %d causal: refused (%s)", M, N, refused)
		return AlignOther, nil
	}
	a := alignment(vis, M, N)
	if a != AlignBottomRight || !p.caps.Has(MaskPositions) {
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

// emptyRow asks what a valid query that sees no key gets, and whether the
// backward there is the derivative of that forward.
func (p *prober) emptyRow(card *Card) error {
	r := randomRequest(13, 1, 1, 1, 3, 4, 4)
	const row = 1
	switch {
	case p.caps.Has(MaskSegments) && p.caps.Has(MaskPositions):
		r.QSeg, r.KSeg = []int64{0, 7, 0}, []int64{0, 0, 0, 0} // segment 7 has no key
	case p.caps.Has(MaskBool):
		r.Mask = make([]bool, 3*4)
		for i := range 3 {
			for j := range 4 {
				r.Mask[i*4+j] = i != row
			}
		}
	default:
		card.EmptyRow = EmptyOther
		card.notef("empty row: not expressible without segments or a boolean mask")
		return nil
	}
	out, err := p.forward(r)
	if err != nil {
		return err
	}
	if out.Err != "" {
		card.EmptyRow = EmptyError
		card.notef("empty row: %s", out.Err)
		return nil
	}
	o := out.O[row*r.Dv : (row+1)*r.Dv]
	uniform := make([]float64, r.Dv)
	for j := range r.N {
		for d := range r.Dv {
			uniform[d] += r.V[j*r.Dv+d] / float64(r.N)
		}
	}
	switch {
	case allOf(o, math.IsNaN):
		card.EmptyRow = EmptyNaN
	case allOf(o, func(x float64) bool { return x == 0 }):
		card.EmptyRow = EmptyZero
	case maxDiff(o, uniform) < 1e3*p.tol():
		card.EmptyRow = EmptyUniform
	default:
		card.EmptyRow = EmptyOther
		card.notef("empty row: output %v", o)
	}
	if !p.caps.Gradients {
		return nil
	}
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
	what := func(x []float64) string {
		switch {
		case allOf(x, math.IsNaN):
			return "NaN"
		case allOf(x, func(v float64) bool { return v == 0 }):
			return "zero"
		case allOf(x, func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }):
			return "finite"
		}
		return "partly NaN"
	}
	return fmt.Sprintf("dq of the row %s, dk %s, dv %s", what(back.DQ[row*r.D:(row+1)*r.D]), what(back.DK), what(back.DV)), nil
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
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
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
	r := randomRequest(15, 1, 4, 2, 3, 3, 4)
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return GQAUnsupported, nil
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
		want, err := Reference().Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 3, N: 3, D: 4, Dv: 4, Q: mha.Q, K: mha.K, V: mha.V, DType: "float64", Scale: r.Scale})
		if err != nil {
			return "", err
		}
		if maxDiff(out.O, want.O) < 1e3*p.tol() {
			return m.name, nil
		}
	}
	return AlignOther, nil
}

// scale finds the default scale: 1/√D, 1 or another.
func (p *prober) scale() (string, error) {
	r := randomRequest(16, 1, 1, 1, 3, 3, 16)
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return "other (" + out.Err + ")", nil
	}
	for _, s := range []struct {
		name  string
		scale float64
	}{{ScaleInvSqrtD, 0.25}, {"1", 1}} {
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

// float32Ratio measures the float32 error of the implementation against
// attnlab's float64 reference, over that of attnlab's plain float32
// reference (scores, softmax and product materialised) on the same inputs.
func (p *prober) float32Ratio() (*float64, error) {
	if !p.caps.HasDType("float32") {
		return nil, nil
	}
	r := randomRequest(17, 1, 4, 4, 128, 128, 64)
	// float32 inputs, so that both sides start from the same numbers
	for _, x := range [][]float64{r.Q, r.K, r.V} {
		for i := range x {
			x[i] = float64(float32(x[i]))
		}
	}
	got, err := p.impl.Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 128, N: 128, D: 64, Dv: 64, Q: r.Q, K: r.K, V: r.V, DType: "float32"})
	if err != nil {
		return nil, err
	}
	if got.Err != "" {
		return nil, nil
	}
	exact, err := Reference().Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 128, N: 128, D: 64, Dv: 64, Q: r.Q, K: r.K, V: r.V, DType: "float64"})
	if err != nil {
		return nil, err
	}
	plain, err := Reference().Attention(&Request{B: 1, Hq: 4, Hkv: 4, M: 128, N: 128, D: 64, Dv: 64, Q: r.Q, K: r.K, V: r.V, DType: "float32"})
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
