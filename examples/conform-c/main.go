// Command conform-c is an example adapter for a kernel written in C: a
// small cgo wrapper serves the C function of attention.c to attnlab
// conform over the protocol of docs/conform-protocol.md. It is a Go module
// of its own, so that attnlab's module needs no C compiler. Copy it, put
// your kernel's files in place of attention.c and attention.h (or link your
// library with #cgo LDFLAGS), adapt the call in Attention, declare what the
// kernel can do in Capabilities, and run, from attnlab's repository
//
//	go -C examples/conform-c build -o "$PWD/conform-c" .
//	attnlab conform -exec ./conform-c -contract bottom-right
//
// The C kernel computes in double: the wrapper hands it the request's
// float64 slices as they are and rounds its answers to float32 when the
// request is float32. Its causal flag is bottom-right (it takes the number
// of cached keys, N − M); a row that sees no key is refused, and that
// refusal becomes an error response naming the row.
package main

/*
#cgo CFLAGS: -O2 -std=c99
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "attention.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/attnlab/attnlab/conform"
)

type kernel struct{}

func (kernel) Capabilities() conform.Capabilities {
	return conform.Capabilities{
		Name: "C attention (examples/conform-c)", Version: "1",
		DTypes: []string{"float64", "float32"}, LSE: true, GQA: true, KVCache: true, Scale: true,
		Masks: []string{conform.MaskCausal, conform.MaskBool},
	}
}

func (kernel) Attention(r *conform.Request) (*conform.Response, error) {
	if r.DO != nil {
		return &conform.Response{Err: "this kernel has no backward"}, nil
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
	}
	// Go memory passed to C holds no Go pointers, so cgo allows it for
	// the length of the call
	var mask *C.uint8_t
	if r.Mask != nil {
		m := make([]uint8, len(r.Mask))
		for i, x := range r.Mask {
			if x {
				m[i] = 1
			}
		}
		mask = (*C.uint8_t)(unsafe.Pointer(&m[0]))
	}
	o, lse := make([]float64, r.B*r.Hq*r.M*r.Dv), make([]float64, r.B*r.Hq*r.M)
	causal := 0
	if r.Causal {
		causal = 1
	}
	var badB, badI C.int
	if C.attention(f64(r.Q), f64(r.K), f64(r.V), mask, C.int(r.B), C.int(r.Hq), C.int(r.Hkv), C.int(r.M), C.int(r.N), C.int(r.D), C.int(r.Dv),
		C.int(causal), C.int(r.N-r.M), C.double(scale), f64(o), f64(lse), &badB, &badI) != 0 {
		return &conform.Response{Err: fmt.Sprintf("batch %d, query row %d sees no key", badB, badI)}, nil
	}
	if r.DType == "float32" { // the kernel computes in double: round its answers
		for _, x := range [][]float64{o, lse} {
			for i := range x {
				x[i] = float64(float32(x[i]))
			}
		}
	}
	return &conform.Response{O: o, LSE: lse}, nil
}

// f64 is the C view of x.
func f64(x []float64) *C.double { return (*C.double)(unsafe.Pointer(&x[0])) }

func main() {
	if err := conform.Serve(os.Stdin, os.Stdout, kernel{}); err != nil {
		fmt.Fprintln(os.Stderr, "conform-c:", err)
		os.Exit(1)
	}
}
