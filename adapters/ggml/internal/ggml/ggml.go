// Package ggml is a thin cgo binding of the few ggml calls attnlab's ggml
// adapter, bench peer and decoder make: contexts with their tensors in host
// memory, the graph ops of llama.cpp's attention (flash_attn_ext, and
// mul_mat → soft_max_ext → mul_mat), of a Llama block (get_rows, rms_norm,
// rope_ext, swiglu), and graph computation on a persistent thread pool.
//
// ggml itself is the C source vendored in the Go module
// github.com/ollama/ollama (ml/backend/ggml/ggml), compiled by that module's
// cgo packages, which this package imports. Its headers and the compiler's
// optimisation flags come from the environment the build tool sets
// (adapters/ggml/internal/build): built without it, this package does not
// compile.
//
// # Layout
//
// A ggml tensor's first dimension is its innermost: ne = [D, M, H, B] is the
// row-major array [B][H][M][D], attnlab's [B, H, M, D]. Shapes passed here
// are in ggml's order.
package ggml

/*
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-cpu.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"unsafe"

	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src" // ggml's base and CPU backend, compiled by cgo
)

// BuildFlags and Upstream are set by the build tool (-ldflags -X): the
// compiler and flags ggml was compiled with, and the llama.cpp commit
// ollama vendors.
var BuildFlags, Upstream string

// Version names the ggml this binary runs: ollama's module version and the
// llama.cpp commit its sources come from.
func Version() string {
	v := "github.com/ollama/ollama (version unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ollama/ollama" {
				v = "ggml vendored in github.com/ollama/ollama " + d.Version
			}
		}
	}
	if Upstream != "" {
		v += " (llama.cpp " + Upstream + ")"
	}
	return v
}

// Features lists the SIMD extensions ggml's CPU code was compiled for.
func Features() string {
	var f []string
	for _, x := range []struct {
		name string
		on   C.int
	}{{"AVX", C.ggml_cpu_has_avx()}, {"AVX2", C.ggml_cpu_has_avx2()}, {"FMA", C.ggml_cpu_has_fma()},
		{"F16C", C.ggml_cpu_has_f16c()}, {"AVX512", C.ggml_cpu_has_avx512()}} {
		if x.on != 0 {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, " ")
}

// Type is a ggml tensor type.
type Type int

// The tensor types used here.
const (
	F32 Type = C.GGML_TYPE_F32
	F16 Type = C.GGML_TYPE_F16
	I32 Type = C.GGML_TYPE_I32
)

// ParseType reads "f32" or "f16".
func ParseType(s string) (Type, error) {
	switch s {
	case "f32":
		return F32, nil
	case "f16":
		return F16, nil
	}
	return 0, fmt.Errorf("K/V type %q (want f32 or f16)", s)
}

func (t Type) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case I32:
		return "i32"
	}
	return fmt.Sprintf("type %d", int(t))
}

// Tensor is a ggml tensor of a Ctx, valid until the Ctx is freed.
type Tensor struct{ t *C.struct_ggml_tensor }

// Nil is the absent tensor (an op's optional input).
var Nil Tensor

// Ne is t's shape, innermost first.
func (t Tensor) Ne() [4]int {
	return [4]int{int(t.t.ne[0]), int(t.t.ne[1]), int(t.t.ne[2]), int(t.t.ne[3])}
}

// Nb is t's strides in bytes, innermost first.
func (t Tensor) Nb() [4]int {
	return [4]int{int(t.t.nb[0]), int(t.t.nb[1]), int(t.t.nb[2]), int(t.t.nb[3])}
}

// Type is t's element type.
func (t Tensor) Type() Type { return Type(t.t._type) }

// Len is t's number of elements.
func (t Tensor) Len() int { return int(C.ggml_nelements(t.t)) }

// ElemSize is the bytes of one element of t.
func (t Tensor) ElemSize() int { return int(C.ggml_element_size(t.t)) }

// Bytes is the size of t's data.
func (t Tensor) Bytes() int { return int(C.ggml_nbytes(t.t)) }

func (t Tensor) data(n int) unsafe.Pointer {
	if !C.ggml_is_contiguous(t.t) {
		panic("ggml: reading or writing a tensor that is not contiguous")
	}
	if t.t.data == nil {
		panic("ggml: tensor without data")
	}
	if n != t.Len() {
		panic(fmt.Sprintf("ggml: %d values for a tensor of %d", n, t.Len()))
	}
	return t.t.data
}

// SetF32 writes x into t, converting to t's type (F32 or F16).
func (t Tensor) SetF32(x []float32) {
	p := t.data(len(x))
	if len(x) == 0 {
		return
	}
	switch t.Type() {
	case F32:
		C.memcpy(p, unsafe.Pointer(&x[0]), C.size_t(4*len(x)))
	case F16:
		C.ggml_fp32_to_fp16_row((*C.float)(unsafe.Pointer(&x[0])), (*C.ggml_fp16_t)(p), C.int64_t(len(x)))
	default:
		panic("ggml: SetF32 on a tensor of " + t.Type().String())
	}
}

// SetI32 writes x into an I32 tensor.
func (t Tensor) SetI32(x []int32) {
	p := t.data(len(x))
	if t.Type() != I32 {
		panic("ggml: SetI32 on a tensor of " + t.Type().String())
	}
	if len(x) > 0 {
		C.memcpy(p, unsafe.Pointer(&x[0]), C.size_t(4*len(x)))
	}
}

// F32 reads t (F32 or F16) into dst, which must have t's length.
func (t Tensor) F32(dst []float32) {
	p := t.data(len(dst))
	if len(dst) == 0 {
		return
	}
	switch t.Type() {
	case F32:
		C.memcpy(unsafe.Pointer(&dst[0]), p, C.size_t(4*len(dst)))
	case F16:
		C.ggml_fp16_to_fp32_row((*C.ggml_fp16_t)(p), (*C.float)(unsafe.Pointer(&dst[0])), C.int64_t(len(dst)))
	default:
		panic("ggml: F32 on a tensor of " + t.Type().String())
	}
}

// Ctx is a ggml context whose tensors, data included, live in one block of
// host memory allocated by ggml_init.
type Ctx struct{ c *C.struct_ggml_context }

// Overhead is the bytes a Ctx needs per tensor besides the data.
func Overhead() int { return int(C.ggml_tensor_overhead()) }

// GraphOverhead is the bytes a graph of up to nodes nodes takes in its Ctx.
func GraphOverhead(nodes int) int { return int(C.ggml_graph_overhead_custom(C.size_t(nodes), false)) }

// NewCtx makes a context of the given size: the data of every tensor
// created in it plus Overhead per tensor plus its graphs' GraphOverhead.
func NewCtx(bytes int) *Ctx {
	c := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(bytes), mem_buffer: nil, no_alloc: false})
	if c == nil {
		panic(fmt.Sprintf("ggml: ggml_init of %d bytes failed", bytes))
	}
	return &Ctx{c}
}

// Arena is a block of C memory in which contexts are made one at a time,
// so that a graph rebuilt for every step (a decoder's) allocates nothing.
type Arena struct {
	p    unsafe.Pointer
	size int
}

// NewArena allocates an arena of the given size.
func NewArena(bytes int) *Arena {
	p := C.malloc(C.size_t(bytes))
	if p == nil {
		panic(fmt.Sprintf("ggml: cannot allocate an arena of %d bytes", bytes))
	}
	return &Arena{p, bytes}
}

// Size is the arena's size.
func (a *Arena) Size() int { return a.size }

// Ctx makes a context over the whole arena; the previous one made in it
// must be freed (or no longer used) first.
func (a *Arena) Ctx() *Ctx {
	c := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(a.size), mem_buffer: a.p, no_alloc: false})
	if c == nil {
		panic("ggml: ggml_init in an arena failed")
	}
	return &Ctx{c}
}

// Free releases the arena's memory.
func (a *Arena) Free() {
	C.free(a.p)
	a.p, a.size = nil, 0
}

// Free releases the context and its tensors.
func (c *Ctx) Free() {
	if c.c != nil {
		C.ggml_free(c.c)
		c.c = nil
	}
}

// Used is the bytes of the context used so far.
func (c *Ctx) Used() int { return int(C.ggml_used_mem(c.c)) }

// New makes a tensor of type typ and shape ne (innermost first, 1 to 4
// dimensions).
func (c *Ctx) New(typ Type, ne ...int) Tensor {
	var t *C.struct_ggml_tensor
	switch len(ne) {
	case 1:
		t = C.ggml_new_tensor_1d(c.c, uint32(typ), C.int64_t(ne[0]))
	case 2:
		t = C.ggml_new_tensor_2d(c.c, uint32(typ), C.int64_t(ne[0]), C.int64_t(ne[1]))
	case 3:
		t = C.ggml_new_tensor_3d(c.c, uint32(typ), C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]))
	case 4:
		t = C.ggml_new_tensor_4d(c.c, uint32(typ), C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]))
	default:
		panic(fmt.Sprintf("ggml: %d dimensions", len(ne)))
	}
	return c.check(t)
}

func (c *Ctx) check(t *C.struct_ggml_tensor) Tensor {
	if t == nil {
		panic("ggml: out of context memory")
	}
	return Tensor{t}
}

// MulMat is ggml_mul_mat(a, b): a [K, M, …], b [K, N, …] → [M, N, …], each
// output element the dot product of a row of a and a row of b; a's heads
// are broadcast over b's.
func (c *Ctx) MulMat(a, b Tensor) Tensor { return c.check(C.ggml_mul_mat(c.c, a.t, b.t)) }

// MulMatPrecF32 asks a mul_mat for F32 precision, as llama.cpp does for
// K·Q (GGML_PREC_F32).
func MulMatPrecF32(t Tensor) { C.ggml_mul_mat_set_prec(t.t, C.GGML_PREC_F32) }

// SoftMaxExt is ggml_soft_max_ext(a, mask, scale, maxBias): the row softmax
// of a·scale + mask.
func (c *Ctx) SoftMaxExt(a, mask Tensor, scale, maxBias float32) Tensor {
	return c.check(C.ggml_soft_max_ext(c.c, a.t, mask.t, C.float(scale), C.float(maxBias)))
}

// SoftMaxAddSinks adds per-head sink logits to a soft_max_ext.
func SoftMaxAddSinks(t, sinks Tensor) { C.ggml_soft_max_add_sinks(t.t, sinks.t) }

// FlashAttnExt is ggml_flash_attn_ext(q, k, v, mask, scale, maxBias,
// softcap) at F32 precision (as llama.cpp sets it): q [D, M, Hq, B],
// k [D, N, Hkv, B], v [Dv, N, Hkv, B], mask [N, ≥M, 1, B] F16 → [Dv, Hq, M, B].
func (c *Ctx) FlashAttnExt(q, k, v, mask Tensor, scale, maxBias, softcap float32) Tensor {
	t := c.check(C.ggml_flash_attn_ext(c.c, q.t, k.t, v.t, mask.t, C.float(scale), C.float(maxBias), C.float(softcap)))
	C.ggml_flash_attn_ext_set_prec(t.t, C.GGML_PREC_F32)
	return t
}

// FlashAttnAddSinks adds per-head sink logits to a flash_attn_ext.
func FlashAttnAddSinks(t, sinks Tensor) { C.ggml_flash_attn_ext_add_sinks(t.t, sinks.t) }

// Scale is a·s.
func (c *Ctx) Scale(a Tensor, s float32) Tensor { return c.check(C.ggml_scale(c.c, a.t, C.float(s))) }

// Tanh is tanh(a), elementwise.
func (c *Ctx) Tanh(a Tensor) Tensor { return c.check(C.ggml_tanh(c.c, a.t)) }

// Add is a + b, b broadcast over a.
func (c *Ctx) Add(a, b Tensor) Tensor { return c.check(C.ggml_add(c.c, a.t, b.t)) }

// Mul is a ⊙ b, b broadcast over a.
func (c *Ctx) Mul(a, b Tensor) Tensor { return c.check(C.ggml_mul(c.c, a.t, b.t)) }

// RMSNorm is ggml_rms_norm: each row divided by sqrt(mean(x²) + eps).
func (c *Ctx) RMSNorm(a Tensor, eps float32) Tensor {
	return c.check(C.ggml_rms_norm(c.c, a.t, C.float(eps)))
}

// SwiGLU is silu(a) ⊙ b.
func (c *Ctx) SwiGLU(a, b Tensor) Tensor { return c.check(C.ggml_swiglu_split(c.c, a.t, b.t)) }

// GetRows gathers the rows of a named by the I32 tensor rows.
func (c *Ctx) GetRows(a, rows Tensor) Tensor { return c.check(C.ggml_get_rows(c.c, a.t, rows.t)) }

// RopeNeoX rotates a [D, H, T] by the positions pos (I32 [T]) with
// ggml's NEOX mode: feature k paired with k + D/2, attnlab's "half"
// pairing (HF Llama's rotate_half), θ_k = base^(−2k/D).
func (c *Ctx) RopeNeoX(a, pos Tensor, dims int, base float32) Tensor {
	return c.check(C.ggml_rope_ext(c.c, a.t, pos.t, nil, C.int(dims), C.GGML_ROPE_TYPE_NEOX, 0,
		C.float(base), 1, 0, 1, 0, 0))
}

// Cpy copies a into b (any layouts, converting the type) and returns b's
// updated view.
func (c *Ctx) Cpy(a, b Tensor) Tensor { return c.check(C.ggml_cpy(c.c, a.t, b.t)) }

// Cast converts a to typ.
func (c *Ctx) Cast(a Tensor, typ Type) Tensor {
	return c.check(C.ggml_cast(c.c, a.t, uint32(typ)))
}

// Cont makes a contiguous copy of a.
func (c *Ctx) Cont(a Tensor) Tensor { return c.check(C.ggml_cont(c.c, a.t)) }

// Transpose swaps a's first two dimensions (a view).
func (c *Ctx) Transpose(a Tensor) Tensor { return c.check(C.ggml_transpose(c.c, a.t)) }

// Permute moves a's dimension i to position axes[i] (a view).
func (c *Ctx) Permute(a Tensor, a0, a1, a2, a3 int) Tensor {
	return c.check(C.ggml_permute(c.c, a.t, C.int(a0), C.int(a1), C.int(a2), C.int(a3)))
}

// Reshape3D views a contiguous a as ne0×ne1×ne2.
func (c *Ctx) Reshape3D(a Tensor, ne0, ne1, ne2 int) Tensor {
	return c.check(C.ggml_reshape_3d(c.c, a.t, C.int64_t(ne0), C.int64_t(ne1), C.int64_t(ne2)))
}

// Reshape2D views a contiguous a as ne0×ne1.
func (c *Ctx) Reshape2D(a Tensor, ne0, ne1 int) Tensor {
	return c.check(C.ggml_reshape_2d(c.c, a.t, C.int64_t(ne0), C.int64_t(ne1)))
}

// View2D is a view of a with shape ne0×ne1, row stride nb1 (bytes) and a
// byte offset.
func (c *Ctx) View2D(a Tensor, ne0, ne1, nb1, offset int) Tensor {
	return c.check(C.ggml_view_2d(c.c, a.t, C.int64_t(ne0), C.int64_t(ne1), C.size_t(nb1), C.size_t(offset)))
}

// View3D is a view of a with shape ne, strides nb1, nb2 (bytes) and a byte
// offset.
func (c *Ctx) View3D(a Tensor, ne0, ne1, ne2, nb1, nb2, offset int) Tensor {
	return c.check(C.ggml_view_3d(c.c, a.t, C.int64_t(ne0), C.int64_t(ne1), C.int64_t(ne2), C.size_t(nb1), C.size_t(nb2), C.size_t(offset)))
}

// Graph is a forward graph built in a Ctx.
type Graph struct{ g *C.struct_ggml_cgraph }

// NewGraph makes a graph of up to nodes nodes computing out and everything
// it depends on.
func (c *Ctx) NewGraph(nodes int, out ...Tensor) *Graph {
	g := C.ggml_new_graph_custom(c.c, C.size_t(nodes), false)
	if g == nil {
		panic("ggml: out of context memory for the graph")
	}
	for _, t := range out {
		C.ggml_build_forward_expand(g, t.t)
	}
	return &Graph{g}
}

// Expand adds t and what it depends on to g, after the nodes already in
// it: ggml's CPU backend runs nodes in this order, so a copy into a cache
// expanded before the ops that read the cache runs before them.
func (g *Graph) Expand(t Tensor) { C.ggml_build_forward_expand(g.g, t.t) }

// Nodes is g's number of nodes.
func (g *Graph) Nodes() int { return int(C.ggml_graph_n_nodes(g.g)) }

// Runner computes graphs on a persistent thread pool of ggml's CPU backend
// with one reusable work buffer. It is not safe for concurrent use.
type Runner struct {
	threads int
	pool    *C.struct_ggml_threadpool
	work    unsafe.Pointer
	size    int
}

// NewRunner makes a Runner of the given number of threads.
func NewRunner(threads int) *Runner {
	if threads < 1 || threads > C.GGML_MAX_N_THREADS {
		panic(fmt.Sprintf("ggml: %d threads", threads))
	}
	params := C.ggml_threadpool_params_default(C.int(threads))
	pool := C.ggml_threadpool_new(&params)
	if pool == nil {
		panic("ggml: ggml_threadpool_new failed")
	}
	return &Runner{threads: threads, pool: pool}
}

// Threads is r's number of threads.
func (r *Runner) Threads() int { return r.threads }

// Compute runs g.
func (r *Runner) Compute(g *Graph) error {
	plan := C.ggml_graph_plan(g.g, C.int(r.threads), r.pool)
	if int(plan.work_size) > r.size {
		C.free(r.work)
		r.work = C.malloc(plan.work_size)
		if r.work == nil {
			r.size = 0
			return fmt.Errorf("ggml: cannot allocate a work buffer of %d bytes", plan.work_size)
		}
		r.size = int(plan.work_size)
	}
	plan.work_data = (*C.uint8_t)(r.work)
	if st := C.ggml_graph_compute(g.g, &plan); st != C.GGML_STATUS_SUCCESS {
		return fmt.Errorf("ggml: graph compute: %s", C.GoString(C.ggml_status_to_string(st)))
	}
	return nil
}

// Close frees r's thread pool and buffer.
func (r *Runner) Close() {
	if r.pool != nil {
		C.ggml_threadpool_free(r.pool)
		r.pool = nil
	}
	C.free(r.work)
	r.work, r.size = nil, 0
}

// NegInf is the masked value of ggml's additive masks.
var NegInf = float32(math.Inf(-1))
