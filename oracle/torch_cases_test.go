package oracle_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/safetensors"
)

// attnCase is one attention input for the oracle file interface (DESIGN §8):
// shapes, metadata and the optional per-token I64 tensors, nil when absent.
type attnCase struct {
	name                    string
	B, Hq, Hkv, M, N, D, Dv int

	causal     bool
	window     int     // 0: no "window" metadata
	scale      float64 // 0: no "scale" metadata (1/sqrt(D))
	convention string  // "": no "convention" metadata (position)

	qPos, kPos, qValid, kValid, qSeg, kSeg []int64 // [B*M] and [B*N]

	softcap       float64   // 0: no "softcap" metadata
	sinks, slopes []float64 // [Hq] or nil: no "sinks", "alibi_slopes" tensor
}

// config returns c as an attention.Config, to check a case against the mask
// rule before it is run.
func (c *attnCase) config() *attention.Config {
	cfg := &attention.Config{
		B: c.B, Hq: c.Hq, Hkv: c.Hkv, M: c.M, N: c.N, D: c.D, Dv: c.Dv,
		Scale: c.scale, Causal: c.causal, Window: c.window,
		QPos: ints(c.qPos), KPos: ints(c.kPos), QSeg: ints(c.qSeg), KSeg: ints(c.kSeg),
		QValid: bools(c.qValid), KValid: bools(c.kValid),
		Softcap: c.softcap, Sinks: c.sinks, Alibi: c.slopes,
	}
	if c.convention != "" {
		conv, err := attention.ParseConvention(c.convention)
		if err != nil {
			panic(err)
		}
		cfg.Convention = conv
	}
	return cfg
}

// check reports a generator bug: an invalid configuration, or a valid query
// row that sees no key (which attnlab rightly rejects). It returns the number
// of padding query rows, so that the test can show they are covered.
func (c *attnCase) check() (padRows int, err error) {
	cfg := c.config()
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	for b := range c.B {
		for i := range c.M {
			if !cfg.QueryValid(b, i) {
				padRows++
				continue
			}
			seen := false
			for j := range c.N {
				seen = seen || cfg.Visible(b, i, j)
			}
			if !seen && c.sinks == nil { // with sinks an empty row is defined
				return 0, fmt.Errorf("batch %d, valid query row %d sees no key", b, i)
			}
		}
	}
	return padRows, nil
}

// file returns the case as a safetensors input file with random q, k, v and
// do drawn from r.
func (c *attnCase) file(r *rand.Rand) *safetensors.File {
	f := safetensors.New()
	normal := func(n int, sd float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = sd * r.NormFloat64()
		}
		return x
	}
	f.SetF64("q", []int{c.B, c.Hq, c.M, c.D}, normal(c.B*c.Hq*c.M*c.D, 1.5))
	f.SetF64("k", []int{c.B, c.Hkv, c.N, c.D}, normal(c.B*c.Hkv*c.N*c.D, 1.5))
	f.SetF64("v", []int{c.B, c.Hkv, c.N, c.Dv}, normal(c.B*c.Hkv*c.N*c.Dv, 1))
	f.SetF64("do", []int{c.B, c.Hq, c.M, c.Dv}, normal(c.B*c.Hq*c.M*c.Dv, 1))
	for _, t := range []struct {
		name string
		x    []int64
		rows int
	}{
		{"q_pos", c.qPos, c.M}, {"k_pos", c.kPos, c.N},
		{"q_valid", c.qValid, c.M}, {"k_valid", c.kValid, c.N},
		{"q_seg", c.qSeg, c.M}, {"k_seg", c.kSeg, c.N},
	} {
		if t.x != nil {
			f.SetI64(t.name, []int{c.B, t.rows}, t.x)
		}
	}
	f.Metadata["causal"] = strconv.FormatBool(c.causal)
	f.Metadata["x-case"] = c.name
	if c.window != 0 {
		f.Metadata["window"] = strconv.Itoa(c.window)
	}
	if c.scale != 0 {
		f.Metadata["scale"] = strconv.FormatFloat(c.scale, 'g', -1, 64)
	}
	if c.convention != "" {
		f.Metadata["convention"] = c.convention
	}
	if c.softcap != 0 {
		f.Metadata["softcap"] = strconv.FormatFloat(c.softcap, 'g', -1, 64)
	}
	if c.sinks != nil {
		f.SetF64("sinks", []int{c.Hq}, c.sinks)
	}
	if c.slopes != nil {
		f.SetF64("alibi_slopes", []int{c.Hq}, c.slopes)
	}
	return f
}

func ints(x []int64) []int {
	if x == nil {
		return nil
	}
	y := make([]int, len(x))
	for i, e := range x {
		y[i] = int(e)
	}
	return y
}

func bools(x []int64) []bool {
	if x == nil {
		return nil
	}
	y := make([]bool, len(x))
	for i, e := range x {
		y[i] = e != 0
	}
	return y
}

func int64s(x []int) []int64 {
	y := make([]int64, len(x))
	for i, e := range x {
		y[i] = int64(e)
	}
	return y
}

func bits(x []bool) []int64 {
	y := make([]int64, len(x))
	for i, e := range x {
		if e {
			y[i] = 1
		}
	}
	return y
}

// heads returns query and key/value head counts for a layout: "mha"
// (Hq == Hkv), "gqa" (groups of 2 or 3) or "mqa" (Hkv == 1).
func heads(r *rand.Rand, layout string) (hq, hkv int) {
	switch layout {
	case "mha":
		h := 1 + r.IntN(3)
		return h, h
	case "gqa":
		hkv = 2 + r.IntN(2)
		return hkv * (2 + r.IntN(2)), hkv
	case "mqa":
		return 2 + r.IntN(3), 1
	}
	panic("unknown head layout " + layout)
}

// base returns a case with the given head layout, random head dimensions
// (odd ones included) and the given batch and sequence sizes.
func base(r *rand.Rand, layout string, B, M, N int) attnCase {
	hq, hkv := heads(r, layout)
	return attnCase{B: B, Hq: hq, Hkv: hkv, M: M, N: N, D: 1 + r.IntN(8), Dv: 1 + r.IntN(8)}
}

// leftPadded sets k_valid and k_pos for a left-padded batch whose row b
// starts with pads[b] padding tokens, positions counting real tokens only
// (attention.PositionsFromValidity), and derives the queries' validity and
// positions from the last M tokens: the new chunk after the cache.
func (c *attnCase) leftPadded(pads []int) {
	kv := make([]bool, c.B*c.N)
	for b := range c.B {
		for j := range c.N {
			kv[b*c.N+j] = j >= pads[b]
		}
	}
	kp := attention.PositionsFromValidity(kv, c.B, c.N)
	qv := make([]bool, c.B*c.M)
	qp := make([]int, c.B*c.M)
	for b := range c.B {
		for i := range c.M {
			qv[b*c.M+i] = kv[b*c.N+c.N-c.M+i]
			qp[b*c.M+i] = kp[b*c.N+c.N-c.M+i]
		}
	}
	c.kValid, c.kPos, c.qValid, c.qPos = bits(kv), int64s(kp), bits(qv), int64s(qp)
}

// pads returns B left-padding amounts in [0, most], the first 0 and one of
// the others most, so that a batch mixes padded and unpadded rows.
func pads(r *rand.Rand, B, most int) []int {
	p := make([]int, B)
	for b := 1; b < B; b++ {
		p[b] = r.IntN(most + 1)
	}
	if B > 1 {
		p[1+r.IntN(B-1)] = most
	}
	return p
}

// caseKinds are the generators of the cross-check cases; each runs twice
// with different random sizes. Together they cover MHA, GQA and MQA; M == N
// and M != N with a cache (default positions); M = 1 decode; left padding;
// right padding with padding query rows; packed segments with restarting
// positions; sliding windows; non-causal attention; an explicit scale; the
// bottom-right and top-left conventions; odd head dimensions.
var caseKinds = []struct {
	name string
	gen  func(r *rand.Rand) attnCase
}{
	{"mha-square", func(r *rand.Rand) attnCase {
		n := 3 + r.IntN(5)
		c := base(r, "mha", 1+r.IntN(2), n, n)
		c.causal = true
		return c
	}},
	{"gqa-cache", func(r *rand.Rand) attnCase {
		m := 2 + r.IntN(3)
		c := base(r, "gqa", 1+r.IntN(2), m, m+1+r.IntN(5))
		c.causal = true
		return c
	}},
	{"mqa-decode", func(r *rand.Rand) attnCase {
		c := base(r, "mqa", 1+r.IntN(3), 1, 1+r.IntN(9))
		c.causal = true
		return c
	}},
	{"gqa-cache-leftpad", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(3)
		c := base(r, "gqa", 2+r.IntN(2), m, m+3+r.IntN(5))
		c.causal = true
		c.leftPadded(pads(r, c.B, c.N-c.M)) // pads in the cache only
		return c
	}},
	{"mha-prefill-leftpad", func(r *rand.Rand) attnCase {
		n := 4 + r.IntN(5)
		c := base(r, "mha", 2+r.IntN(2), n, n)
		c.causal = true
		c.leftPadded(pads(r, c.B, n-1)) // padding query rows too
		return c
	}},
	{"mqa-decode-leftpad", func(r *rand.Rand) attnCase {
		c := base(r, "mqa", 2+r.IntN(2), 1, 3+r.IntN(6))
		c.causal = true
		c.leftPadded(pads(r, c.B, c.N-1))
		return c
	}},
	{"gqa-rightpad", func(r *rand.Rand) attnCase {
		n := 3 + r.IntN(6)
		c := base(r, "gqa", 2+r.IntN(2), n, n)
		c.causal = true
		valid := make([]int64, c.B*n)
		for b := range c.B {
			l := 1 + r.IntN(n)
			if b == 0 {
				l = n - 1 - r.IntN(n-1) // at least one padding row
			}
			for j := range l {
				valid[b*n+j] = 1
			}
		}
		c.qValid, c.kValid = valid, valid
		if r.IntN(2) == 0 { // explicit positions equal to the defaults
			pos := make([]int64, c.B*n)
			for x := range pos {
				pos[x] = int64(x % n)
			}
			c.qPos, c.kPos = pos, pos
		}
		return c
	}},
	{"gqa-packed", func(r *rand.Rand) attnCase { return packed(r, "gqa", true) }},
	{"mha-packed-noncausal", func(r *rand.Rand) attnCase { return packed(r, "mha", false) }},
	{"gqa-window", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(4)
		c := base(r, "gqa", 1+r.IntN(2), m, m+r.IntN(6))
		c.causal = true
		c.window = 1 + r.IntN(4)
		return c
	}},
	{"mqa-window-leftpad", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(3)
		c := base(r, "mqa", 2+r.IntN(2), m, m+3+r.IntN(5))
		c.causal = true
		c.window = 2 + r.IntN(3)
		c.leftPadded(pads(r, c.B, c.N-1))
		return c
	}},
	{"mha-window-noncausal", func(r *rand.Rand) attnCase {
		n := 4 + r.IntN(5)
		c := base(r, "mha", 1+r.IntN(2), n, n)
		c.window = 1 + r.IntN(3) // limits the past only
		return c
	}},
	{"gqa-noncausal", func(r *rand.Rand) attnCase {
		c := base(r, "gqa", 2, 1+r.IntN(6), 1+r.IntN(6)) // M > N allowed
		qv, kv := make([]int64, c.B*c.M), make([]int64, c.B*c.N)
		for x := range qv {
			if r.IntN(4) > 0 { // a quarter of the rows are padding
				qv[x] = 1
			}
		}
		for b := range c.B {
			for j := range c.N {
				kv[b*c.N+j] = int64(r.IntN(2))
			}
			kv[b*c.N+r.IntN(c.N)] = 1
		}
		c.qValid, c.kValid = qv, kv
		return c
	}},
	{"mha-scale", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(4)
		c := base(r, "mha", 1+r.IntN(2), m, m+r.IntN(4))
		c.causal = true
		c.scale = 0.05 + 2*r.Float64()
		return c
	}},
	{"gqa-bottom-right", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(4)
		c := base(r, "gqa", 2+r.IntN(2), m, m+1+r.IntN(5))
		c.causal = true
		c.convention = "bottom-right"
		// Left padding in the cache: the convention ignores the positions
		// (it aligns by index), validity still applies.
		c.leftPadded(pads(r, c.B, c.N-c.M))
		if r.IntN(2) == 0 {
			c.window = 1 + r.IntN(3)
		}
		return c
	}},
	{"mqa-top-left", func(r *rand.Rand) attnCase {
		m, n := 1+r.IntN(6), 1+r.IntN(6)
		for m == n {
			n = 1 + r.IntN(6)
		}
		c := base(r, "mqa", 1+r.IntN(2), m, n) // M < N hides most history; M > N is allowed
		c.causal = true
		c.convention = "top-left"
		return c
	}},
	{"mha-position-shifted", func(r *rand.Rand) attnCase {
		// A rolling cache: explicit positions starting far from 0.
		m := 1 + r.IntN(3)
		c := base(r, "mha", 1+r.IntN(2), m, m+r.IntN(5))
		c.causal = true
		c.convention = "position"
		c.window = 2 + r.IntN(4)
		c.qPos, c.kPos = make([]int64, c.B*c.M), make([]int64, c.B*c.N)
		for b := range c.B {
			off := int64(50 + r.IntN(1000))
			for j := range c.N {
				c.kPos[b*c.N+j] = off + int64(j)
			}
			for i := range c.M {
				c.qPos[b*c.M+i] = off + int64(c.N-c.M+i)
			}
		}
		return c
	}},
	{"gqa-odd-d5-dv3", func(r *rand.Rand) attnCase {
		m := 1 + r.IntN(4)
		c := base(r, "gqa", 1+r.IntN(2), m, m+1+r.IntN(4))
		c.D, c.Dv = 5, 3
		c.causal = true
		return c
	}},
}

// packed returns a batch of rows that each pack several documents: segment
// ids, positions restarting at 0 in every document, and sometimes trailing
// padding.
func packed(r *rand.Rand, layout string, causal bool) attnCase {
	n := 6 + r.IntN(6)
	c := base(r, layout, 1+r.IntN(2), n, n)
	c.causal = causal
	seg, pos, valid := make([]int64, c.B*n), make([]int64, c.B*n), make([]int64, c.B*n)
	for b := range c.B {
		end := n - r.IntN(3) // trailing padding
		id, p := int64(0), int64(0)
		for j := range n {
			if j > 0 && j < end && r.IntN(3) == 0 { // a new document starts
				id, p = id+1, 0
			}
			if j >= end {
				id, p = -1, 0
			}
			seg[b*n+j], pos[b*n+j] = id, p
			if j < end {
				valid[b*n+j] = 1
			}
			p++
		}
	}
	c.qSeg, c.kSeg, c.qPos, c.kPos, c.qValid, c.kValid = seg, seg, pos, pos, valid, valid
	return c
}

// torchCases returns the cross-check cases, each kind twice, from a fixed
// seed, then each kind with softcap, ALiBi and sinks: all three, and each
// alone in turn.
func torchCases() []attnCase {
	r := rand.New(rand.NewPCG(2024, 8))
	var cases []attnCase
	for rep := 1; rep <= 2; rep++ {
		for _, k := range caseKinds {
			c := k.gen(r)
			c.name = fmt.Sprintf("%s-%d", k.name, rep)
			cases = append(cases, c)
		}
	}
	for x, k := range caseKinds {
		c := k.gen(r)
		which := []string{"all", "softcap", "alibi", "sinks"}[x%4]
		c.name = fmt.Sprintf("%s-%s", k.name, which)
		if which == "all" || which == "softcap" {
			c.softcap = 1 + 4*r.Float64()
		}
		if which == "all" || which == "alibi" {
			for h := range c.Hq {
				c.slopes = append(c.slopes, math.Exp2(-float64(h+1)*8/float64(c.Hq)))
			}
		}
		if which == "all" || which == "sinks" {
			for range c.Hq {
				c.sinks = append(c.sinks, r.NormFloat64())
			}
		}
		cases = append(cases, c)
	}
	// with sinks, the empty row of emptyRowCase is defined: O = 0, lse = σ
	empty := attnCase{name: "empty-row-sinks", B: 2, Hq: 2, Hkv: 1, M: 4, N: 4, D: 3, Dv: 2, causal: true, softcap: 3,
		qSeg: []int64{0, 0, 1, 1, 0, 0, 7, 1}, kSeg: []int64{0, 0, 1, 1, 0, 0, 1, 1}, sinks: []float64{0.5, -0.3}}
	return append(cases, empty)
}

// relErr returns max |a-b| / (1 + |b|) over the elements, with equal
// infinities counting as equal and any other non-finite disagreement as +Inf,
// and the index where it is reached.
func relErr(a, b []float64) (worst float64, at int) {
	for i := range a {
		x, y := a[i], b[i]
		var e float64
		switch {
		case x == y: // equal infinities included
		case math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0):
			e = math.Inf(1)
		default:
			e = math.Abs(x-y) / (1 + math.Abs(y))
		}
		if e > worst {
			worst, at = e, i
		}
	}
	return worst, at
}
