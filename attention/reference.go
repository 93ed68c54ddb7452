package attention

import (
	"fmt"
	"math"
)

// Stages is the reference attention taken apart into the equations it is made
// of. Reference returns the correct stages; Forward and Backward run them.
// The negative controls of package faults are Stages with one stage replaced
// by a broken one, so a fault is always a small, named, separate function and
// never a switch inside this package.
type Stages[T Float] struct {
	Visible func(c *Config, b, i, j int) bool                 // the mask rule
	KVHead  func(h, hq, hkv int) int                          // the GQA head mapping
	Scores  func(s, q, k []T, m, n, d int, scale T)           // S = Q Kᵀ · scale
	Logits  func(s []T, c *Config, b, h, m, n int)            // softcap, then ALiBi
	Softmax func(p, lse, s []T, vis []bool, m, n int, sink T) // P = softmax(S masked, sink), lse
	Mix     func(o, p, v []T, m, n, dv int)                   // O = P V
	GradV   func(dv, p, do []T, m, n, dvd int)                // dV += Pᵀ dO
	GradP   func(dp, do, v []T, m, n, dvd int)                // dP = dO Vᵀ
	GradS   func(ds, p, dp []T, m, n int)                     // dS = P ⊙ (dP − rowsum(P ⊙ dP))
	// dS ⊙= 1 − tanh²(S/c), S the scaled scores before Logits
	GradLogits func(ds, s []T, c *Config, b, h, m, n int)
	GradQ      func(dq, ds, k []T, m, n, d int, scale T) // dQ += dS K · scale
	GradK      func(dk, ds, q []T, m, n, d int, scale T) // dK += dSᵀ Q · scale
	// dσ_h += −Σ_{b,i} exp(σ_h − lse) · (dO · O)
	SinkGrad func(dsinks, o, lse, do []T, c *Config)
}

// Reference returns the stages of the correct reference attention.
func Reference[T Float]() Stages[T] {
	return Stages[T]{
		Visible:    (*Config).Visible,
		KVHead:     KVHead,
		Scores:     Scores[T],
		Logits:     Logits[T],
		Softmax:    Softmax[T],
		Mix:        Mix[T],
		GradV:      GradV[T],
		GradP:      GradP[T],
		GradS:      GradS[T],
		GradLogits: GradLogits[T],
		GradQ:      GradQ[T],
		GradK:      GradK[T],
		SinkGrad:   SinkGrad[T],
	}
}

// Forward computes reference attention (see Stages.Forward).
func Forward[T Float](o, lse, p, q, k, v []T, c *Config) error {
	return Reference[T]().Forward(o, lse, p, q, k, v, c)
}

// Backward adds reference attention gradients (see Stages.Backward).
func Backward[T Float](dq, dk, dv, do, q, k, v, p []T, c *Config) {
	Reference[T]().Backward(dq, dk, dv, do, q, k, v, p, c)
}

// Forward computes, for every batch item b and query head h reading key/value
// head kvh = KVHead(h, Hq, Hkv),
//
//	S = Q Kᵀ · scale    P = softmax_row(S masked)    O = P V
//
// with Config's softcap and ALiBi applied to S before the mask and its sink
// in the softmax's denominator.
//
// and saves P (B, Hq, M, N) and the row log-sum-exp lse (B, Hq, M) for the
// backward. q is (B, Hq, M, D), k is (B, Hkv, N, D), v is (B, Hkv, N, Dv) and
// o is (B, Hq, M, Dv); K and V are read in place, never repeated per query
// head. Padding queries get zero output and lse = +Inf.
//
// Forward returns an *EmptyRowError, before writing anything, if a valid
// query row sees no key (unless c has sinks, which define such a row as
// O = 0 and lse = σ). It panics if c is invalid (see Config.Validate) or a
// slice has the wrong length.
func (s Stages[T]) Forward(o, lse, p, q, k, v []T, c *Config) error {
	mustFit(c, map[string][2]int{
		"o": {len(o), c.B * c.Hq * c.M * c.Dv}, "lse": {len(lse), c.B * c.Hq * c.M},
		"p": {len(p), c.B * c.Hq * c.M * c.N}, "q": {len(q), c.B * c.Hq * c.M * c.D},
		"k": {len(k), c.B * c.Hkv * c.N * c.D}, "v": {len(v), c.B * c.Hkv * c.N * c.Dv},
	})
	B, Hq, Hkv, M, N, D, Dv := c.B, c.Hq, c.Hkv, c.M, c.N, c.D, c.Dv
	vis, err := s.visibility(c)
	if err != nil {
		return err
	}
	scale := T(c.ScaleValue())
	scores := make([]T, M*N)
	for b := range B {
		visb := vis[b*M*N : (b+1)*M*N]
		for h := range Hq {
			sink := T(math.Inf(-1))
			if c.Sinks != nil {
				sink = T(c.Sinks[h])
			}
			kvh := s.KVHead(h, Hq, Hkv)
			bh, bkv := b*Hq+h, b*Hkv+kvh
			qh := q[bh*M*D : (bh+1)*M*D]
			kh := k[bkv*N*D : (bkv+1)*N*D]
			vh := v[bkv*N*Dv : (bkv+1)*N*Dv]
			ph := p[bh*M*N : (bh+1)*M*N]
			s.Scores(scores, qh, kh, M, N, D, scale)                    // S = Q Kᵀ · scale
			s.Logits(scores, c, b, h, M, N)                             // softcap, ALiBi
			s.Softmax(ph, lse[bh*M:(bh+1)*M], scores, visb, M, N, sink) // P = softmax(S masked, sink)
			s.Mix(o[bh*M*Dv:(bh+1)*M*Dv], ph, vh, M, N, Dv)             // O = P V
		}
	}
	return nil
}

// Backward adds the gradients of a scalar loss L into dq, dk and dv, given
// dO = ∂L/∂O (shaped like o) and the P saved by Forward. It runs the forward's
// equations in reverse:
//
//	dV += Pᵀ dO    dP = dO Vᵀ    dS = P ⊙ (dP − rowsum(P ⊙ dP))
//	dS ⊙= 1 − tanh²(S/c) (softcap c)
//	dQ += dS K · scale    dK += dSᵀ Q · scale
//
// A sink has no value row, so dP has no entry for it and the row sum runs
// over the keys alone: the formula is unchanged. The sinks' own gradient
// is SinkGrad's.
//
// Backward adds into dq, dk and dv; callers zero them. The gradients of a
// shared key/value head are the sum over its group of query heads. Padding
// queries pass no gradient. It panics if a slice has the wrong length.
func (s Stages[T]) Backward(dq, dk, dv, do, q, k, v, p []T, c *Config) {
	mustFit(c, map[string][2]int{
		"dq": {len(dq), c.B * c.Hq * c.M * c.D}, "dk": {len(dk), c.B * c.Hkv * c.N * c.D},
		"dv": {len(dv), c.B * c.Hkv * c.N * c.Dv}, "do": {len(do), c.B * c.Hq * c.M * c.Dv},
		"p": {len(p), c.B * c.Hq * c.M * c.N}, "q": {len(q), c.B * c.Hq * c.M * c.D},
		"k": {len(k), c.B * c.Hkv * c.N * c.D}, "v": {len(v), c.B * c.Hkv * c.N * c.Dv},
	})
	B, Hq, Hkv, M, N, D, Dv := c.B, c.Hq, c.Hkv, c.M, c.N, c.D, c.Dv
	scale := T(c.ScaleValue())
	dp := make([]T, M*N)
	ds := make([]T, M*N)
	var raw []T // the scores before softcap, for its derivative
	if c.Softcap > 0 {
		raw = make([]T, M*N)
	}
	for b := range B {
		for h := range Hq {
			kvh := s.KVHead(h, Hq, Hkv)
			bh, bkv := b*Hq+h, b*Hkv+kvh
			ph := p[bh*M*N : (bh+1)*M*N]
			doh := do[bh*M*Dv : (bh+1)*M*Dv]
			// the content path: values
			s.GradV(dv[bkv*N*Dv:(bkv+1)*N*Dv], ph, doh, M, N, Dv) // dV += Pᵀ dO
			// the selection path: probabilities, scores, then queries and keys
			s.GradP(dp, doh, v[bkv*N*Dv:(bkv+1)*N*Dv], M, N, Dv) // dP = dO Vᵀ
			s.GradS(ds, ph, dp, M, N)                            // dS = P ⊙ (dP − rowsum(P ⊙ dP))
			if raw != nil {
				s.Scores(raw, q[bh*M*D:(bh+1)*M*D], k[bkv*N*D:(bkv+1)*N*D], M, N, D, scale)
				s.GradLogits(ds, raw, c, b, h, M, N) // dS ⊙= 1 − tanh²(S/c)
			}
			s.GradQ(dq[bh*M*D:(bh+1)*M*D], ds, k[bkv*N*D:(bkv+1)*N*D], M, N, D, scale) // dQ += dS K · scale
			s.GradK(dk[bkv*N*D:(bkv+1)*N*D], ds, q[bh*M*D:(bh+1)*M*D], M, N, D, scale) // dK += dSᵀ Q · scale
		}
	}
}

// Run is forward then, when do is not nil, backward: the form in which checks
// and negative controls take an implementation (see package checks). It adds
// into dq, dk and dv like Backward. The sinks' gradient is s.SinkGrad's.
func (s Stages[T]) Run(o, lse, dq, dk, dv, q, k, v, do []T, c *Config) error {
	p := make([]T, c.B*c.Hq*c.M*c.N)
	if err := s.Forward(o, lse, p, q, k, v, c); err != nil {
		return err
	}
	if do != nil {
		s.Backward(dq, dk, dv, do, q, k, v, p, c)
	}
	return nil
}

// visibility evaluates the mask rule for every batch item, query and key
// (B, M, N), and rejects a valid query row that sees nothing.
func (s Stages[T]) visibility(c *Config) ([]bool, error) {
	vis := make([]bool, c.B*c.M*c.N)
	for b := range c.B {
		for i := range c.M {
			row := vis[(b*c.M+i)*c.N : (b*c.M+i+1)*c.N]
			any := false
			for j := range row {
				row[j] = s.Visible(c, b, i, j)
				any = any || row[j]
			}
			if !any && c.QueryValid(b, i) && c.Sinks == nil {
				return nil, &EmptyRowError{Batch: b, Row: i, Pos: c.QueryPos(b, i)}
			}
		}
	}
	return vis, nil
}

// Visibility returns the mask of batch item b as an (M, N) matrix, row i
// holding the keys query i may read.
func (c *Config) Visibility(b int) [][]bool {
	m := make([][]bool, c.M)
	for i := range m {
		m[i] = make([]bool, c.N)
		for j := range m[i] {
			m[i][j] = c.Visible(b, i, j)
		}
	}
	return m
}

// mustFit panics unless c is valid and every named slice has its length.
func mustFit(c *Config, lens map[string][2]int) {
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	for _, name := range []string{"o", "lse", "p", "q", "k", "v", "do", "dq", "dk", "dv"} {
		l, ok := lens[name]
		if ok && l[0] != l[1] {
			panic(fmt.Sprintf("attention: len(%s) = %d, want %d", name, l[0], l[1]))
		}
	}
}
