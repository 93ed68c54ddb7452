package oracle_test

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

// opCase is one input of the ops rope, rmsnorm, swiglu or block for the
// cross-check, with the outputs (names and shapes) both oracles must write.
type opCase struct {
	name string
	in   *safetensors.File
	out  map[string][]int
}

// scaled returns n normal numbers of standard deviation sd.
func scaled(r *rand.Rand, n int, sd float64) []float64 {
	x := normals(r, n)
	for i := range x {
		x[i] *= sd
	}
	return x
}

func sqrt(n int) float64 { return math.Sqrt(float64(n)) }

func prod(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// setMeta sets the metadata key to val unless val is "".
func setMeta(f *safetensors.File, key, val string) {
	if val != "" {
		f.Metadata[key] = val
	}
}

// num formats a metadata number; 0 means absent ("").
func num(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// leftPadPositions returns validity and positions [B*T] for rows that start
// with pads[b] padding tokens, positions counting real tokens only.
func leftPadPositions(pads []int, B, T int) (valid, pos []int64) {
	v := make([]bool, B*T)
	for b := range B {
		for t := range T {
			v[b*T+t] = t >= pads[b]
		}
	}
	return bits(v), int64s(attention.PositionsFromValidity(v, B, T))
}

// ---------------------------------------------------------------- rope

type ropeSpec struct {
	B, H, T, D       int
	pairing, scaling string  // "": key absent
	factor, base     float64 // 0: key absent
	pos              []int64 // nil: absent (position t)
	noGrad           bool
}

func (s ropeSpec) file(r *rand.Rand, name string) opCase {
	f := safetensors.New()
	shape := []int{s.B, s.H, s.T, s.D}
	f.SetF64("x", shape, scaled(r, prod(shape), 1.5))
	c := opCase{name: name, in: f, out: map[string][]int{"y": shape}}
	if !s.noGrad {
		f.SetF64("dy", shape, normals(r, prod(shape)))
		c.out["dx"] = shape
	}
	if s.pos != nil {
		f.SetI64("pos", []int{s.B, s.T}, s.pos)
	}
	setMeta(f, "pairing", s.pairing)
	setMeta(f, "scaling", s.scaling)
	setMeta(f, "factor", num(s.factor))
	setMeta(f, "base", num(s.base))
	f.Metadata["x-case"] = name
	return c
}

// randPos returns n positions in [lo, lo+span).
func randPos(r *rand.Rand, n int, lo, span int64) []int64 {
	p := make([]int64, n)
	for i := range p {
		p[i] = lo + r.Int64N(span)
	}
	return p
}

// ropeCases cover both pairings, the three scalings, default and explicit
// bases, positions up to ~1e5, left padding, D = 2 and D/2 odd.
func ropeCases(r *rand.Rand) []opCase {
	_, lpPos := leftPadPositions(pads(r, 3, 4), 3, 6)
	return []opCase{
		ropeSpec{B: 1, H: 2, T: 5, D: 8}.file(r, "half-default"),
		ropeSpec{B: 2, H: 3, T: 4, D: 6, pairing: "interleaved", pos: randPos(r, 8, 0, 50)}.file(r, "interleaved-pos-d6"),
		ropeSpec{B: 2, H: 1, T: 3, D: 10, pairing: "half", scaling: "linear", factor: 4, pos: randPos(r, 6, 30000, 70000)}.file(r, "half-linear-bigpos"),
		ropeSpec{B: 1, H: 2, T: 6, D: 16, pairing: "interleaved", scaling: "ntk", factor: 8, base: 500000, pos: randPos(r, 6, 0, 8192)}.file(r, "interleaved-ntk-theta5e5"),
		ropeSpec{B: 3, H: 1, T: 2, D: 4, scaling: "ntk", factor: 2.5, pos: randPos(r, 6, 90000, 20000)}.file(r, "half-ntk-bigpos"),
		ropeSpec{B: 3, H: 3, T: 7, D: 2, pairing: "interleaved", scaling: "linear", factor: 2, pos: randPos(r, 21, 0, 1000)}.file(r, "interleaved-linear-d2"),
		ropeSpec{B: 2, H: 2, T: 3, D: 12, scaling: "none", base: 1e6, noGrad: true}.file(r, "half-forward-only"),
		ropeSpec{B: 3, H: 2, T: 6, D: 8, pairing: "interleaved", pos: lpPos}.file(r, "interleaved-leftpad"),
		ropeSpec{B: 1, H: 5, T: 3, D: 14, pairing: "half", scaling: "linear", factor: 1.5, base: 1234.5}.file(r, "half-linear-odd-heads"),
	}
}

// ---------------------------------------------------------------- rmsnorm

type rmsSpec struct {
	shape  []int
	eps    string // "": key absent (1e-6)
	xScale float64
	noGrad bool
}

func (s rmsSpec) file(r *rand.Rand, name string) opCase {
	f := safetensors.New()
	D := s.shape[len(s.shape)-1]
	f.SetF64("x", s.shape, scaled(r, prod(s.shape), s.xScale))
	w := scaled(r, D, 0.3)
	for i := range w {
		w[i]++
	}
	f.SetF64("w", []int{D}, w)
	c := opCase{name: name, in: f, out: map[string][]int{"y": s.shape, "rstd": s.shape[:len(s.shape)-1]}}
	if !s.noGrad {
		f.SetF64("dy", s.shape, normals(r, prod(s.shape)))
		c.out["dx"], c.out["grad.w"] = s.shape, []int{D}
	}
	setMeta(f, "eps", s.eps)
	f.Metadata["x-case"] = name
	return c
}

// rmsCases cover 1-, 2- and 3-dimensional x, eps 0, an eps that dominates,
// large and small inputs, D = 1 and odd widths.
func rmsCases(r *rand.Rand) []opCase {
	return []opCase{
		rmsSpec{shape: []int{5, 8}, xScale: 1}.file(r, "rows"),
		rmsSpec{shape: []int{2, 3, 7}, eps: "1e-5", xScale: 1}.file(r, "3d-eps1e-5"),
		rmsSpec{shape: []int{6}, xScale: 2}.file(r, "vector"),
		rmsSpec{shape: []int{4, 5}, eps: "0", xScale: 1}.file(r, "eps0"),
		rmsSpec{shape: []int{5, 1}, eps: "10", xScale: 1}.file(r, "d1-eps10"),
		rmsSpec{shape: []int{3, 13}, xScale: 1e3}.file(r, "large-x-d13"),
		rmsSpec{shape: []int{4, 9}, xScale: 1e-3}.file(r, "small-x"),
		rmsSpec{shape: []int{2, 2, 4}, eps: "1e-6", xScale: 1, noGrad: true}.file(r, "forward-only"),
	}
}

// ---------------------------------------------------------------- swiglu

type swigluSpec struct {
	xShape []int
	F      int
	xScale float64
	noGrad bool
}

func (s swigluSpec) file(r *rand.Rand, name string) opCase {
	f := safetensors.New()
	D := s.xShape[len(s.xShape)-1]
	f.SetF64("x", s.xShape, scaled(r, prod(s.xShape), s.xScale))
	in, hid := 1/sqrt(D), 1/sqrt(s.F)
	f.SetF64("gate_proj", []int{s.F, D}, scaled(r, s.F*D, in))
	f.SetF64("up_proj", []int{s.F, D}, scaled(r, s.F*D, in))
	f.SetF64("down_proj", []int{D, s.F}, scaled(r, D*s.F, hid))
	c := opCase{name: name, in: f, out: map[string][]int{"y": s.xShape}}
	if !s.noGrad {
		f.SetF64("dy", s.xShape, normals(r, prod(s.xShape)))
		c.out["dx"] = s.xShape
		c.out["grad.gate_proj"], c.out["grad.up_proj"], c.out["grad.down_proj"] = []int{s.F, D}, []int{s.F, D}, []int{D, s.F}
	}
	f.Metadata["x-case"] = name
	return c
}

// swigluCases cover 2- and 3-dimensional x, n = D = F = 1, F < D, odd sizes
// and gate activations far into both tails of silu.
func swigluCases(r *rand.Rand) []opCase {
	return []opCase{
		swigluSpec{xShape: []int{4, 8}, F: 16, xScale: 1}.file(r, "n4-d8-f16"),
		swigluSpec{xShape: []int{2, 3, 5}, F: 7, xScale: 1}.file(r, "3d-d5-f7"),
		swigluSpec{xShape: []int{1, 1}, F: 1, xScale: 1}.file(r, "n1-d1-f1"),
		swigluSpec{xShape: []int{6, 6}, F: 11, xScale: 6}.file(r, "tails-d6-f11"),
		swigluSpec{xShape: []int{9, 3}, F: 2, xScale: 1}.file(r, "f-below-d"),
		swigluSpec{xShape: []int{3, 4}, F: 9, xScale: 1, noGrad: true}.file(r, "forward-only"),
	}
}

// ---------------------------------------------------------------- block

type blockSpec struct {
	B, T, Dim, F int
	Hq, Hkv, hd  int    // Hkv, hd 0: key absent (Hq, Dim/Hq)
	eps, theta   string // "": key absent (1e-6, 10000)
	causal       string // "": key absent (true)
	window       int
	pos, valid   []int64 // [B*T], nil: absent
	seg          []int64
	noGrad       bool
}

func (s blockSpec) file(r *rand.Rand, name string) opCase {
	f := safetensors.New()
	xs := []int{s.B, s.T, s.Dim}
	f.SetF64("x", xs, normals(r, prod(xs)))
	hkv, hd := s.Hkv, s.hd
	if hkv == 0 {
		hkv = s.Hq
	}
	if hd == 0 {
		hd = s.Dim / s.Hq
	}
	q, kv := s.Hq*hd, hkv*hd
	shapes := [][]int{{s.Dim}, {q, s.Dim}, {kv, s.Dim}, {kv, s.Dim}, {s.Dim, q}, {s.Dim}, {s.F, s.Dim}, {s.F, s.Dim}, {s.Dim, s.F}}
	c := opCase{name: name, in: f, out: map[string][]int{"y": xs}}
	for i, wn := range oracle.BlockWeightNames {
		sh := shapes[i]
		if len(sh) == 1 { // a norm weight, near 1
			w := scaled(r, sh[0], 0.2)
			for j := range w {
				w[j]++
			}
			f.SetF64(wn, sh, w)
		} else {
			f.SetF64(wn, sh, scaled(r, prod(sh), 1/sqrt(sh[1])))
		}
		if !s.noGrad {
			c.out["grad."+wn] = sh
		}
	}
	if !s.noGrad {
		f.SetF64("dy", xs, normals(r, prod(xs)))
		c.out["dx"] = xs
	}
	for _, t := range []struct {
		name string
		x    []int64
	}{{"pos", s.pos}, {"valid", s.valid}, {"seg", s.seg}} {
		if t.x != nil {
			f.SetI64(t.name, []int{s.B, s.T}, t.x)
		}
	}
	f.Metadata["num_attention_heads"] = strconv.Itoa(s.Hq)
	if s.Hkv != 0 {
		f.Metadata["num_key_value_heads"] = strconv.Itoa(s.Hkv)
	}
	if s.hd != 0 {
		f.Metadata["head_dim"] = strconv.Itoa(s.hd)
	}
	setMeta(f, "rms_norm_eps", s.eps)
	setMeta(f, "rope_theta", s.theta)
	setMeta(f, "causal", s.causal)
	if s.window != 0 {
		f.Metadata["window"] = strconv.Itoa(s.window)
	}
	f.Metadata["x-case"] = name
	return c
}

// packedTokens returns segment ids, positions restarting at 0 in every
// document, and validity for B rows of T tokens packing several documents,
// with trailing padding (segment -1).
func packedTokens(r *rand.Rand, B, T int) (seg, pos, valid []int64) {
	seg, pos, valid = make([]int64, B*T), make([]int64, B*T), make([]int64, B*T)
	for b := range B {
		end := T - r.IntN(3)
		id, p := int64(0), int64(0)
		for t := range T {
			if t > 0 && t < end && r.IntN(3) == 0 {
				id, p = id+1, 0
			}
			if t >= end {
				id, p = -1, 0
			} else {
				valid[b*T+t] = 1
			}
			seg[b*T+t], pos[b*T+t] = id, p
			p++
		}
	}
	return seg, pos, valid
}

// blockCases cover MHA, GQA and MQA; head_dim given (Hq·hd ≠ Dim) and
// defaulted; left padding with positions counting real tokens; right
// padding without causality; packed documents; sliding windows; large
// positions; rope_theta, rms_norm_eps (0 included) and a forward-only run.
func blockCases(r *rand.Rand) []opCase {
	lpValid, lpPos := leftPadPositions(pads(r, 3, 4), 3, 6)
	seg, segPos, segValid := packedTokens(r, 2, 9)
	rpValid := []int64{1, 1, 1, 0, 0, 1, 1, 1, 1, 0}
	bigPos := make([]int64, 2*4)
	for b := range 2 {
		off := 1000 + r.Int64N(50000)
		for t := range 4 {
			bigPos[b*4+t] = off + int64(t)
		}
	}
	oddValid, oddPos := leftPadPositions([]int{0, 2}, 2, 4)
	return []opCase{
		blockSpec{B: 1, T: 5, Dim: 8, F: 12, Hq: 2}.file(r, "mha-default"),
		blockSpec{B: 3, T: 6, Dim: 10, F: 16, Hq: 4, Hkv: 2, hd: 6, eps: "1e-5", pos: lpPos, valid: lpValid}.file(r, "gqa-leftpad-hd6"),
		blockSpec{B: 2, T: 9, Dim: 12, F: 20, Hq: 3, Hkv: 1, pos: segPos, valid: segValid, seg: seg}.file(r, "mqa-packed"),
		blockSpec{B: 2, T: 8, Dim: 16, F: 24, Hq: 4, Hkv: 2, theta: "500000", window: 3, causal: "true"}.file(r, "gqa-window-theta5e5"),
		blockSpec{B: 2, T: 5, Dim: 6, F: 10, Hq: 3, Hkv: 3, causal: "false", valid: rpValid}.file(r, "mha-noncausal-rightpad-hd2"),
		blockSpec{B: 2, T: 4, Dim: 8, F: 8, Hq: 2, Hkv: 1, hd: 8, window: 3, pos: bigPos}.file(r, "mqa-bigpos-window"),
		blockSpec{B: 1, T: 3, Dim: 9, F: 5, Hq: 6, Hkv: 3, hd: 2, eps: "0", noGrad: true}.file(r, "gqa-forward-only-eps0"),
		blockSpec{B: 2, T: 4, Dim: 7, F: 3, Hq: 2, Hkv: 2, hd: 4, pos: oddPos, valid: oddValid}.file(r, "mha-dim7-leftpad"),
	}
}
