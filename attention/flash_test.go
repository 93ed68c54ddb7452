package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
)

// TestPassesEveryCheck runs the reference and the fused attention through
// every check of the lab: finite differences, float32 agreement, the
// semantic invariants and the calling contract. The checks' shapes fit in
// one 64×64 tile, so the fused kernel runs them again with tiles of 2
// queries × 3 keys, which makes every check cross tile boundaries, skip
// tiles and meet full and partial ones.
func TestPassesEveryCheck(t *testing.T) {
	for _, v := range []struct {
		name  string
		suite checks.Suite[checks.Impl]
		impl  checks.Impl
	}{
		{"reference", checks.Attention(), checks.AttentionReference},
		{"flash/tiles=64x64", checks.Flash(), checks.FlashAttention},
		{"flash/tiles=2x3", checks.Flash(), checks.Impl{Run: attention.FlashRunTiles[float64](2, 3, false), F32: attention.FlashRunTiles[float32](2, 3, false)}},
		{"flash/tiles=2x3/no-skip", checks.Flash(), checks.Impl{Run: attention.FlashRunTiles[float64](2, 3, true), F32: attention.FlashRunTiles[float32](2, 3, true)}},
	} {
		for _, c := range v.suite.Checks {
			t.Run(v.name+"/"+c.Name, func(t *testing.T) {
				r := c.Run(v.impl)
				if !r.Pass {
					t.Fatalf("%s fails %s: %s", v.name, c.Name, r.Detail)
				}
				t.Logf("%s", r.Detail)
			})
		}
	}
}

// flashCase is one configuration of the comparison with the reference.
type flashCase struct {
	name string
	c    attention.Config
}

// rowsOf returns the last m entries of each of the B rows of T tokens in x:
// the per-token data of a chunk of m queries at the end of a sequence.
func rowsOf[E any](x []E, B, T, m int) []E {
	if x == nil {
		return nil
	}
	out := make([]E, 0, B*m)
	for b := range B {
		out = append(out, x[b*T+T-m:b*T+T]...)
	}
	return out
}

// padded returns a causal configuration of B sequences of T slots where item
// b has pads[b] padding tokens on the left (left) or right, positions counted
// over real tokens only, and the last m slots as queries.
func padded(B, Hq, Hkv, T, m, D, Dv int, left bool, pads []int) attention.Config {
	valid := make([]bool, B*T)
	for b := range B {
		for t := range T {
			if left {
				valid[b*T+t] = t >= pads[b]
			} else {
				valid[b*T+t] = t < T-pads[b]
			}
		}
	}
	pos := attention.PositionsFromValidity(valid, B, T)
	return attention.Config{B: B, Hq: Hq, Hkv: Hkv, M: m, N: T, D: D, Dv: Dv, Causal: true,
		KValid: valid, KPos: pos, QValid: rowsOf(valid, B, T, m), QPos: rowsOf(pos, B, T, m)}
}

// packed returns B = 1 sequence of documents of the given lengths, packed with
// segment ids and positions restarting at 0 in each, the last m as queries.
func packed(Hq, Hkv, m, D, Dv int, lens ...int) attention.Config {
	var seg, pos []int
	for d, L := range lens {
		for t := range L {
			seg, pos = append(seg, d), append(pos, t)
		}
	}
	T := len(seg)
	return attention.Config{B: 1, Hq: Hq, Hkv: Hkv, M: m, N: T, D: D, Dv: Dv, Causal: true,
		KSeg: seg, KPos: pos, QSeg: rowsOf(seg, 1, T, m), QPos: rowsOf(pos, 1, T, m)}
}

func flashCases() []flashCase {
	var cs []flashCase
	add := func(name string, c attention.Config) { cs = append(cs, flashCase{name, c}) }
	heads := [][2]int{{2, 2}, {4, 2}, {3, 1}} // MHA, GQA, MQA
	sizes := []int{1, 7, 63, 64, 65, 130}
	for x, n := range sizes {
		h := heads[x%len(heads)]
		// M == N, causal
		add(fmt.Sprintf("self/M=N=%d/Hq=%d/Hkv=%d", n, h[0], h[1]),
			attention.Config{B: 2, Hq: h[0], Hkv: h[1], M: n, N: n, D: 8, Dv: 8, Causal: true})
		// one new token against a cache of n
		add(fmt.Sprintf("decode/M=1/N=%d/Hq=%d/Hkv=%d", n, h[1]*4, h[1]),
			attention.Config{B: 2, Hq: h[1] * 4, Hkv: h[1], M: 1, N: n, D: 16, Dv: 16, Causal: true})
		// a chunk of n new tokens after a cache: M != N
		add(fmt.Sprintf("chunk/M=%d/N=%d/Hq=%d/Hkv=%d", n, n+67, h[0], h[1]),
			attention.Config{B: 1, Hq: h[0], Hkv: h[1], M: n, N: n + 67, D: 5, Dv: 3, Causal: true})
	}
	// D != Dv, both ways, across tiles
	add("dims/D=16/Dv=24", attention.Config{B: 1, Hq: 4, Hkv: 2, M: 65, N: 130, D: 16, Dv: 24, Causal: true})
	add("dims/D=24/Dv=7", attention.Config{B: 1, Hq: 4, Hkv: 1, M: 130, N: 130, D: 24, Dv: 7, Causal: true})
	// not causal, and a window without causality (it limits the past only)
	add("noncausal/M=65/N=130", attention.Config{B: 2, Hq: 2, Hkv: 1, M: 65, N: 130, D: 8, Dv: 5})
	add("noncausal/M=130/N=65", attention.Config{B: 1, Hq: 2, Hkv: 2, M: 130, N: 65, D: 8, Dv: 5})
	// unmasked and long: the forward's larger tiles, several of each
	add("noncausal/M=600/N=1100", attention.Config{B: 1, Hq: 2, Hkv: 1, M: 600, N: 1100, D: 8, Dv: 5})
	add("noncausal-window/M=N=130/W=17", attention.Config{B: 1, Hq: 4, Hkv: 2, M: 130, N: 130, D: 8, Dv: 8, Window: 17})
	// sliding windows
	add("window/M=N=130/W=17", attention.Config{B: 2, Hq: 4, Hkv: 2, M: 130, N: 130, D: 8, Dv: 8, Causal: true, Window: 17})
	add("window/M=N=130/W=64", attention.Config{B: 1, Hq: 2, Hkv: 2, M: 130, N: 130, D: 8, Dv: 8, Causal: true, Window: 64})
	add("window/M=7/N=130/W=70", attention.Config{B: 1, Hq: 3, Hkv: 1, M: 7, N: 130, D: 8, Dv: 8, Causal: true, Window: 70})
	// the three conventions when M != N
	for conv := attention.Positions; conv <= attention.TopLeft; conv++ {
		add(fmt.Sprintf("convention=%s/M=65/N=130", conv),
			attention.Config{B: 2, Hq: 4, Hkv: 2, M: 65, N: 130, D: 8, Dv: 8, Causal: true, Convention: conv})
		add(fmt.Sprintf("convention=%s/M=65/N=130/W=40", conv),
			attention.Config{B: 1, Hq: 2, Hkv: 1, M: 65, N: 130, D: 8, Dv: 8, Causal: true, Window: 40, Convention: conv})
	}
	// a window wider than any distance, with index coordinates below zero
	// (bottom-right, M > N): it must bound nothing
	add("noncausal-window=MaxInt/bottom-right/M=130/N=65",
		attention.Config{B: 1, Hq: 2, Hkv: 1, M: 130, N: 65, D: 8, Dv: 8, Window: math.MaxInt, Convention: attention.BottomRight})
	add("convention=top-left/M=130/N=65",
		attention.Config{B: 1, Hq: 2, Hkv: 1, M: 130, N: 65, D: 8, Dv: 8, Causal: true, Convention: attention.TopLeft})
	// padding, left and right, positions from validity
	add("left-pad/M=N=130", padded(2, 4, 2, 130, 130, 8, 8, true, []int{0, 70}))
	add("left-pad/M=7/N=130", padded(2, 4, 2, 130, 7, 8, 8, true, []int{3, 64}))
	add("right-pad/M=N=130", padded(2, 2, 1, 130, 130, 8, 8, false, []int{1, 66}))
	wp := padded(2, 2, 2, 130, 130, 8, 8, true, []int{5, 65})
	wp.Window = 30
	add("left-pad-window/M=N=130/W=30", wp)
	// packed documents with segment ids
	add("segments/M=N=130", packed(4, 2, 130, 8, 8, 50, 1, 79))
	add("segments/M=65/N=130", packed(2, 1, 65, 8, 8, 64, 3, 63))
	sw := packed(2, 2, 130, 8, 8, 70, 60)
	sw.Window = 20
	add("segments-window/M=N=130/W=20", sw)
	// explicit positions with gaps (an evicted cache): keys at 0, 2, 5, 7, 10, …
	const M, N = 65, 130
	kpos := make([]int, N)
	for j := range kpos {
		kpos[j] = j*2 + j%3
	}
	qpos := make([]int, M)
	for i := range qpos {
		qpos[i] = kpos[N-M+i]
	}
	add("explicit-positions/M=65/N=130", attention.Config{B: 1, Hq: 2, Hkv: 1, M: M, N: N, D: 8, Dv: 8, Causal: true, KPos: kpos, QPos: qpos})
	add("explicit-positions-window/M=65/N=130/W=33", attention.Config{B: 1, Hq: 2, Hkv: 1, M: M, N: N, D: 8, Dv: 8, Causal: true, Window: 33, KPos: kpos, QPos: qpos})
	return cs
}

// run holds one attention call's inputs and results in float64.
type run struct{ o, lse, dq, dk, dv []float64 }

func inputs(c *attention.Config, seed uint64) (q, k, v, do []float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	return fill(c.B * c.Hq * c.M * c.D), fill(c.B * c.Hkv * c.N * c.D), fill(c.B * c.Hkv * c.N * c.Dv), fill(c.B * c.Hq * c.M * c.Dv)
}

func newRun(c *attention.Config) run {
	return run{
		o: make([]float64, c.B*c.Hq*c.M*c.Dv), lse: make([]float64, c.B*c.Hq*c.M),
		dq: make([]float64, c.B*c.Hq*c.M*c.D), dk: make([]float64, c.B*c.Hkv*c.N*c.D), dv: make([]float64, c.B*c.Hkv*c.N*c.Dv),
	}
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, e := range x {
		y[i] = float32(e)
	}
	return y
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, e := range x {
		y[i] = float64(e)
	}
	return y
}

// mixedError returns the worst |got − want| / (1 + |want|) and where; equal
// infinities agree, NaN is infinitely wrong.
func mixedError(got, want []float64) (worst float64, at int) {
	for i := range want {
		if got[i] == want[i] {
			continue
		}
		d := math.Abs(got[i]-want[i]) / (1 + math.Abs(want[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

func compareRuns(t *testing.T, got, want run, tol float64) (worst float64) {
	t.Helper()
	for _, x := range []struct {
		name      string
		got, want []float64
	}{{"o", got.o, want.o}, {"lse", got.lse, want.lse}, {"dq", got.dq, want.dq}, {"dk", got.dk, want.dk}, {"dv", got.dv, want.dv}} {
		d, at := mixedError(x.got, x.want)
		worst = max(worst, d)
		if d > tol {
			t.Errorf("%s[%d] = %.9g, reference %.9g (error %.2g > %.2g)", x.name, at, x.got[at], x.want[at], d, tol)
		}
	}
	return worst
}

// TestFlashMatchesReference compares the fused attention with the reference
// on every configuration of flashCases, forward and all gradients: in
// float64 within 1e-12 and in float32 (against the float64 reference) within
// 1e-5, both as |a − b| / (1 + |b|).
func TestFlashMatchesReference(t *testing.T) {
	var worst64, worst32 float64
	for x, tc := range flashCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := &tc.c
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			q, k, v, do := inputs(c, uint64(x))
			want := newRun(c)
			if err := attention.Reference[float64]().Run(want.o, want.lse, want.dq, want.dk, want.dv, q, k, v, do, c); err != nil {
				t.Fatal(err)
			}
			got := newRun(c)
			if err := attention.FlashRun(got.o, got.lse, got.dq, got.dk, got.dv, q, k, v, do, c); err != nil {
				t.Fatal(err)
			}
			worst64 = max(worst64, compareRuns(t, got, want, 1e-12))

			o, lse := make([]float32, len(want.o)), make([]float32, len(want.lse))
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			if err := attention.FlashRun(o, lse, dq, dk, dv, to32(q), to32(k), to32(v), to32(do), c); err != nil {
				t.Fatal(err)
			}
			worst32 = max(worst32, compareRuns(t, run{to64(o), to64(lse), to64(dq), to64(dk), to64(dv)}, want, 1e-5))
		})
	}
	t.Logf("worst error against the reference: float64 %.1e, float32 %.1e", worst64, worst32)
}

// TestFlashEmptyRowWritesNothing checks that a valid row with no visible key
// is rejected with the reference's error before anything is written.
func TestFlashEmptyRowWritesNothing(t *testing.T) {
	// Item 1's query 100 is in segment 9, which no key belongs to.
	c := packed(2, 1, 130, 4, 4, 130)
	c.B = 1
	c.QSeg = append([]int(nil), c.QSeg...)
	c.QSeg[100] = 9
	q, k, v, _ := inputs(&c, 1)
	o, lse := make([]float64, c.Hq*c.M*c.Dv), make([]float64, c.Hq*c.M)
	for i := range o {
		o[i] = -7
	}
	err := attention.FlashForward(o, lse, q, k, v, &c)
	refErr := attention.Forward(make([]float64, len(o)), make([]float64, len(lse)), make([]float64, c.Hq*c.M*c.N), q, k, v, &c)
	if err == nil || refErr == nil || err.Error() != refErr.Error() {
		t.Fatalf("flash error %v, reference error %v", err, refErr)
	}
	for _, x := range o {
		if x != -7 {
			t.Fatalf("FlashForward wrote its output before rejecting the input")
		}
	}
}

// TestFlashThreadsBitIdentical runs forward and backward with one thread and
// with two: every output and gradient must be bit-identical, because the
// work partition depends on the shape alone. The shapes make the backward
// split key tiles into stripes (B·Hkv < 8) and cross many tiles.
func TestFlashThreadsBitIdentical(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []*attention.Config{
		{B: 1, Hq: 4, Hkv: 2, M: 300, N: 300, D: 16, Dv: 16, Causal: true},
		{B: 3, Hq: 3, Hkv: 3, M: 200, N: 333, D: 8, Dv: 12, Causal: true, Window: 90},
		{B: 1, Hq: 2, Hkv: 1, M: 700, N: 1100, D: 8, Dv: 8}, // unmasked: the larger tiles
	} {
		q, k, v, do := inputs(c, 3)
		var runs [2]run
		for x, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			runs[x] = newRun(c)
			r := runs[x]
			if err := attention.FlashRun(r.o, r.lse, r.dq, r.dk, r.dv, q, k, v, do, c); err != nil {
				t.Fatal(err)
			}
		}
		if d := compareRuns(t, runs[1], runs[0], 0); d != 0 {
			t.Errorf("M=%d N=%d: 1 and 2 threads differ by %.2g", c.M, c.N, d)
		}
	}
}

// benchConfig is the benchmark shape: one sequence of n tokens, 8 heads of
// 64, causal, float32.
func benchConfig(n int) (*attention.Config, []float32, []float32, []float32, []float32) {
	c := &attention.Config{B: 1, Hq: 8, Hkv: 8, M: n, N: n, D: 64, Dv: 64, Causal: true}
	q, k, v, do := inputs(c, 1)
	return c, to32(q), to32(k), to32(v), to32(do)
}

var benchSizes = []int{256, 512, 1024, 2048}

// reportFlops reports GFLOP/s counting flops as the full (non-causal) matrix
// products of an unfused implementation would: 4·n²·D·H for the forward
// (Q Kᵀ and P V) and 8·n²·D·H for the backward (dV, dP, dQ, dK), so that
// fused and unfused numbers compare as time.
//
// It also reports GFLOP per CPU-second of the process since cpu0 (see
// cpuTime): when other jobs share the machine, wall time says more about
// them than about the kernel.
func reportFlops(b *testing.B, c *attention.Config, perHead int, cpu0 time.Duration) {
	flops := float64(perHead) * float64(c.M) * float64(c.N) * float64(c.D) * float64(c.Hq)
	b.ReportMetric(flops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GFLOP/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(flops*float64(b.N)/float64(cpu.Nanoseconds()), "GFLOP/cpu-s")
	}
}

func BenchmarkFlashForward(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c, q, k, v, _ := benchConfig(n)
			o, lse := make([]float32, len(q)), make([]float32, c.Hq*n)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
					b.Fatal(err)
				}
			}
			reportFlops(b, c, 4, cpu0)
		})
	}
}

func BenchmarkFlashBackward(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c, q, k, v, do := benchConfig(n)
			o, lse := make([]float32, len(q)), make([]float32, c.Hq*n)
			if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
				b.Fatal(err)
			}
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				attention.FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c)
			}
			reportFlops(b, c, 8, cpu0)
		})
	}
}

// BenchmarkFlashShapes times the fused forward and forward+backward in
// float32 at n = 1024, H = 8, D = 64 and 128, causal and full: the shapes of
// attnlab bench's rows.
func BenchmarkFlashShapes(b *testing.B) {
	for _, D := range []int{64, 128} {
		for _, causal := range []bool{true, false} {
			c := &attention.Config{B: 1, Hq: 8, Hkv: 8, M: 1024, N: 1024, D: D, Dv: D, Causal: causal}
			q64, k64, v64, do64 := inputs(c, 1)
			q, k, v, do := to32(q64), to32(k64), to32(v64), to32(do64)
			o, lse := make([]float32, len(q)), make([]float32, c.Hq*c.M)
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			mask := "full"
			if causal {
				mask = "causal"
			}
			b.Run(fmt.Sprintf("fwd/D=%d/%s", D, mask), func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
						b.Fatal(err)
					}
				}
				reportFlops(b, c, 4, cpu0)
			})
			b.Run(fmt.Sprintf("fwd+bwd/D=%d/%s", D, mask), func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					if err := attention.FlashRun(o, lse, dq, dk, dv, q, k, v, do, c); err != nil {
						b.Fatal(err)
					}
				}
				reportFlops(b, c, 12, cpu0)
			})
		}
	}
}

func BenchmarkReferenceForward(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c, q, k, v, _ := benchConfig(n)
			o, lse, p := make([]float32, len(q)), make([]float32, c.Hq*n), make([]float32, c.Hq*n*n)
			cpu0 := cpuTime()
			for b.Loop() {
				if err := attention.Forward(o, lse, p, q, k, v, c); err != nil {
					b.Fatal(err)
				}
			}
			reportFlops(b, c, 4, cpu0)
		})
	}
}

func BenchmarkReferenceBackward(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c, q, k, v, do := benchConfig(n)
			o, lse, p := make([]float32, len(q)), make([]float32, c.Hq*n), make([]float32, c.Hq*n*n)
			if err := attention.Forward(o, lse, p, q, k, v, c); err != nil {
				b.Fatal(err)
			}
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			cpu0 := cpuTime()
			for b.Loop() {
				attention.Backward(dq, dk, dv, do, q, k, v, p, c)
			}
			reportFlops(b, c, 8, cpu0)
		})
	}
}

// BenchmarkFlashMemory reports the bytes one call allocates at
// M = N = 4096 (B = 1, H = 1, D = 64, float32), where an M×N score matrix
// would take 64 MiB.
func BenchmarkFlashMemory(b *testing.B) {
	const n = 4096
	c := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: n, N: n, D: 64, Dv: 64, Causal: true}
	q64, k64, v64, do64 := inputs(c, 1)
	q, k, v, do := to32(q64), to32(k64), to32(v64), to32(do64)
	o, lse := make([]float32, len(q)), make([]float32, n)
	dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			attention.FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c)
		}
	})
}

// BenchmarkFlashVariants times the fused forward and backward of one size
// (n = 1024) plain and with each variant, so that benchstat gives the
// variants' cost as ratios of the same run:
//
//	go test ./attention -run '^$' -bench FlashVariants -count 10 | benchstat -col /variant -
func BenchmarkFlashVariants(b *testing.B) {
	for _, pass := range []string{"forward", "backward"} {
		for _, variant := range []string{"plain", "sinks", "alibi", "softcap"} {
			b.Run(fmt.Sprintf("pass=%s/variant=%s", pass, variant), func(b *testing.B) {
				c, q, k, v, do := benchConfig(1024)
				switch variant {
				case "sinks":
					c.Sinks = make([]float64, c.Hq)
				case "alibi":
					for h := range c.Hq {
						c.Alibi = append(c.Alibi, 1/float64(int(2)<<h))
					}
				case "softcap":
					c.Softcap = 30
				}
				o, lse := make([]float32, len(q)), make([]float32, c.Hq*c.M)
				if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
					b.Fatal(err)
				}
				dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
				for b.Loop() {
					if pass == "forward" {
						if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
							b.Fatal(err)
						}
					} else {
						attention.FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c)
					}
				}
			})
		}
	}
}
