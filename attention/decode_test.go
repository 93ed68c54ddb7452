package attention_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/attention"
)

// decodeCases are single-query configurations against caches of lengths
// around the tile (64) and the split (256) sizes, with every mask feature.
func decodeCases() []flashCase {
	var cs []flashCase
	add := func(name string, c attention.Config) { cs = append(cs, flashCase{name, c}) }
	heads := [][2]int{{4, 4}, {8, 2}, {6, 1}} // MHA, GQA, MQA
	for x, n := range []int{1, 7, 63, 64, 65, 255, 256, 257, 1000} {
		h := heads[x%len(heads)]
		add(fmt.Sprintf("N=%d/Hq=%d/Hkv=%d", n, h[0], h[1]),
			attention.Config{B: 2, Hq: h[0], Hkv: h[1], M: 1, N: n, D: 16, Dv: 16, Causal: true})
	}
	add("dims/D=8/Dv=24", attention.Config{B: 1, Hq: 4, Hkv: 2, M: 1, N: 300, D: 8, Dv: 24, Causal: true})
	add("noncausal", attention.Config{B: 1, Hq: 4, Hkv: 2, M: 1, N: 300, D: 8, Dv: 8})
	add("window=100", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: 700, D: 8, Dv: 8, Causal: true, Window: 100})
	for conv := attention.Positions; conv <= attention.TopLeft; conv++ {
		add(fmt.Sprintf("convention=%s", conv), attention.Config{B: 1, Hq: 2, Hkv: 1, M: 1, N: 300, D: 8, Dv: 8, Causal: true, Convention: conv})
	}
	// a cache with empty slots: every 7th slot is unwritten, positions count
	// the real tokens, and one batch item's query is padding
	const N = 600
	kvalid := make([]bool, 2*N)
	for j := range kvalid {
		kvalid[j] = j%7 != 3
	}
	kpos := attention.PositionsFromValidity(kvalid, 2, N)
	qpos := []int{kpos[N-1] + 1, kpos[2*N-1] + 1}
	add("cache-gaps", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: N, D: 8, Dv: 8, Causal: true,
		KValid: kvalid, KPos: kpos, QPos: qpos})
	add("cache-gaps-window=50", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: N, D: 8, Dv: 8, Causal: true, Window: 50,
		KValid: kvalid, KPos: kpos, QPos: qpos})
	add("padding-query", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: N, D: 8, Dv: 8, Causal: true,
		KValid: kvalid, KPos: kpos, QPos: qpos, QValid: []bool{true, false}})
	add("left-pad=300", padded(2, 4, 4, N, 1, 8, 8, true, []int{0, 300}))
	// packed documents: the query belongs to the last one
	add("segments", packed(4, 2, 1, 8, 8, 200, 130, 270))
	// several new queries per row: a speculative chunk, the last M slots of
	// the cache, causal among themselves
	for _, m := range []int{2, 3, 5, 8} {
		add(fmt.Sprintf("chunk/M=%d", m), attention.Config{B: 2, Hq: 8, Hkv: 2, M: m, N: 300 + m, D: 16, Dv: 16, Causal: true, Convention: attention.BottomRight})
	}
	add("chunk/M=4/window=40", attention.Config{B: 1, Hq: 4, Hkv: 1, M: 4, N: 700, D: 8, Dv: 8, Causal: true, Window: 40, Convention: attention.BottomRight})
	add("chunk/M=4/left-pad", padded(2, 4, 2, N, 4, 8, 8, true, []int{0, 450}))
	add("chunk/M=3/segments", packed(2, 1, 3, 8, 8, 200, 130, 270))
	qv := []bool{true, false, true, true, false, false}
	add("chunk/M=3/padding-queries", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 3, N: 400, D: 8, Dv: 8, Causal: true, Convention: attention.BottomRight, QValid: qv})
	// softcap, ALiBi and sinks, alone and together
	vary := func(c attention.Config, softcap float64, alibi, sinks bool) attention.Config {
		c.Softcap = softcap
		for h := range c.Hq {
			if alibi {
				c.Alibi = append(c.Alibi, 1/float64(int(2)<<h))
			}
			if sinks {
				c.Sinks = append(c.Sinks, float64(h%3)-0.7)
			}
		}
		return c
	}
	add("variants/softcap", vary(attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: 257, D: 16, Dv: 16, Causal: true}, 2, false, false))
	add("variants/alibi", vary(attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: 257, D: 16, Dv: 16, Causal: true}, 0, true, false))
	add("variants/sinks", vary(attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: 257, D: 16, Dv: 16, Causal: true}, 0, false, true))
	add("variants/cache-gaps", vary(attention.Config{B: 2, Hq: 4, Hkv: 2, M: 1, N: N, D: 8, Dv: 8, Causal: true, Window: 50,
		KValid: kvalid, KPos: kpos, QPos: qpos}, 3, true, true))
	add("variants/chunk/M=3", vary(attention.Config{B: 2, Hq: 8, Hkv: 2, M: 3, N: 303, D: 16, Dv: 16, Causal: true}, 1.5, true, true))
	empty := attention.Config{B: 2, Hq: 2, Hkv: 1, M: 1, N: 300, D: 4, Dv: 4, Causal: true, KValid: make([]bool, 600), QPos: []int{299, 3}}
	for j := range 600 {
		empty.KValid[j] = j < 300 || j >= 304
	}
	add("variants/empty-row-with-sinks", vary(empty, 0, true, true))
	return cs
}

// TestDecodeMatchesReference compares DecodeForward with the reference
// forward: float64 within 1e-12, float32 (against float64) within 1e-5.
func TestDecodeMatchesReference(t *testing.T) {
	var worst64, worst32 float64
	for x, tc := range decodeCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := &tc.c
			q, k, v, _ := inputs(c, uint64(100+x))
			want := newRun(c)
			p := make([]float64, c.B*c.Hq*c.M*c.N)
			if err := attention.Forward(want.o, want.lse, p, q, k, v, c); err != nil {
				t.Fatal(err)
			}
			got := newRun(c)
			if err := attention.DecodeForward(got.o, got.lse, q, k, v, c); err != nil {
				t.Fatal(err)
			}
			o32, lse32 := make([]float32, len(got.o)), make([]float32, len(got.lse))
			if err := attention.DecodeForward(o32, lse32, to32(q), to32(k), to32(v), c); err != nil {
				t.Fatal(err)
			}
			for _, y := range []struct {
				name      string
				got, want []float64
				tol       float64
				worst     *float64
			}{
				{"o", got.o, want.o, 1e-12, &worst64}, {"lse", got.lse, want.lse, 1e-12, &worst64},
				{"float32 o", to64(o32), want.o, 1e-5, &worst32}, {"float32 lse", to64(lse32), want.lse, 1e-5, &worst32},
			} {
				d, at := mixedError(y.got, y.want)
				*y.worst = max(*y.worst, d)
				if d > y.tol {
					t.Errorf("%s[%d] = %.9g, reference %.9g (error %.2g > %.2g)", y.name, at, y.got[at], y.want[at], d, y.tol)
				}
			}
		})
	}
	t.Logf("worst error against the reference: float64 %.1e, float32 %.1e", worst64, worst32)
}

func TestDecodeEmptyRow(t *testing.T) {
	// Item 1's query is at position 3 but its cache holds only padding up to
	// position 3: every key is masked.
	c := &attention.Config{B: 2, Hq: 2, Hkv: 1, M: 1, N: 300, D: 4, Dv: 4, Causal: true,
		KValid: make([]bool, 600), QPos: []int{299, 3}}
	for j := range 600 {
		c.KValid[j] = j < 300 || j >= 304
	}
	q, k, v, _ := inputs(c, 1)
	err := attention.DecodeForward(make([]float64, 2*2*4), make([]float64, 2*2), q, k, v, c)
	var e *attention.EmptyRowError
	if !errors.As(err, &e) || e.Batch != 1 || e.Row != 0 {
		t.Fatalf("got %v, want an EmptyRowError for batch 1, row 0", err)
	}
}

func TestDecodePanicsAboveMaxM(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "M = 9") {
			t.Errorf("panic %v, want one naming M = 9", r)
		}
	}()
	c := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 9, N: 9, D: 1, Dv: 1}
	attention.DecodeForward(make([]float64, 9), make([]float64, 9), make([]float64, 9), make([]float64, 9), make([]float64, 9), c)
}

// TestDecodeAllocatesNothing: once warm, a call reuses its working memory.
func TestDecodeAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop entries: allocations are not counted")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, c := range []*attention.Config{
		{B: 1, Hq: 8, Hkv: 2, M: 1, N: 2000, D: 32, Dv: 32, Causal: true},
		{B: 2, Hq: 4, Hkv: 4, M: 4, N: 500, D: 16, Dv: 16, Causal: true, Convention: attention.BottomRight},
	} {
		q, k, v, _ := inputs(c, 5)
		q32, k32, v32 := to32(q), to32(k), to32(v)
		o, lse := make([]float32, c.B*c.Hq*c.M*c.Dv), make([]float32, c.B*c.Hq*c.M)
		call := func() {
			if err := attention.DecodeForward(o, lse, q32, k32, v32, c); err != nil {
				t.Fatal(err)
			}
		}
		call()
		if n := testing.AllocsPerRun(20, call); n != 0 {
			t.Errorf("M=%d N=%d: %v allocations per call", c.M, c.N, n)
		}
	}
}

// TestDecodeThreadsBitIdentical: the chunks are fixed by the shape and merged
// in order, so one and two threads give the same bits.
func TestDecodeThreadsBitIdentical(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	c := &attention.Config{B: 1, Hq: 8, Hkv: 2, M: 1, N: 3000, D: 16, Dv: 16, Causal: true, Window: 2500}
	q, k, v, _ := inputs(c, 2)
	var runs [2]run
	for x, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		runs[x] = newRun(c)
		if err := attention.DecodeForward(runs[x].o, runs[x].lse, q, k, v, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, y := range [][2][]float64{{runs[0].o, runs[1].o}, {runs[0].lse, runs[1].lse}} {
		if d, at := mixedError(y[1], y[0]); d != 0 {
			t.Fatalf("element %d: 1 thread %.17g, 2 threads %.17g", at, y[0][at], y[1][at])
		}
	}
}

// BenchmarkDecode times one new token of H = 8 heads (D = 64, float32)
// against caches of 1024 and 8192 tokens.
func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{1024, 8192} {
		b.Run(fmt.Sprintf("ctx=%d", n), func(b *testing.B) {
			c := &attention.Config{B: 1, Hq: 8, Hkv: 8, M: 1, N: n, D: 64, Dv: 64, Causal: true}
			q, k, v, _ := inputs(c, 1)
			q32, k32, v32 := to32(q), to32(k), to32(v)
			o, lse := make([]float32, c.Hq*c.Dv), make([]float32, c.Hq)
			b.ReportAllocs()
			for b.Loop() {
				if err := attention.DecodeForward(o, lse, q32, k32, v32, c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/token")
		})
	}
}

// TestDecodeHiddenSlotsMayHoldNaN: unwritten cache slots may hold anything;
// NaN in their keys and values must not reach the output.
func TestDecodeHiddenSlotsMayHoldNaN(t *testing.T) {
	for _, m := range []int{1, 3} {
		const N = 700
		c := &attention.Config{B: 2, Hq: 4, Hkv: 2, M: m, N: N, D: 16, Dv: 16, Causal: true, KValid: make([]bool, 2*N)}
		for j := range c.KValid {
			c.KValid[j] = j%N < 500 && j%11 != 4 // a cache filled to 500, with gaps
		}
		c.KPos = attention.PositionsFromValidity(c.KValid, 2, N)
		c.QPos = nil
		for b := range 2 {
			for i := range m {
				c.QPos = append(c.QPos, c.KPos[b*N+499]+1+i)
			}
		}
		q, k, v, _ := inputs(c, 7)
		run := func(k, v []float64) ([]float64, []float64) {
			o, lse := make([]float64, c.B*c.Hq*m*c.Dv), make([]float64, c.B*c.Hq*m)
			if err := attention.DecodeForward(o, lse, q, k, v, c); err != nil {
				t.Fatal(err)
			}
			return o, lse
		}
		k0, v0 := append([]float64(nil), k...), append([]float64(nil), v...)
		kn, vn := append([]float64(nil), k...), append([]float64(nil), v...)
		for bh := range c.B * c.Hkv {
			b := bh / c.Hkv
			for j := range N {
				if c.KValid[b*N+j] {
					continue
				}
				for x := range c.D {
					k0[(bh*N+j)*c.D+x], v0[(bh*N+j)*c.D+x] = 0, 0
					kn[(bh*N+j)*c.D+x], vn[(bh*N+j)*c.D+x] = math.NaN(), math.NaN()
				}
			}
		}
		o0, l0 := run(k0, v0)
		on, ln := run(kn, vn)
		for i := range o0 {
			if d := math.Abs(on[i] - o0[i]); !(d <= 1e-12*(1+math.Abs(o0[i]))) {
				t.Fatalf("M=%d: o[%d] = %v with NaN in hidden slots, %v with zeros", m, i, on[i], o0[i])
			}
		}
		for i := range l0 {
			if d := math.Abs(ln[i] - l0[i]); !(d <= 1e-12*(1+math.Abs(l0[i]))) {
				t.Fatalf("M=%d: lse[%d] = %v with NaN, %v with zeros", m, i, ln[i], l0[i])
			}
		}
	}
}
