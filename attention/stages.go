package attention

import (
	"fmt"
	"math"
)

// The stages of the reference attention for one (batch item, query head)
// pair. Each is one equation of the derivation, written as the plainest loop
// that computes it. Matrices are row-major: q is (m, d), k is (n, d), v is
// (n, dv), s, p, dp and ds are (m, n), o and do are (m, dv).

// KVHead returns the key/value head that query head h reads when hq query
// heads share hkv key/value heads in contiguous groups (Hugging Face's
// repeat_kv, llama2.c's h / kv_mul):
//
//	group = hq / hkv,  kvh = h / group
func KVHead(h, hq, hkv int) int { return h / (hq / hkv) }

// Scores computes the scaled dot products
//
//	S = Q Kᵀ · scale
func Scores[T Float](s, q, k []T, m, n, d int, scale T) {
	for i := range m {
		qi := q[i*d : (i+1)*d]
		for j := range n {
			kj := k[j*d : (j+1)*d]
			var dot T
			for x := range d {
				dot += qi[x] * kj[x]
			}
			s[i*n+j] = dot * scale
		}
	}
}

// Softmax computes, row by row, the masked softmax and its log-sum-exp,
// with the sink logit σ (−Inf: no sink) in every row's denominator:
//
//	P[i,j] = exp(S[i,j] - lse[i]) if vis[i,j], else 0
//	lse[i] = log(Σ_{j visible} exp(S[i,j]) + exp(σ))
//
// Masking is a select: hidden keys are skipped, never given a -inf or -1e4
// score. A row with no visible key gets P = 0 and lse = σ, which is +Inf
// without a sink (a padding query), so that exp(S - lse) recomputes the
// same zeros.
func Softmax[T Float](p, lse, s []T, vis []bool, m, n int, sink T) {
	negInf := T(math.Inf(-1))
	for i := range m {
		si, pi, vi := s[i*n:(i+1)*n], p[i*n:(i+1)*n], vis[i*n:(i+1)*n]
		// pass 1: the row maximum over visible keys and the sink; subtracting
		// it keeps every exponent <= 0, so exp never overflows.
		mx, any := sink, false
		for j, ok := range vi {
			if ok {
				any = true
				mx = max(mx, si[j])
			}
		}
		if !any {
			clear(pi)
			lse[i] = sink
			if sink == negInf {
				lse[i] = T(math.Inf(1))
			}
			continue
		}
		// pass 2: exponentials and their sum, the sink's included
		var sum T
		if sink != negInf {
			sum = T(math.Exp(float64(sink - mx)))
		}
		for j, ok := range vi {
			pi[j] = 0
			if ok {
				e := T(math.Exp(float64(si[j] - mx)))
				pi[j] = e
				sum += e
			}
		}
		// pass 3: normalise; the max comes back in the saved log-sum-exp
		inv := 1 / sum
		for j := range pi {
			pi[j] *= inv
		}
		lse[i] = mx + T(math.Log(float64(sum)))
	}
}

// Logits turns the scaled scores s (m, n) of batch item b and query head h
// into the logits the mask and softmax see (Config.Logit): softcap, then
// ALiBi's distance bias
//
//	s ← c · tanh(s / c)    s ← s − slope_h · |qpos − kpos|
//
// by logical positions, so that a chunk after a cache and a left-padded
// row get the bias of the full pass.
func Logits[T Float](s []T, c *Config, b, h, m, n int) {
	if c.Softcap == 0 && c.Alibi == nil {
		return
	}
	for i := range m {
		for j := range n {
			s[i*n+j] = T(c.Logit(float64(s[i*n+j]), b, h, i, j))
		}
	}
}

// GradLogits takes the gradient of the logits back to the scaled scores s
// (m, n) of batch item b and query head h, as they were before Logits.
// ALiBi adds a constant and passes the
// gradient unchanged; softcap multiplies it by its derivative:
//
//	forward was t = c · tanh(s / c), so  dS = dT ⊙ (1 − tanh²(s / c))
//
// A hidden score has dT = 0 and keeps it.
func GradLogits[T Float](ds, s []T, c *Config, b, h, m, n int) {
	if c.Softcap == 0 {
		return
	}
	for x := range m * n {
		t := math.Tanh(float64(s[x]) / c.Softcap)
		ds[x] *= T(1 - t*t)
	}
}

// SinkGrad adds the gradient of the sink logits into dsinks [Hq], given
// the forward's O and lse and dO. The sink takes the weight
// P_sink = exp(σ − lse) of each row and has no value row, so
//
//	∂Pᵢⱼ/∂σ = −Pᵢⱼ · P_sink,i,  ∂Oᵢ/∂σ = −P_sink,i · Oᵢ
//	dσ_h = −Σ_{b,i} P_sink,i · (dOᵢ · Oᵢ) = −Σ_{b,i} P_sink,i · rowsum(P ⊙ dP)ᵢ
//
// summed over batch items and rows. A row without a sink or key (lse =
// +Inf) and an empty row (O = 0) add nothing. It works from any
// implementation's O and lse; it panics if c has no sinks or a slice has
// the wrong length.
func SinkGrad[T Float](dsinks, o, lse, do []T, c *Config) {
	if c.Sinks == nil {
		panic("attention: SinkGrad without sinks")
	}
	mustFit(c, map[string][2]int{"o": {len(o), c.B * c.Hq * c.M * c.Dv}, "lse": {len(lse), c.B * c.Hq * c.M},
		"do": {len(do), c.B * c.Hq * c.M * c.Dv}})
	if len(dsinks) != c.Hq {
		panic(fmt.Sprintf("attention: len(dsinks) = %d, want Hq = %d", len(dsinks), c.Hq))
	}
	M, Dv := c.M, c.Dv
	for b := range c.B {
		for h := range c.Hq {
			var g float64
			for i := range M {
				at := ((b*c.Hq+h)*M + i) * Dv
				var delta float64
				for x := range Dv {
					delta += float64(do[at+x]) * float64(o[at+x])
				}
				if delta != 0 {
					g -= math.Exp(c.Sinks[h]-float64(lse[(b*c.Hq+h)*M+i])) * delta
				}
			}
			dsinks[h] += T(g)
		}
	}
}

// Mix computes the output as the probability-weighted sum of values
//
//	O = P V
func Mix[T Float](o, p, v []T, m, n, dv int) {
	for i := range m {
		oi := o[i*dv : (i+1)*dv]
		clear(oi)
		for j := range n {
			pij := p[i*n+j]
			if pij == 0 {
				continue
			}
			vj := v[j*dv : (j+1)*dv]
			for x := range dv {
				oi[x] += pij * vj[x]
			}
		}
	}
}

// GradV adds the gradient of the values, the content path:
//
//	forward was O = P V, so  dV += Pᵀ dO
//
// Every value collects gradient from each query that read it, weighted by
// how much it was read.
func GradV[T Float](dv, p, do []T, m, n, dvd int) {
	for j := range n {
		dvj := dv[j*dvd : (j+1)*dvd]
		for i := range m {
			pij := p[i*n+j]
			doi := do[i*dvd : (i+1)*dvd]
			for x := range dvd {
				dvj[x] += pij * doi[x]
			}
		}
	}
}

// GradP computes the gradient of the probabilities:
//
//	forward was O = P V, so  dP = dO Vᵀ
func GradP[T Float](dp, do, v []T, m, n, dvd int) {
	for i := range m {
		doi := do[i*dvd : (i+1)*dvd]
		for j := range n {
			vj := v[j*dvd : (j+1)*dvd]
			var dot T
			for x := range dvd {
				dot += doi[x] * vj[x]
			}
			dp[i*n+j] = dot
		}
	}
}

// GradS computes the gradient of the scores through the softmax without
// building its Jacobian diag(p) - p pᵀ:
//
//	dS = P ⊙ (dP − rowsum(P ⊙ dP))
//
// The subtracted row sum makes every row of dS sum to zero, as it must:
// adding a constant to a row of S does not change the softmax. Hidden keys
// have P = 0 and so get exactly zero.
func GradS[T Float](ds, p, dp []T, m, n int) {
	for i := range m {
		pi, dpi, dsi := p[i*n:(i+1)*n], dp[i*n:(i+1)*n], ds[i*n:(i+1)*n]
		var delta T // rowsum(P ⊙ dP), which also equals rowsum(dO ⊙ O)
		for j := range pi {
			delta += pi[j] * dpi[j]
		}
		for j := range pi {
			dsi[j] = pi[j] * (dpi[j] - delta)
		}
	}
}

// GradQ adds the gradient of the queries, the selection path:
//
//	forward was S = Q Kᵀ · scale, so  dQ += dS K · scale
func GradQ[T Float](dq, ds, k []T, m, n, d int, scale T) {
	for i := range m {
		dqi := dq[i*d : (i+1)*d]
		for j := range n {
			g := ds[i*n+j] * scale
			if g == 0 {
				continue
			}
			kj := k[j*d : (j+1)*d]
			for x := range d {
				dqi[x] += g * kj[x]
			}
		}
	}
}

// GradK adds the gradient of the keys:
//
//	forward was S = Q Kᵀ · scale, so  dK += dSᵀ Q · scale
func GradK[T Float](dk, ds, q []T, m, n, d int, scale T) {
	for j := range n {
		dkj := dk[j*d : (j+1)*d]
		for i := range m {
			g := ds[i*n+j] * scale
			if g == 0 {
				continue
			}
			qi := q[i*d : (i+1)*d]
			for x := range d {
				dkj[x] += g * qi[x]
			}
		}
	}
}
