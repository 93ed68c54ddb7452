package conform

import (
	"errors"
	"fmt"

	"github.com/attnlab/attnlab/attention"
)

// RunFunc is attention in the form package checks takes an implementation:
// forward into o and lse, then, when do is not nil, backward added into
// dq, dk and dv (attention.Stages.Run, attention.FlashRun).
type RunFunc[T attention.Float] func(o, lse, dq, dk, dv, q, k, v, do []T, c *attention.Config) error

// Func is a Go implementation given as RunFuncs: attnlab's own kernels, a
// user's kernel wrapped to that form, or a registered fault. Its masks are
// attnlab's (positions, validity, segments, window); it computes lse and
// gradients.
type Func struct {
	Name           string
	Run64          RunFunc[float64]
	Run32          RunFunc[float32] // nil: float64 only
	NoLSE, NoGrads bool             // declare less than it computes
	// SinkGrad adds the sinks' gradient into dsinks from the forward's o
	// and lse (attention.SinkGrad); nil: the Func takes no sinks, softcap
	// or ALiBi (it declares none of them).
	SinkGrad func(dsinks, o, lse, do []float64, c *attention.Config)
}

// Reference is attnlab's reference attention, float64 and float32.
func Reference() *Func {
	return &Func{Name: "attnlab reference", Run64: attention.Reference[float64]().Run, Run32: attention.Reference[float32]().Run,
		SinkGrad: attention.SinkGrad[float64]}
}

// Fused is attnlab's fused (FlashAttention-style) kernel.
func Fused() *Func {
	return &Func{Name: "attnlab fused", Run64: attention.FlashRun[float64], Run32: attention.FlashRun[float32], SinkGrad: attention.SinkGrad[float64]}
}

// Capabilities of a Func.
func (f *Func) Capabilities() Capabilities {
	c := Capabilities{Name: f.Name, Version: "attnlab", DTypes: []string{"float64"}, Gradients: !f.NoGrads, LSE: !f.NoLSE, GQA: true,
		Masks: []string{MaskCausal, MaskPositions, MaskValidity, MaskSegments, MaskWindow}, KVCache: true, Scale: true,
		Conventions: true, Accumulates: true, Sinks: f.SinkGrad != nil, Softcap: f.SinkGrad != nil, Alibi: f.SinkGrad != nil}
	if f.Run32 != nil {
		c.DTypes = append(c.DTypes, "float32")
	}
	return c
}

// Attention runs the request.
func (f *Func) Attention(r *Request) (*Response, error) {
	if r.Mask != nil {
		return nil, errors.New("conform: a Func takes positions, not a boolean mask")
	}
	if v := r.undeclared(f.Capabilities()); v != "" {
		return nil, fmt.Errorf("conform: %s does not declare %s", f.Name, v)
	}
	c := r.Config()
	if r.Convention != "" {
		conv, err := attention.ParseConvention(r.Convention)
		if err != nil {
			return nil, err
		}
		c.Convention = conv
	}
	if err := c.Validate(); err != nil {
		return &Response{Err: err.Error()}, nil
	}
	if r.DType == "float32" {
		if f.Run32 == nil {
			return nil, fmt.Errorf("conform: %s has no float32 path", f.Name)
		}
		return run(f.Run32, f.SinkGrad, r, c)
	}
	return run(f.Run64, f.SinkGrad, r, c)
}

func run[T attention.Float](fn RunFunc[T], sinkGrad func(dsinks, o, lse, do []float64, c *attention.Config), r *Request, c *attention.Config) (*Response, error) {
	conv := func(x []float64) []T {
		if x == nil {
			return nil
		}
		y := make([]T, len(x))
		for i, v := range x {
			y[i] = T(v)
		}
		return y
	}
	back := func(x []T) []float64 {
		if x == nil {
			return nil
		}
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v)
		}
		return y
	}
	o, lse := make([]T, r.B*r.Hq*r.M*r.Dv), make([]T, r.B*r.Hq*r.M)
	var dq, dk, dv []T
	if r.DO != nil {
		dq, dk, dv = make([]T, len(r.Q)), make([]T, len(r.K)), make([]T, len(r.V))
		for _, p := range []struct {
			dst []T
			src []float64
		}{{dq, r.DQ0}, {dk, r.DK0}, {dv, r.DV0}} {
			for i := range p.src { // the gradients to add into
				p.dst[i] = T(p.src[i])
			}
		}
	}
	if err := fn(o, lse, dq, dk, dv, conv(r.Q), conv(r.K), conv(r.V), conv(r.DO), c); err != nil {
		return &Response{Err: err.Error()}, nil // the implementation refused: an empty row, say
	}
	resp := &Response{O: back(o), DQ: back(dq), DK: back(dk), DV: back(dv)}
	if c.Sinks != nil && r.DO != nil {
		// dσ from the forward's answers, as attention.SinkGrad's contract
		resp.DSinks = make([]float64, r.Hq)
		sinkGrad(resp.DSinks, resp.O, back(lse), r.DO, c)
	}
	if r.WantLSE {
		resp.LSE = back(lse)
	}
	return resp, nil
}

// Config is the attention configuration of the request: the mask rule of
// attnlab (positions decide; by default a cache of N−M keys before the
// chunk).
func (r *Request) Config() *attention.Config {
	c := &attention.Config{B: r.B, Hq: r.Hq, Hkv: r.Hkv, M: r.M, N: r.N, D: r.D, Dv: r.Dv, Scale: r.Scale,
		Causal: r.Causal, Window: r.Window, Softcap: r.Softcap, Alibi: r.Alibi, Sinks: r.Sinks}
	ints := func(x []int64) []int {
		if x == nil {
			return nil
		}
		y := make([]int, len(x))
		for i, v := range x {
			y[i] = int(v)
		}
		return y
	}
	bools := func(x []int64) []bool {
		if x == nil {
			return nil
		}
		y := make([]bool, len(x))
		for i, v := range x {
			y[i] = v != 0
		}
		return y
	}
	c.QPos, c.KPos, c.QSeg, c.KSeg = ints(r.QPos), ints(r.KPos), ints(r.QSeg), ints(r.KSeg)
	c.QValid, c.KValid = bools(r.QValid), bools(r.KValid)
	return c
}
