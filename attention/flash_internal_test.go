package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// FlashRunTiles is FlashRun with tiles of br queries and bc keys, and with
// noSkip every tile computed under the exact rule, exported to the external
// tests so that the checks' small shapes cross tile boundaries.
func FlashRunTiles[T Float](br, bc int, noSkip bool) func(o, lse, dq, dk, dv, q, k, v, do []T, c *Config) error {
	opt := flashOptions{br: br, bc: bc, noSkip: noSkip}
	return func(o, lse, dq, dk, dv, q, k, v, do []T, c *Config) error {
		if err := flashForward(o, lse, q, k, v, c, opt); err != nil {
			return err
		}
		if do != nil {
			flashBackward(dq, dk, dv, do, q, k, v, o, lse, c, opt)
		}
		return nil
	}
}

// TestFlashSkipsHiddenTiles counts the tiles of 64 × 64 by kind in forward
// and backward, and checks that computing every tile under the exact rule
// (nothing skipped, nothing taken as full) gives the same results exactly.
func TestFlashSkipsHiddenTiles(t *testing.T) {
	// Bit-equality holds between the plain tile loops; the SIMD products of
	// full tiles round differently from the masked loops of partial ones.
	useVec = false
	defer func() { useVec = true }()
	const T = 256 // 4 × 4 tiles
	leftPad := make([]bool, T)
	for i := 70; i < T; i++ {
		leftPad[i] = true
	}
	padPos := PositionsFromValidity(leftPad, 1, T)
	seg := make([]int, T)
	segPos := make([]int, T)
	for i := range T {
		seg[i], segPos[i] = i/128, i%128
	}
	for _, tc := range []struct {
		name                   string
		c                      Config
		skipped, partial, full int64
	}{
		// below the diagonal full, on it partial, above it skipped
		{"causal", Config{Causal: true}, 6, 4, 6},
		// a window of 64: only the diagonal and the one below remain
		{"causal-window=64", Config{Causal: true, Window: 64}, 9, 7, 0},
		// 64 queries against 256 keys, top-left: the first key tile only;
		// with the default (position) convention the same chunk sees them all
		{"top-left/M=64", Config{Causal: true, Convention: TopLeft, M: 64}, 3, 1, 0},
		{"position/M=64", Config{Causal: true, M: 64}, 0, 1, 3},
		// 70 pads on the left: query tile 0 and key tile 0 are all padding;
		// key tile 1 holds 6 pads, so every tile that meets it is partial
		{"left-pad=70", Config{Causal: true, QValid: leftPad, KValid: leftPad, QPos: padPos, KPos: padPos}, 10, 5, 1},
		// two documents of 128: tiles across documents are skipped
		{"segments=128+128", Config{Causal: true, QSeg: seg, KSeg: seg, QPos: segPos, KPos: segPos}, 10, 4, 2},
		// no mask: everything full
		{"none", Config{}, 0, 0, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.B, c.Hq, c.Hkv, c.N, c.D, c.Dv = 1, 1, 1, T, 16, 16
			if c.M == 0 {
				c.M = T
			}
			r := rand.New(rand.NewPCG(5, 5))
			in := randomSlices(r, c.M*c.D, c.N*c.D, c.N*c.Dv, c.M*c.Dv)
			q, k, v, do := in[0], in[1], in[2], in[3]
			results := [2][5][]float64{}
			for x, noSkip := range []bool{false, true} {
				var fwd, bwd tileStats
				o, lse := make([]float64, c.M*c.Dv), make([]float64, c.M)
				dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
				// 64×64 tiles in both passes (their own are larger)
				if err := flashForward(o, lse, q, k, v, &c, flashOptions{br: flashBr, bc: flashBc, noSkip: noSkip, stats: &fwd}); err != nil {
					t.Fatal(err)
				}
				flashBackward(dq, dk, dv, do, q, k, v, o, lse, &c, flashOptions{br: flashBr, bc: flashBc, noSkip: noSkip, stats: &bwd})
				results[x] = [5][]float64{o, lse, dq, dk, dv}
				want := [3]int64{tc.skipped, tc.partial, tc.full}
				if noSkip {
					want = [3]int64{0, tc.skipped + tc.partial + tc.full, 0}
				}
				for _, s := range []struct {
					pass string
					st   *tileStats
				}{{"forward", &fwd}, {"backward", &bwd}} {
					got := [3]int64{s.st.skipped.Load(), s.st.partial.Load(), s.st.full.Load()}
					if got != want {
						t.Errorf("noSkip=%v, %s: (skipped, partial, full) = %v, want %v", noSkip, s.pass, got, want)
					}
				}
				if !noSkip {
					t.Logf("forward and backward: %d of %d tiles skipped, %d partial, %d full", tc.skipped, tc.skipped+tc.partial+tc.full, tc.partial, tc.full)
				}
			}
			for x, name := range []string{"o", "lse", "dq", "dk", "dv"} {
				for i, a := range results[0][x] {
					if b := results[1][x][i]; a != b {
						t.Fatalf("%s[%d] = %.17g with tile skipping, %.17g without", name, i, a, b)
					}
				}
			}
		})
	}
}

// TestDecodeSkipsHiddenTiles: one query at position 8191 with a window of
// 1000 sees keys 7192..8191; of the 128 key tiles of 64, tiles 0..111 are
// skipped, tile 112 (keys 7168..7231) is partial and 113..127 are full.
func TestDecodeSkipsHiddenTiles(t *testing.T) {
	c := &Config{B: 1, Hq: 2, Hkv: 1, M: 1, N: 8192, D: 8, Dv: 8, Causal: true, Window: 1000}
	r := rand.New(rand.NewPCG(3, 3))
	in := randomSlices(r, c.Hq*c.D, c.N*c.D, c.N*c.Dv)
	var st tileStats
	o, lse := make([]float64, c.Hq*c.Dv), make([]float64, c.Hq)
	if err := decodeForward(o, lse, in[0], in[1], in[2], c, flashOptions{bc: flashBc, stats: &st}); err != nil {
		t.Fatal(err)
	}
	if got := [3]int64{st.skipped.Load(), st.partial.Load(), st.full.Load()}; got != [3]int64{112, 1, 15} {
		t.Errorf("(skipped, partial, full) = %v, want [112 1 15]", got)
	}
	want, p := make([]float64, len(o)), make([]float64, c.Hq*c.N)
	if err := Forward(want, make([]float64, c.Hq), p, in[0], in[1], in[2], c); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if d := math.Abs(o[i] - want[i]); d > 1e-12*(1+math.Abs(want[i])) {
			t.Fatalf("o[%d] = %.17g, reference %.17g", i, o[i], want[i])
		}
	}
}

// TestFlashHiddenSlotsMayHoldNaN fills every padding key, value and query
// (and its dO) with NaN, as an unwritten cache slot may hold: the real
// tokens' outputs and gradients must equal those of a run with zeros there,
// because a hidden key is a select, never 0 · x.
func TestFlashHiddenSlotsMayHoldNaN(t *testing.T) {
	// With the plain loops the two runs are bit-identical; with SIMD
	// products a tile of finite values takes another summation order than
	// one holding NaN, so the comparison is to rounding (TestFlashMatches
	// covers that): here the loops, where the claim is exact.
	useVec = false
	defer func() { useVec = true }()
	const B, T, H, D = 2, 150, 2, 8
	valid := make([]bool, B*T)
	for i := range valid {
		b, s := i/T, i%T
		valid[i] = (b == 0 && s >= 67) || (b == 1 && s < 90) // left and right padding
	}
	pos := PositionsFromValidity(valid, B, T)
	c := &Config{B: B, Hq: H, Hkv: 1, M: T, N: T, D: D, Dv: D, Causal: true, QValid: valid, KValid: valid, QPos: pos, KPos: pos}
	r := rand.New(rand.NewPCG(9, 9))
	in := randomSlices(r, B*H*T*D, B*T*D, B*T*D, B*H*T*D)
	fillPads := func(x []float64, heads int, with float64) []float64 {
		y := append([]float64(nil), x...)
		for b := range B {
			for h := range heads {
				for s := range T {
					if !valid[b*T+s] {
						for e := range D {
							y[((b*heads+h)*T+s)*D+e] = with
						}
					}
				}
			}
		}
		return y
	}
	var out [2][5][]float64
	for x, with := range []float64{0, math.NaN()} {
		q, k, v, do := fillPads(in[0], H, with), fillPads(in[1], 1, with), fillPads(in[2], 1, with), fillPads(in[3], H, with)
		o, lse := make([]float64, len(q)), make([]float64, B*H*T)
		dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
		if err := flashForward(o, lse, q, k, v, c, flashOptions{br: 16, bc: 16}); err != nil {
			t.Fatal(err)
		}
		flashBackward(dq, dk, dv, do, q, k, v, o, lse, c, flashOptions{br: 16, bc: 16})
		out[x] = [5][]float64{o, lse, dq, dk, dv}
	}
	for x, name := range []string{"o", "lse", "dq", "dk", "dv"} {
		for i, a := range out[0][x] {
			if b := out[1][x][i]; a != b {
				t.Fatalf("%s[%d] = %.17g with zeros in the pads, %.17g with NaN", name, i, a, b)
			}
		}
	}
}

// TestFlashMemory measures what one forward and one backward allocate at
// M = N = 4096 (B = 1, H = 1, D = 64, float32, causal), where a score matrix
// alone would take M·N·4 = 64 MiB. The forward keeps only per-token mask data
// and tiles; the backward adds Δ and, with B·Hkv = 1 < 8, the partial dQ of 7
// more stripes (7·M·D·4 = 7 MiB).
func TestFlashMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4096 × 4096 attention")
	}
	// The kernel's own allocations; the SIMD products draw their packing
	// buffers from package vec's pool, which a GC empties.
	useVec = false
	defer func() { useVec = true }()
	const n, d = 4096, 64
	c := &Config{B: 1, Hq: 1, Hkv: 1, M: n, N: n, D: d, Dv: d, Causal: true}
	r := rand.New(rand.NewPCG(1, 1))
	in := randomSlices(r, n*d, n*d, n*d, n*d)
	q, k, v, do := to32(in[0]), to32(in[1]), to32(in[2]), to32(in[3])
	o, lse := make([]float32, n*d), make([]float32, n)
	dq, dk, dv := make([]float32, n*d), make([]float32, n*d), make([]float32, n*d)
	scores := float64(n * n * 4)
	fwd := testing.AllocsPerRun(1, func() {
		if err := FlashForward(o, lse, q, k, v, c); err != nil {
			t.Fatal(err)
		}
	})
	fwdBytes := allocated(func() { FlashForward(o, lse, q, k, v, c) })
	bwdBytes := allocated(func() { FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c) })
	t.Logf("M = N = %d: forward %d allocations, %.0f KiB (%.2f%% of M·N·4); backward %.0f KiB (%.1f%%)",
		n, int(fwd), fwdBytes/1024, 100*fwdBytes/scores, bwdBytes/1024, 100*bwdBytes/scores)
	if fwdBytes > scores/100 {
		t.Errorf("forward allocated %.0f bytes, more than 1%% of an M×N score matrix", fwdBytes)
	}
	if partial := float64(7 * n * d * 4); bwdBytes > partial+scores/100 {
		t.Errorf("backward allocated %.0f bytes, more than the partial dQ (%.0f) plus 1%% of an M×N matrix", bwdBytes, partial)
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) float64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc - before.TotalAlloc)
}

// TestEmptyRowAgreesWithTheRule compares the per-row emptiness test, in both
// its forms (a scan for few rows, a sorted search for many), with the rule
// itself over random masks: random validity, positions, segments, windows
// and conventions, M = 5 and M = 40. Where no row is empty, the fused
// attention must match the reference on the same mask.
func TestEmptyRowAgreesWithTheRule(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	errs := 0
	for trial := range 400 {
		M := []int{5, 40}[trial%2]
		N := M + r.IntN(30)
		c := &Config{B: 2, Hq: 1, Hkv: 1, M: M, N: N, D: 1, Dv: 1, Causal: r.IntN(4) != 0,
			Convention: Convention(r.IntN(3))}
		if r.IntN(2) == 0 {
			c.Window = 1 + r.IntN(6)
		}
		c.QValid, c.KValid = make([]bool, 2*M), make([]bool, 2*N)
		for i := range c.QValid {
			c.QValid[i] = r.IntN(5) != 0
		}
		for j := range c.KValid {
			c.KValid[j] = r.IntN(3) != 0
		}
		if r.IntN(2) == 0 {
			c.QPos, c.KPos = make([]int, 2*M), make([]int, 2*N)
			for i := range c.QPos {
				c.QPos[i] = r.IntN(N + 5)
			}
			for j := range c.KPos {
				c.KPos[j] = r.IntN(N + 5)
			}
		}
		if r.IntN(2) == 0 {
			c.QSeg, c.KSeg = make([]int, 2*M), make([]int, 2*N)
			for i := range c.QSeg {
				c.QSeg[i] = r.IntN(3)
			}
			for j := range c.KSeg {
				c.KSeg[j] = r.IntN(3)
			}
		}
		var want error
	search:
		for b := range c.B {
			for i := range M {
				if !c.QueryValid(b, i) {
					continue
				}
				seen := false
				for j := range N {
					seen = seen || c.Visible(b, i, j)
				}
				if !seen {
					want = &EmptyRowError{Batch: b, Row: i, Pos: c.QueryPos(b, i)}
					break search
				}
			}
		}
		got := newMaskPlan(c, 4, 4).emptyRow(c)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("trial %d (M=%d): emptyRow says %v, the rule says %v", trial, M, got, want)
		}
		if want != nil {
			errs++
			continue
		}
		// No empty row: the fused attention on tiles of 4 × 3 must match the
		// reference on this arbitrary mask, forward and backward.
		in := randomSlices(r, 2*2*M*2, 2*N*2, 2*N*3, 2*2*M*3) // B = 2, Hq = 2, Hkv = 1, D = 2, Dv = 3
		cc := *c
		cc.Hq, cc.D, cc.Dv = 2, 2, 3
		var res [2][5][]float64
		for x := range res {
			o, lse := make([]float64, 2*2*M*3), make([]float64, 2*2*M)
			dq, dk, dv := make([]float64, len(in[0])), make([]float64, len(in[1])), make([]float64, len(in[2]))
			run := Reference[float64]().Run
			if x == 1 {
				run = FlashRunTiles[float64](4, 3, false)
			}
			if err := run(o, lse, dq, dk, dv, in[0], in[1], in[2], in[3], &cc); err != nil {
				t.Fatal(err)
			}
			res[x] = [5][]float64{o, lse, dq, dk, dv}
		}
		for y, name := range []string{"o", "lse", "dq", "dk", "dv"} {
			for i, a := range res[0][y] {
				if b := res[1][y][i]; a != b && math.Abs(a-b) > 1e-12*(1+math.Abs(a)) {
					t.Fatalf("trial %d: %s[%d] = %.17g, reference %.17g", trial, name, i, b, a)
				}
			}
		}
	}
	t.Logf("400 random masks, %d with an empty row; the others match the reference on 4 × 3 tiles", errs)
}

// TestExpShiftFlush: float32 weights below flushBelow become exact zeros and
// the row is reported dead only when none is left; the sum is of the
// unflushed weights. float64 rows are never flushed.
func TestExpShiftFlush(t *testing.T) {
	s := []float32{0, -30, -50, float32(math.Inf(-1))} // e⁰, e⁻³⁰ ≈ 9e-14, e⁻⁵⁰ ≈ 2e-22 < 2⁻⁶⁴ ≈ 5e-20
	p := make([]float32, len(s))
	sum, live := expShift(p, s, 0)
	if !live || p[0] != 1 || p[1] == 0 || p[2] != 0 || p[3] != 0 {
		t.Errorf("expShift(%v) = %v, live %v; want [1 ~9e-14 0 0], live", s, p, live)
	}
	if d := math.Abs(float64(sum) - (1 + math.Exp(-30) + math.Exp(-50))); d > 1e-6 {
		t.Errorf("sum = %v, want 1 + e⁻³⁰ + e⁻⁵⁰", sum)
	}
	if _, live := expShift(p, []float32{-50, -60, float32(math.Inf(-1))}, 0); live || p[0] != 0 || p[1] != 0 {
		t.Errorf("a row of weights below 2⁻⁶⁴: %v, live %v; want zeros, dead", p[:3], live)
	}
	p64 := make([]float64, 2)
	if _, live := expShift(p64, []float64{-50, -800}, 0); !live || p64[0] != math.Exp(-50) || p64[1] != 0 {
		t.Errorf("float64: %v, live %v; want [e⁻⁵⁰ 0], live", p64, live)
	}
}

// TestFlashSkipsDeadTiles: with a steep ALiBi slope the far key tiles of a
// causal float32 pass have every weight flushed to 0; their products are
// skipped in both passes (counted), and the outputs and gradients still agree
// with the float64 pass to float32's rounding. Plain attention has none.
func TestFlashSkipsDeadTiles(t *testing.T) {
	const n = 512
	for _, slope := range []float64{0, 1} {
		c := Config{B: 1, Hq: 2, Hkv: 1, M: n, N: n, D: 16, Dv: 16, Causal: true}
		if slope > 0 {
			c.Alibi = []float64{slope, slope / 64}
		}
		r := rand.New(rand.NewPCG(9, 9))
		in := randomSlices(r, c.Hq*n*c.D, n*c.D, n*c.Dv, c.Hq*n*c.Dv)
		out64 := flashAll(t, &c, in, nil, nil)
		in32 := make([][]float32, len(in))
		for x := range in {
			in32[x] = make([]float32, len(in[x]))
			for i, v := range in[x] {
				in32[x][i] = float32(v)
			}
		}
		var fwd, bwd tileStats
		out32 := flashAll(t, &c, in32, &fwd, &bwd)
		dead := [2]int64{fwd.dead.Load(), bwd.dead.Load()}
		// slope 1 on head 0: a key d positions back weighs about e⁻ᵈ (q·k
		// moves it by a few units), below 2⁻⁶⁴ ≈ e⁻⁴⁴ from d ≈ 50 on. Key
		// tile kt is at least 64·(qt − kt) − 63 positions behind query tile
		// qt, so the tiles two or more behind are dead: 1 + 2 + … + 6 = 21
		// of the 36 causal pairs of 512/64 = 8 tiles. Head 1 (slope 1/64)
		// has none.
		want := [2]int64{21, 21}
		if slope == 0 {
			want = [2]int64{0, 0}
		}
		if dead != want {
			t.Errorf("slope %g: dead tiles (forward, backward) = %v, want %v", slope, dead, want)
		}
		for x, name := range []string{"o", "dq", "dk", "dv"} {
			worst := 0.0
			for i, want := range out64[x] {
				worst = max(worst, math.Abs(float64(out32[x][i])-want)/(1+math.Abs(want)))
			}
			if worst > 1e-5 {
				t.Errorf("slope %g: %s differs from float64 by %.3g", slope, name, worst)
			}
		}
		t.Logf("slope %g: %d tiles dead in the forward, %d in the backward", slope, dead[0], dead[1])
	}
}

func flashAll[T Float](t *testing.T, c *Config, in [][]T, fwd, bwd *tileStats) [4][]float64 {
	t.Helper()
	q, k, v, do := in[0], in[1], in[2], in[3]
	o, lse := make([]T, len(do)), make([]T, c.Hq*c.M)
	dq, dk, dv := make([]T, len(q)), make([]T, len(k)), make([]T, len(v))
	// 64×64 tiles in both passes, so that the dead tiles compare
	if err := flashForward(o, lse, q, k, v, c, flashOptions{br: flashBr, bc: flashBc, stats: fwd}); err != nil {
		t.Fatal(err)
	}
	flashBackward(dq, dk, dv, do, q, k, v, o, lse, c, flashOptions{br: flashBr, bc: flashBc, stats: bwd})
	var out [4][]float64
	for x, s := range [][]T{o, dq, dk, dv} {
		out[x] = make([]float64, len(s))
		for i, v := range s {
			out[x][i] = float64(v)
		}
	}
	return out
}

// TestDenseTiles: an unmasked forward's tiles cover the queries in tiles of
// at most denseBr rows, multiples of 6 (the AVX2 micro-kernel's rows) up to
// the last, at least fwdMinItems work items where there are enough rows,
// and key tiles of denseBc; a masked call keeps the 128×128 tiles.
func TestDenseTiles(t *testing.T) {
	for _, c := range []Config{
		{B: 1, Hq: 8, Hkv: 8, M: 4096, N: 4096},
		{B: 1, Hq: 8, Hkv: 8, M: 1024, N: 1024},
		{B: 1, Hq: 8, Hkv: 2, M: 512, N: 512},
		{B: 1, Hq: 1, Hkv: 1, M: 4096, N: 300},
		{B: 2, Hq: 2, Hkv: 1, M: 20, N: 20},
		{B: 1, Hq: 1, Hkv: 1, M: 5, N: 3000},
	} {
		if !unmasked(&c) {
			t.Fatalf("%+v: not unmasked", c)
		}
		br, bc := denseTiles(&c)
		nqt := (c.M + br - 1) / br
		items := nqt * c.B * c.Hkv
		if br < 1 || br > denseBr || (br%6 != 0 && br != c.M) || bc != min(denseBc, c.N) {
			t.Errorf("M=%d N=%d: tiles %d×%d", c.M, c.N, br, bc)
		}
		if items < fwdMinItems && br > 6 {
			t.Errorf("M=%d B·Hkv=%d: %d items of %d rows", c.M, c.B*c.Hkv, items, br)
		}
	}
	for _, c := range []Config{
		{B: 1, Hq: 1, Hkv: 1, M: 8, N: 8, Causal: true},
		{B: 1, Hq: 1, Hkv: 1, M: 8, N: 8, Window: 3},
		{B: 1, Hq: 1, Hkv: 1, M: 8, N: 8, KValid: make([]bool, 8)},
		{B: 1, Hq: 1, Hkv: 1, M: 8, N: 8, QSeg: make([]int, 8), KSeg: make([]int, 8)},
	} {
		if unmasked(&c) {
			t.Errorf("%+v: unmasked", c)
		}
	}
}
