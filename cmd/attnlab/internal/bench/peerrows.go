package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/attnlab/attnlab/attention"
)

// The rows measured beside the peers: attention forward (prefill), decode
// and a GEMM to check each peer's BLAS.

// forwardCases are the prefill workloads up to length maxN: float32,
// H = 8, causal and full, D = 64 and 128, n = 512 … maxN, then GQA with 8
// query heads on 2 KV heads at n = 2048.
func forwardCases(maxN int) []attnCase {
	var cs []attnCase
	for n := 512; n <= maxN; n *= 2 {
		for _, D := range []int{64, 128} {
			for _, causal := range []bool{true, false} {
				cs = append(cs, attnCase{dtype: "float32", n: n, H: 8, D: D, causal: causal})
			}
		}
	}
	if maxN >= 2048 {
		for _, D := range []int{64, 128} {
			cs = append(cs, attnCase{dtype: "float32", n: 2048, H: 8, Hkv: 2, D: D, causal: true})
		}
	}
	return cs
}

// forwardFlops returns the flops of one attention forward at M = N = n,
// Dv = D, H query heads, B = 1: S = Q Kᵀ and O = P V, 2·n²·D each per head;
// the fused kernel skips the tiles a causal mask hides:
//
//	nominal  = 4·n²·D·H
//	executed = 4·n²·D·H full, 2·n²·D·H causal
func forwardFlops(n, D, H int, causal bool) (nominal, executed float64) {
	nominal = 4 * float64(n) * float64(n) * float64(D) * float64(H)
	executed = nominal
	if causal {
		executed /= 2
	}
	return nominal, executed
}

func forwardRow(a attnCase, seconds float64) Row {
	nominal, executed := forwardFlops(a.n, a.D, a.H, a.causal)
	return Row{Group: "attention fwd", Case: a.name(), Unit: "GFLOP/s", DType: a.dtype,
		Ours: nominal / seconds / 1e9, Flops: nominal, ExecutedFlops: executed}
}

// forwardWork is attnlab's fused forward on a's shape and the peers'
// request for it.
func forwardWork(a attnCase) *peerWork {
	hkv := a.kvHeads()
	c := &attention.Config{B: 1, Hq: a.H, Hkv: hkv, M: a.n, N: a.n, D: a.D, Dv: a.D, Causal: a.causal}
	r := rand.New(rand.NewPCG(4, uint64(a.n*a.D)))
	q := randSlice[float32](r, a.H*a.n*a.D)
	k, v := randSlice[float32](r, hkv*a.n*a.D), randSlice[float32](r, hkv*a.n*a.D)
	o, lse := make([]float32, len(q)), make([]float32, a.H*a.n)
	return &peerWork{
		run: func() {
			if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
				panic(err)
			}
		},
		req: peerRequest{Op: "attn_fwd", B: 1, Hq: a.H, Hkv: hkv, M: a.n, N: a.n, D: a.D, Causal: a.causal},
		q:   q, k: k, v: v, output: o,
		value: func(s float64) float64 { return forwardRow(a, s).Ours },
	}
}

// decodeWork is attnlab's DecodeForward on d's shape and the peers'
// request for it.
func decodeWork(d decodeCase) *peerWork {
	c := &attention.Config{B: 1, Hq: d.Hq, Hkv: d.Hkv, M: 1, N: d.ctx, D: d.D, Dv: d.D, Causal: true}
	r := rand.New(rand.NewPCG(3, uint64(d.ctx)))
	q := randSlice[float32](r, d.Hq*d.D)
	// K and V allocated as a KVCache's are (attention.CacheSlice)
	k, v := attention.CacheSlice[float32](d.Hkv*d.ctx*d.D), attention.CacheSlice[float32](d.Hkv*d.ctx*d.D)
	fillRand(r, k)
	fillRand(r, v)
	o, lse := make([]float32, d.Hq*d.D), make([]float32, d.Hq)
	return &peerWork{
		run: func() {
			if err := attention.DecodeForward(o, lse, q, k, v, c); err != nil {
				panic(err)
			}
		},
		req: peerRequest{Op: "decode", B: 1, Hq: d.Hq, Hkv: d.Hkv, M: 1, N: d.ctx, D: d.D, Causal: true},
		q:   q, k: k, v: v, output: o,
		value: func(s float64) float64 { return decodeRow(d, s).Ours },
	}
}

// blasN is the size of the GEMM that checks each peer's BLAS.
const blasN = 1024

// blasRow is the BLAS check's row: attnlab's SGEMM at n = blasN, each
// peer's beside it.
func blasRow(seconds float64) Row {
	r := gemmRow("float32", blasN, seconds)
	r.Group, r.Case = "blas check", fmt.Sprintf("sgemm n=%d", blasN)
	return r
}

func blasWork() *peerWork {
	return &peerWork{
		run:   gemmRunner("float32", blasN),
		req:   peerRequest{Op: "sgemm", M: blasN, N: blasN, K: blasN},
		value: func(s float64) float64 { return blasRow(s).Ours },
	}
}

// blasSlow is the ratio of attnlab's GEMM rate to a peer's above which the
// peer's BLAS is flagged: at half of attnlab's rate or less it is likely
// single-threaded, built for another CPU or losing its time to threads that
// spin on a busy machine, and its attention ratios say more about that than
// about its kernels.
const blasSlow = 2.0

// flagSlowBLAS sets the warning of every peer cell of the BLAS row whose
// rate is far below attnlab's.
func flagSlowBLAS(r *Row) {
	for name, c := range r.Peers {
		if c.Ratio > blasSlow {
			c.Warning = fmt.Sprintf("%s's SGEMM runs at %.0f%% of attnlab's in the same rounds (a BLAS built for another CPU, fewer threads than asked, or threads that spin while waiting on a busy machine): every ratio against %s is suspect",
				name, 100/c.Ratio, name)
		}
	}
}

// kvHeads is the number of KV heads of a: H unless a is GQA.
func (a attnCase) kvHeads() int {
	if a.Hkv == 0 {
		return a.H
	}
	return a.Hkv
}
