package conform

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// emul is attention of chosen semantics, written plainly as a kernel
// author's numpy would be: how the causal flag aligns, which K/V head a
// query head reads, the default scale, what an empty row gives, the
// window's width, the dtype it computes in, and a deliberately broken
// backward or forward. conform must tell each of these apart.
type emul struct {
	caps   Capabilities
	align  string              // AlignPosition (DESIGN §2), AlignTopLeft; "top-left-decode-off": top-left, no mask at M = 1; "slots": by slot index, positions ignored; "none": the causal flag ignored
	gqa    string              // GQAContiguous or GQAInterleaved
	scale  func(D int) float64 // the default scale; nil: 1/√D
	empty  string              // EmptyError, EmptyZero, EmptyNaN, EmptyUniform
	wide   bool                // a window of W sees W + 1 keys
	wider  bool                // a window of W sees W + 2 keys
	f32    bool                // computes in float32, whatever it is asked
	out32  bool                // computes in float64 and rounds its answers to float32 when asked float32
	jitter bool                // its output moves in the last bits from call to call (a reduction in no fixed order)
	fault  string              // "no-rowsum": dS = P ⊙ dP; "fwd-1pct": O 1 % off; "fwd-1e-6": O 1e-6 off
	// emptyBack "uniform": a zero empty row whose backward is that of
	// uniform weights (O zeroed after the softmax, the backward left as it was)
	emptyBack string
	refuse    func(r *Request) bool // requests it refuses (an error response)
	// emptyAt, when set, says what an empty row i gives, overriding empty
	emptyAt func(i int) string
	// maskBias, when not 0, masks by setting the score to it
	// (masked_fill with a finite value) instead of leaving the key out
	maskBias float64
	rnd      *rand.Rand // the jitter's
}

// emulCaps are the capabilities of a plain implementation: float64,
// gradients, lse, GQA, positions and the rest, a cache, a scale.
func emulCaps(name string) Capabilities {
	return Capabilities{Name: name, Version: "1", DTypes: []string{"float64", "float32"}, Gradients: true, LSE: true, GQA: true,
		Masks: []string{MaskCausal, MaskPositions, MaskValidity, MaskSegments, MaskWindow}, KVCache: true, Scale: true}
}

func (e *emul) Capabilities() Capabilities { return e.caps }

func (e *emul) round(x float64) float64 {
	if e.f32 {
		return float64(float32(x))
	}
	return x
}

// undeclared names the first thing r asks that the capabilities do not
// declare, "" for none: conform never sends such a request (the protocol
// document says so), so an emul answers one with a failure.
func (e *emul) undeclared(r *Request) string {
	c := e.caps
	for _, u := range []struct {
		sent     bool
		declared bool
		what     string
	}{
		{true, c.HasDType(r.DType), "dtype " + r.DType},
		{r.DO != nil, c.Gradients, "do (gradients)"},
		{r.WantLSE, c.LSE, "want_lse"},
		{r.Hkv != r.Hq, c.GQA, "Hkv ≠ Hq (gqa)"},
		{r.M != r.N, c.KVCache, "M ≠ N (kv_cache)"},
		{r.Scale != 0, c.Scale, "a scale"},
		{r.Mask != nil, c.Has(MaskBool), "a boolean mask"},
		{r.QPos != nil || r.KPos != nil, c.Has(MaskPositions), "positions"},
		{r.QValid != nil || r.KValid != nil, c.Has(MaskValidity), "validity"},
		{r.QSeg != nil || r.KSeg != nil, c.Has(MaskSegments), "segments"},
		{r.Window != 0, c.Has(MaskWindow), "a window"},
		{r.Causal, c.Has(MaskCausal) || c.Has(MaskPositions), "the causal flag"},
		{r.Convention != "", c.Conventions, "a convention"},
		{r.DQ0 != nil || r.DK0 != nil || r.DV0 != nil, c.Accumulates, "gradients to add into"},
		{r.Sinks != nil, c.Sinks, "sinks"},
		{r.Softcap != 0, c.Softcap, "softcap"},
		{r.Alibi != nil, c.Alibi, "alibi_slopes"},
	} {
		if u.sent && !u.declared {
			return u.what
		}
	}
	return ""
}

func (e *emul) Attention(r *Request) (*Response, error) {
	if u := e.undeclared(r); u != "" {
		return nil, fmt.Errorf("%s: a request with %s, which it does not declare", e.caps.Name, u)
	}
	if e.refuse != nil && e.refuse(r) {
		return &Response{Err: "refused"}, nil
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
		if e.scale != nil {
			scale = e.scale(r.D)
		}
	}
	group := r.Hq / r.Hkv
	kvOf := func(h int) int {
		if e.gqa == GQAInterleaved {
			return h % r.Hkv
		}
		return h / group
	}
	at := func(x []int64, b, n, i int, def int) int {
		if x == nil {
			return def
		}
		return int(x[b*n+i])
	}
	visible := func(b, i, j int) bool {
		if at(r.KValid, b, r.N, j, 1) == 0 {
			return false
		}
		if r.Mask != nil {
			return r.Mask[(b*r.M+i)*r.N+j]
		}
		qp, kp := at(r.QPos, b, r.M, i, r.N-r.M+i), at(r.KPos, b, r.N, j, j)
		if e.align == "slots" {
			qp, kp = r.N-r.M+i, j
		}
		if r.Causal && e.align != "none" {
			switch e.align {
			case AlignTopLeft:
				if j > i {
					return false
				}
			case "top-left-decode-off":
				if r.M > 1 && j > i {
					return false
				}
			default:
				if kp > qp {
					return false
				}
			}
		}
		if r.QSeg != nil && r.KSeg[b*r.N+j] != r.QSeg[b*r.M+i] {
			return false
		}
		if r.Window > 0 {
			w := r.Window
			if e.wide {
				w++
			}
			if e.wider {
				w += 2
			}
			if qp-kp >= w {
				return false
			}
		}
		return true
	}
	out := &Response{O: make([]float64, r.B*r.Hq*r.M*r.Dv), LSE: make([]float64, r.B*r.Hq*r.M)}
	back := r.DO != nil
	if back {
		out.DQ, out.DK, out.DV = make([]float64, len(r.Q)), make([]float64, len(r.K)), make([]float64, len(r.V))
	}
	p := make([]float64, r.N)
	for b := range r.B {
		for h := range r.Hq {
			g := b*r.Hkv + kvOf(h)
			for i := range r.M {
				bhi := (b*r.Hq+h)*r.M + i
				q, o := r.Q[bhi*r.D:(bhi+1)*r.D], out.O[bhi*r.Dv:(bhi+1)*r.Dv]
				if at(r.QValid, b, r.M, i, 1) == 0 {
					out.LSE[bhi] = math.Inf(-1)
					continue // padding: zero output, no gradient
				}
				mx, any := math.Inf(-1), false
				for j := range r.N {
					p[j] = math.Inf(-1)
					vis := visible(b, i, j)
					if !vis && e.maskBias == 0 {
						continue
					}
					var s float64
					for d := range r.D {
						s = e.round(s + q[d]*r.K[(g*r.N+j)*r.D+d])
					}
					p[j] = e.round(s * scale)
					if !vis {
						p[j] = e.maskBias
					}
					any = any || vis
					mx = max(mx, p[j])
				}
				empty := e.empty
				if e.emptyAt != nil {
					empty = e.emptyAt(i)
				}
				if !any && e.maskBias == 0 {
					if empty == EmptyZero && e.emptyBack == EmptyUniform && back {
						for j := range r.N {
							for d := range o {
								out.DV[(g*r.N+j)*r.Dv+d] += r.DO[bhi*r.Dv+d] / float64(r.N)
							}
						}
					}
					switch empty {
					case EmptyError, "":
						return &Response{Err: fmt.Sprintf("batch %d row %d: no visible key", b, i)}, nil
					case EmptyNaN:
						for d := range o {
							o[d] = math.NaN()
						}
						out.LSE[bhi] = math.NaN()
						// the NaN weights poison the backward of a loss on
						// the row: dq of the row, and every dk, dv it reads
						if back && !allOf(r.DO[bhi*r.Dv:(bhi+1)*r.Dv], func(x float64) bool { return x == 0 }) {
							for d := range r.D {
								out.DQ[bhi*r.D+d] = math.NaN()
							}
							for x := range r.N * r.D {
								out.DK[g*r.N*r.D+x] = math.NaN()
							}
							for x := range r.N * r.Dv {
								out.DV[g*r.N*r.Dv+x] = math.NaN()
							}
						}
					case EmptyUniform: // an additive -1e9 mask: every key weighs 1/N
						for j := range r.N {
							for d := range o {
								o[d] += r.V[(g*r.N+j)*r.Dv+d] / float64(r.N)
								if back {
									out.DV[(g*r.N+j)*r.Dv+d] += r.DO[bhi*r.Dv+d] / float64(r.N)
								}
							}
						}
					}
					continue
				}
				var sum float64
				for j := range r.N {
					p[j] = e.round(math.Exp(p[j] - mx))
					sum = e.round(sum + p[j])
				}
				out.LSE[bhi] = mx + math.Log(sum)
				for j := range r.N {
					p[j] = e.round(p[j] / sum)
					for d := range o {
						o[d] = e.round(o[d] + p[j]*r.V[(g*r.N+j)*r.Dv+d])
					}
				}
				switch e.fault {
				case "fwd-1pct":
					for d := range o {
						o[d] *= 1.01
					}
				case "fwd-1e-6":
					for d := range o {
						o[d] *= 1 + 1e-6
					}
				}
				if !back {
					continue
				}
				dO := r.DO[bhi*r.Dv : (bhi+1)*r.Dv]
				dp := make([]float64, r.N)
				var rowsum float64
				for j := range r.N {
					for d := range dO {
						dp[j] += dO[d] * r.V[(g*r.N+j)*r.Dv+d]
						out.DV[(g*r.N+j)*r.Dv+d] = e.round(out.DV[(g*r.N+j)*r.Dv+d] + p[j]*dO[d])
					}
					rowsum += p[j] * dp[j]
				}
				if e.fault == "no-rowsum" {
					rowsum = 0
				}
				for j := range r.N {
					ds := p[j] * (dp[j] - rowsum) * scale
					for d := range r.D {
						out.DQ[bhi*r.D+d] = e.round(out.DQ[bhi*r.D+d] + ds*r.K[(g*r.N+j)*r.D+d])
						out.DK[(g*r.N+j)*r.D+d] = e.round(out.DK[(g*r.N+j)*r.D+d] + ds*q[d])
					}
				}
			}
		}
	}
	if e.caps.Accumulates && back {
		// it adds its gradients into those it is given
		for _, p := range []struct{ dst, src []float64 }{{out.DQ, r.DQ0}, {out.DK, r.DK0}, {out.DV, r.DV0}} {
			for i := range p.src {
				p.dst[i] += p.src[i]
			}
		}
	}
	if e.jitter {
		if e.rnd == nil {
			e.rnd = rand.New(rand.NewPCG(1, 2))
		}
		for i := range out.O {
			out.O[i] = e.round(out.O[i] * (1 + (2*e.rnd.Float64()-1)*0x1p-23))
		}
	}
	if e.out32 && r.DType == "float32" {
		for _, x := range [][]float64{out.O, out.LSE, out.DQ, out.DK, out.DV} {
			for i := range x {
				x[i] = float64(float32(x[i]))
			}
		}
	}
	if !r.WantLSE {
		out.LSE = nil
	}
	return out, nil
}
