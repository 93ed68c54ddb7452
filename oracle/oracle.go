// Package oracle runs attnlab's reference implementations on tensors read
// from a safetensors file and returns outputs and gradients as a safetensors
// file: the interface by which other implementations (PyTorch, a kernel in
// another language) are compared with attnlab, and attnlab with them.
package oracle

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/safetensors"
)

// Ops lists the operations Run knows.
var Ops = []string{"attention", "rope", "rmsnorm", "swiglu", "block", "decoder"}

// Run runs op on the tensors of in, in the given dtype ("float64" or
// "float32"; "" means float64). Every problem with the input is an error
// naming the tensor or metadata key.
func Run(op string, in *safetensors.File, dtype string) (*safetensors.File, error) {
	if dtype == "" {
		dtype = "float64"
	}
	if dtype != "float64" && dtype != "float32" {
		return nil, fmt.Errorf("unknown dtype %q (want float64 or float32)", dtype)
	}
	if err := CheckFinite(in); err != nil {
		return nil, err
	}
	if dtype == "float32" {
		if err := checkRange32(in); err != nil {
			return nil, err
		}
	}
	var out *safetensors.File
	var err error
	switch op {
	case "attention":
		out, err = runAttention(in, dtype)
	case "rope":
		out, err = runRoPE(in, dtype)
	case "rmsnorm":
		out, err = runRMSNorm(in, dtype)
	case "swiglu":
		out, err = runSwiGLU(in, dtype)
	case "block":
		out, err = runBlock(in, dtype)
	case "decoder":
		out, err = runDecoder(in, dtype)
	default:
		return nil, fmt.Errorf("unknown op %q (known: %s)", op, strings.Join(Ops, ", "))
	}
	if err != nil {
		return nil, err
	}
	if err := checkOutputs(op, in, out, dtype); err != nil {
		return nil, err
	}
	return out, nil
}

// checkOutputs returns an error naming the first output tensor that holds
// a NaN or an infinity: the inputs are finite (CheckFinite), so the
// computation overflowed in dtype, and an answer holding NaN would say
// nothing about the implementation compared with it. The one non-finite
// value that is an answer is attention's lse = +Inf of a padding query row.
func checkOutputs(op string, in, out *safetensors.File, dtype string) error {
	padding := func(name string, i int) bool { return false }
	if op == "attention" && in.Has("q_valid") {
		valid, vs, _ := in.Int64("q_valid") // [B, M], checked by AttentionInputs
		qs := in.Tensors["q"].Shape         // [B, Hq, M, D]
		padding = func(name string, i int) bool {
			b, m := i/(qs[1]*qs[2]), i%qs[2]
			return name == "lse" && valid[b*vs[1]+m] == 0
		}
	}
	for _, name := range out.Names() {
		if !out.Tensors[name].DType.IsFloat() {
			continue
		}
		x, shape, err := out.Float64(name)
		if err != nil {
			return err
		}
		for i := vec.NonFinite(x); i >= 0; {
			if !(math.IsInf(x[i], 1) && padding(name, i)) {
				return fmt.Errorf("oracle: output tensor %q holds %v at element %d (shape %v): the %s computation overflowed for finite inputs",
					name, x[i], i, shape, dtype)
			}
			j := vec.NonFinite(x[i+1:])
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return nil
}

// AttentionInputs reads the attention configuration and tensors from in.
func AttentionInputs(in *safetensors.File) (c *attention.Config, q, k, v, do []float64, err error) {
	if err := checkAttentionNames(in); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	q, qs, err := tensor4(in, "q")
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	k, ks, err := tensor4(in, "k")
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	v, vs, err := tensor4(in, "v")
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	c = &attention.Config{B: qs[0], Hq: qs[1], M: qs[2], D: qs[3], Hkv: ks[1], N: ks[2], Dv: vs[3]}
	switch {
	case ks[0] != c.B || ks[3] != c.D:
		return nil, nil, nil, nil, nil, fmt.Errorf("tensor \"k\": shape %v, want [%d Hkv N %d] to match q %v", ks, c.B, c.D, qs)
	case vs[0] != c.B || vs[1] != c.Hkv || vs[2] != c.N:
		return nil, nil, nil, nil, nil, fmt.Errorf("tensor \"v\": shape %v, want [%d %d %d Dv] to match k %v", vs, c.B, c.Hkv, c.N, ks)
	case c.Hq%c.Hkv != 0:
		return nil, nil, nil, nil, nil, fmt.Errorf("tensor \"k\": %d heads do not divide the %d heads of q", c.Hkv, c.Hq)
	}
	if in.Has("do") {
		var ds []int
		do, ds, err = tensor4(in, "do")
		if err != nil {
			return nil, nil, nil, nil, nil, err
		}
		if want := []int{c.B, c.Hq, c.M, c.Dv}; !slices.Equal(ds, want) {
			return nil, nil, nil, nil, nil, fmt.Errorf("tensor \"do\": shape %v, want %v (the shape of o)", ds, want)
		}
	}
	for _, s := range []struct {
		name string
		rows int
		ints *[]int
		bits *[]bool
	}{
		{"q_pos", c.M, &c.QPos, nil}, {"k_pos", c.N, &c.KPos, nil},
		{"q_valid", c.M, nil, &c.QValid}, {"k_valid", c.N, nil, &c.KValid},
		{"q_seg", c.M, &c.QSeg, nil}, {"k_seg", c.N, &c.KSeg, nil},
	} {
		if !in.Has(s.name) {
			continue
		}
		x, shape, err := in.Int64(s.name)
		if err != nil {
			return nil, nil, nil, nil, nil, err
		}
		if want := []int{c.B, s.rows}; !slices.Equal(shape, want) {
			return nil, nil, nil, nil, nil, fmt.Errorf("tensor %q: shape %v, want %v", s.name, shape, want)
		}
		if s.ints != nil {
			*s.ints = make([]int, len(x))
			for i, e := range x {
				(*s.ints)[i] = int(e)
			}
		} else {
			*s.bits = make([]bool, len(x))
			for i, e := range x {
				if e != 0 && e != 1 {
					return nil, nil, nil, nil, nil, fmt.Errorf("tensor %q: element %d is %d, want 0 or 1", s.name, i, e)
				}
				(*s.bits)[i] = e == 1
			}
		}
	}
	for _, h := range []struct {
		name string
		dst  *[]float64
	}{{"sinks", &c.Sinks}, {"alibi_slopes", &c.Alibi}} {
		if !in.Has(h.name) {
			continue
		}
		x, shape, err := in.Float64(h.name)
		if err != nil {
			return nil, nil, nil, nil, nil, err
		}
		if want := []int{c.Hq}; !slices.Equal(shape, want) {
			return nil, nil, nil, nil, nil, fmt.Errorf("tensor %q: shape %v, want %v (one per query head)", h.name, shape, want)
		}
		*h.dst = x
	}
	if err := readMeta(in.Metadata, c); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	return c, q, k, v, do, nil
}

// AttentionNames are the tensor names op attention reads.
var AttentionNames = []string{"q", "k", "v", "do", "q_pos", "k_pos", "q_valid", "k_valid", "q_seg", "k_seg", "sinks", "alibi_slopes"}

// checkAttentionNames refuses a tensor op attention does not read:
// dropping it (a misspelt "sink") would return a plain attention answer to
// a question about another.
func checkAttentionNames(in *safetensors.File) error {
	for _, name := range in.Names() {
		if !slices.Contains(AttentionNames, name) {
			return fmt.Errorf("tensor %q: not an input of op attention (inputs: %s)", name, strings.Join(AttentionNames, ", "))
		}
	}
	return nil
}

func readMeta(meta map[string]string, c *attention.Config) error {
	keys := make([]string, 0, len(meta))
	for key := range meta {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		val := meta[key]
		var err error
		switch key {
		case "causal":
			c.Causal, err = strconv.ParseBool(val)
		case "window":
			c.Window, err = strconv.Atoi(val)
		case "scale":
			c.Scale, err = strconv.ParseFloat(val, 64)
			if err == nil && (c.Scale == 0 || math.IsNaN(c.Scale) || math.IsInf(c.Scale, 0)) {
				err = fmt.Errorf("want a finite non-zero number")
			}
		case "convention":
			c.Convention, err = attention.ParseConvention(val)
		case "softcap":
			c.Softcap, err = strconv.ParseFloat(val, 64)
			if err == nil && !(c.Softcap >= 0 && !math.IsInf(c.Softcap, 0)) {
				err = fmt.Errorf("want a finite number >= 0 (0: none)")
			}
		default:
			if !strings.HasPrefix(key, "x-") {
				return fmt.Errorf("metadata %q: unknown key (known: causal, window, scale, convention, softcap; x-* is free)", key)
			}
		}
		if err != nil {
			return fmt.Errorf("metadata %q = %q: %v", key, val, err)
		}
	}
	return nil
}

func runAttention(in *safetensors.File, dtype string) (*safetensors.File, error) {
	c, q, k, v, do, err := AttentionInputs(in)
	if err != nil {
		return nil, err
	}
	out := safetensors.New()
	oShape := []int{c.B, c.Hq, c.M, c.Dv}
	lseShape := []int{c.B, c.Hq, c.M}
	if dtype == "float32" {
		o, lse, dq, dk, dv, dsinks, err := attend(c, f32(q), f32(k), f32(v), f32(do))
		if err != nil {
			return nil, err
		}
		out.SetF32("o", oShape, o)
		out.SetF32("lse", lseShape, lse)
		if do != nil {
			out.SetF32("dq", []int{c.B, c.Hq, c.M, c.D}, dq)
			out.SetF32("dk", []int{c.B, c.Hkv, c.N, c.D}, dk)
			out.SetF32("dv", []int{c.B, c.Hkv, c.N, c.Dv}, dv)
		}
		if dsinks != nil {
			out.SetF32("dsinks", []int{c.Hq}, dsinks)
		}
	} else {
		o, lse, dq, dk, dv, dsinks, err := attend(c, q, k, v, do)
		if err != nil {
			return nil, err
		}
		out.SetF64("o", oShape, o)
		out.SetF64("lse", lseShape, lse)
		if do != nil {
			out.SetF64("dq", []int{c.B, c.Hq, c.M, c.D}, dq)
			out.SetF64("dk", []int{c.B, c.Hkv, c.N, c.D}, dk)
			out.SetF64("dv", []int{c.B, c.Hkv, c.N, c.Dv}, dv)
		}
		if dsinks != nil {
			out.SetF64("dsinks", []int{c.Hq}, dsinks)
		}
	}
	out.Metadata = map[string]string{"op": "attention", "dtype": dtype, "convention": c.Convention.String()}
	return out, nil
}

// attend runs the reference attention forward and, when do is given,
// backward, with the sinks' gradient when c has sinks.
func attend[T attention.Float](c *attention.Config, q, k, v, do []T) (o, lse, dq, dk, dv, dsinks []T, err error) {
	o = make([]T, c.B*c.Hq*c.M*c.Dv)
	lse = make([]T, c.B*c.Hq*c.M)
	if do != nil {
		dq, dk, dv = make([]T, len(q)), make([]T, len(k)), make([]T, len(v))
	}
	if err = attention.Reference[T]().Run(o, lse, dq, dk, dv, q, k, v, do, c); err != nil {
		return
	}
	if do != nil && c.Sinks != nil {
		dsinks = make([]T, c.Hq)
		attention.SinkGrad(dsinks, o, lse, do, c)
	}
	return o, lse, dq, dk, dv, dsinks, nil
}

func tensor4(in *safetensors.File, name string) ([]float64, []int, error) {
	if !in.Has(name) {
		return nil, nil, fmt.Errorf("tensor %q: missing", name)
	}
	x, shape, err := in.Float64(name)
	if err != nil {
		return nil, nil, err
	}
	if len(shape) != 4 {
		return nil, nil, fmt.Errorf("tensor %q: shape %v has %d dimensions, want 4 [B H T D]", name, shape, len(shape))
	}
	for _, d := range shape {
		if d < 1 {
			return nil, nil, fmt.Errorf("tensor %q: shape %v has an empty dimension", name, shape)
		}
	}
	return x, shape, nil
}

func f32(x []float64) []float32 {
	if x == nil {
		return nil
	}
	y := make([]float32, len(x))
	for i, e := range x {
		y[i] = float32(e)
	}
	return y
}

// checkRange32 returns an error naming the first float tensor of in with a
// finite value beyond float32, which -dtype float32 would turn into an
// infinity before any computation.
func checkRange32(in *safetensors.File) error {
	for _, name := range in.Names() {
		if !in.Tensors[name].DType.IsFloat() {
			continue
		}
		x, _, err := in.Float64(name)
		if err != nil {
			return err
		}
		for i, v := range x {
			if math.Abs(v) > math.MaxFloat32 {
				return fmt.Errorf("oracle: tensor %q: element %d is %g, beyond float32: -dtype float32 would make it infinite", name, i, v)
			}
		}
	}
	return nil
}

// CheckFinite returns an error naming the first tensor of in that holds a
// NaN or an infinity, and where: an oracle fed such inputs would answer
// NaN, which says nothing about the implementation compared with it.
func CheckFinite(in *safetensors.File) error {
	for _, name := range in.Names() {
		t := in.Tensors[name]
		if !t.DType.IsFloat() {
			continue
		}
		x, shape, err := in.Float64(name)
		if err != nil {
			return err
		}
		for i, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("oracle: tensor %q holds %v at element %d (shape %v): inputs must be finite", name, v, i, shape)
			}
		}
	}
	return nil
}
