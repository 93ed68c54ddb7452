package attention

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/attnlab/attnlab/internal/vec"
)

// The fused attention, FlashAttention-2 style [2]: tiles of queries against
// tiles of keys with an online softmax, S and P never materialised. It has
// the semantics of the reference (Forward, Backward) exactly: same Config,
// same mask rule, padding rows with zero output and lse = +Inf, the same
// *EmptyRowError.

// Tile sizes. At D = Dv = 64 in float32 a tile of K, of V and of S (64×64)
// is 16 KiB each: K, V and S fit together in the 48 KiB L1 data cache, and
// the Q tiles and output rows of a whole GQA group (G × 16 KiB) stay in the
// 1 MiB L2. In float64 everything doubles and still fits L2. Measured on
// that machine (n = 1024, H = 8, D = 64, float32, one thread, tiles of 32 to
// 128 a side): 64 × 64 is at the top for forward and backward alike, 32 or
// 128 keys a tile within noise of it, 128 queries a tile about a third
// slower in both passes. These are the base tiles: decoding's chunks are
// four key tiles of flashBc, and the tests' tile counts use them; with
// package vec's AVX2 kernels (A read in place, packing in assembly, the
// softmax row in one pass) the per-tile costs fell and larger tiles won on
// a Zen 3 (AVX2, 32 KiB L1d, 512 KiB L2 per core), so the forward and the
// backward have their own below.
const (
	flashBr = 64 // queries per tile
	flashBc = 64 // keys per tile
)

// The forward's own tiles are larger: it has two products per tile against
// the backward's five, so the per-tile costs (packing K and V, the online
// softmax's rescaling, each product's set-up) weigh more, and a 128×128
// score tile (64 KiB) still sits in L2 beside its K and V tiles. Measured on
// a 2-core Zen 3 (AVX2, 32 KiB L1d, 512 KiB L2), one thread, CPU time, n =
// 1024, H = 8, tiles from 64×64 to 128×128 in rounds: 128×128 was at or
// near the top in all four of D = 64 and 128, causal and full, 15–40 %
// above 64×64 (causal gains least: a tile astride the diagonal is computed
// whole).
const (
	fwdBr = 128
	fwdBc = 128
)

// Without any mask every tile is full, and larger tiles pay: fewer packings
// of K and V (one per query tile), fewer rescalings of the running output
// (one per key tile) and longer products. Measured as above (n = 4096, H =
// 8, 2 threads, tiles from 128×128 to 504×512 in rounds), 252×512 was
// 10–12 % above 128×128 at D = 64 and 128 and at or near the top of both.
// A masked call keeps 128×128: a tile astride the diagonal or a window's
// edge is computed whole, and larger ones waste more. The row tiles are
// multiples of 6, the AVX2 micro-kernel's rows (and of 14, AVX-512's, at
// 252), and the queries are split into at least fwdMinItems work items, so
// that two threads get even shares of a short call.
const (
	denseBr     = 252
	denseBc     = 512
	fwdMinItems = 8
)

// unmasked reports whether c lets every query see every key: no causal
// mask, window, validity or segments. Its tiles are all full.
func unmasked(c *Config) bool {
	return !c.Causal && c.Window == 0 && c.QValid == nil && c.KValid == nil && c.QSeg == nil && c.KSeg == nil
}

// denseTiles returns the forward's tile sizes for an unmasked call: key
// tiles of denseBc (the row sums, and so the bits, depend on them), and
// query tiles of at most denseBr rows, split evenly, a multiple of 6, with
// at least fwdMinItems tiles over the (batch item, KV head) pairs where the
// rows allow (which rows share a tile changes no result).
func denseTiles(c *Config) (br, bc int) {
	bc = max(1, min(denseBc, c.N))
	pairs := max(1, c.B*c.Hkv)
	nqt := max((c.M+denseBr-1)/denseBr, (fwdMinItems+pairs-1)/pairs)
	br = (c.M + nqt - 1) / nqt
	br = (br + 5) / 6 * 6
	return max(1, min(br, c.M)), bc
}

// The backward's tiles: 96×96. Measured as the forward's (one thread, CPU
// time, n = 1024, H = 8, tiles from 48×64 to 128×128): 96×96 was 10–18 %
// above 64×64 under a causal mask at D = 64 and 128 and within noise of it
// without one; 96 rows are 16 of the AVX2 micro-kernel's 6, so no product
// has an edge of rows.
const (
	bwdBr = 96
	bwdBc = 96
)

// bwdMinItems is the number of work items the backward aims for. Work is
// split over (batch item, KV head) first; only when B·Hkv is below this are
// the KV tiles of a head split into interleaved stripes, each with its own
// partial dQ. It is a constant, not the number of threads, so the partition,
// and with it every rounding, is the same whatever GOMAXPROCS is.
const bwdMinItems = 8

// flashOptions are the knobs tests turn; the zero value is the public
// behaviour.
type flashOptions struct {
	br, bc int        // tile sizes; 0 means flashBr, flashBc
	noSkip bool       // compute every tile with the exact rule (nothing skipped, nothing full)
	stats  *tileStats // counts the tiles by kind, once per (batch item, KV head) group
}

// tileStats counts (query tile, key tile) pairs by how they were computed.
type tileStats struct {
	skipped, partial, full atomic.Int64
	dead                   atomic.Int64 // computed, every weight 0 (expShift): products skipped, per head
}

func (s *tileStats) count(k tileKind) {
	if s == nil {
		return
	}
	switch k {
	case tileSkip:
		s.skipped.Add(1)
	case tilePartial:
		s.partial.Add(1)
	default:
		s.full.Add(1)
	}
}

// countDead counts a tile whose weights were all 0 after the exponential.
func (s *tileStats) countDead() {
	if s != nil {
		s.dead.Add(1)
	}
}

func (o flashOptions) plan(c *Config) *maskPlan {
	br, bc := o.br, o.bc
	if br == 0 {
		br = flashBr
	}
	if bc == 0 {
		bc = flashBc
	}
	p := newMaskPlan(c, br, bc)
	p.noSkip = o.noSkip
	return p
}

// FlashForward computes o and lse like Forward, without materialising S or P:
// for every batch item b and key/value head kvh, each tile of 128 queries
// (fwdBr) of the kvh's group of query heads meets the tiles of 128 keys
// (fwdBc) in turn,
//
//	S = Q Kᵀ · scale              (one tile)
//	m' = max(m, rowmax S)         running row maximum
//	P = exp(S − m')               l = e^(m−m') · l + rowsum P
//	O = e^(m−m') · O + P V        output rescaled when the maximum grows
//
// and at the end O /= l, lse = m + log l. The query heads of a group are
// processed together against each K/V tile, so each tile of K and V is
// loaded once per group, and K and V are never repeated per head.
//
// Tiles the mask hides are skipped, decided per (query tile, key tile) from
// per-tile extremes precomputed once per call. Write qc[i] and kc[j] for the
// coordinates the convention compares (logical positions under Positions;
// i + N − M and j under BottomRight; i and j under TopLeft), so that key j is
// visible to a valid query i iff lo[i] <= kc[j] <= hi[i] (hi = qc[i] when
// causal, lo = qc[i] − Window + 1 with a window), the key is valid and the
// segments match. A tile is skipped exactly when
//
//   - it holds no valid query or no valid key, or
//   - max kc over its valid keys < min lo over its valid queries (a window has
//     passed the whole tile), or
//   - min kc over its valid keys > max hi over its valid queries (the whole
//     tile is in the future: above the causal diagonal), or
//   - with segments, the ranges [min, max] of the segment ids of its valid
//     queries and of its valid keys do not overlap.
//
// A tile is computed without any mask when every query and key in it is
// valid, min kc >= max lo, max kc <= min hi and all share one segment id.
// Every other tile applies the rule per element from per-token arrays. A
// skipped tile holds no visible pair, so skipping changes no result.
//
// Without any mask (every tile full) the tiles are larger: at most 252
// queries (denseBr) by 512 keys (denseBc). Extra memory is O(B·(M+N)) for
// the per-token mask data and one score tile plus the running maximum and
// sum of G·br rows per worker; the output rows are accumulated in o itself.
// Work is split over (batch item, KV head, query tile) across runtime.GOMAXPROCS goroutines; every output element is
// computed by one work item in a fixed order, so results are bit-identical
// whatever the number of threads. For a single query against a long cache
// (M = 1), where a query tile gives one work item per (batch item, KV head),
// DecodeForward splits the keys across the cores instead.
//
// q is (B, Hq, M, D), k is (B, Hkv, N, D), v is (B, Hkv, N, Dv), o is
// (B, Hq, M, Dv) and lse is (B, Hq, M). FlashForward returns an
// *EmptyRowError, before writing anything, if a valid query row sees no key.
// It panics if c is invalid (see Config.Validate) or a slice has the wrong
// length.
func FlashForward[T Float](o, lse, q, k, v []T, c *Config) error {
	return flashForward(o, lse, q, k, v, c, flashOptions{})
}

// FlashBackward adds the gradients of a scalar loss into dq, dk and dv, given
// dO = ∂L/∂O and the o and lse of a successful forward (FlashForward or
// Forward). It never stores P: per tile it recomputes
//
//	P = exp(S − lse)              (0 for hidden keys and padding queries)
//	dV += Pᵀ dO    dP = dO Vᵀ    dS = P ⊙ (dP − Δ),  Δ = rowsum(dO ⊙ O)
//	dQ += dS K · scale    dK += dSᵀ Q · scale
//
// using Δ = rowsum(dO ⊙ O), which equals rowsum(P ⊙ dP) and costs O(M·Dv)
// instead of a pass over the keys.
//
// Work is split as in FlashAttention-2: each work item owns the dK and dV
// rows of one or more key tiles of one (batch item, KV head) and runs over
// the query tiles and the query heads of the group, so dK and dV of a shared
// head are accumulated across its group in place, with no buffer of Hq
// heads. dQ needs contributions from every key tile. When B·Hkv >= 8 each
// item owns all key tiles of its head, so it also owns that group's dQ rows
// and adds into dq directly: no extra memory and no recomputation. Otherwise
// the key tiles of a head are dealt round-robin into S = ⌈8 / (B·Hkv)⌉
// stripes (at most one per tile); stripe 0 adds into dq, stripes 1..S−1 into
// private zeroed copies of dq, summed into dq in stripe order at the end:
// (S−1)·B·Hq·M·D extra elements, for example 7·Hq·M·D at B = Hkv = 1. The
// alternative, a second pass over query tiles for dQ, needs no such buffer
// but recomputes S and dP per tile (7 tile products instead of 5). Since
// the stripes depend on the shape alone, results are bit-identical whatever
// the number of threads. Further memory: Δ, O(B·Hq·M), and two tiles per
// worker.
//
// FlashBackward adds into dq, dk and dv; callers zero them. Hidden keys and
// padding queries get and pass exactly zero gradient. It panics if c is
// invalid or a slice has the wrong length.
func FlashBackward[T Float](dq, dk, dv, do, q, k, v, o, lse []T, c *Config) {
	flashBackward(dq, dk, dv, do, q, k, v, o, lse, c, flashOptions{})
}

// FlashRun is FlashForward then, when do is not nil, FlashBackward: the
// form of checks.Impl for T = float64. It adds into dq, dk and dv like
// FlashBackward.
func FlashRun[T Float](o, lse, dq, dk, dv, q, k, v, do []T, c *Config) error {
	if err := FlashForward(o, lse, q, k, v, c); err != nil {
		return err
	}
	if do != nil {
		FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c)
	}
	return nil
}

// flashItem is one unit of parallel work: batch item b, KV head kvh and a
// tile index (forward: the query tile; backward: the stripe of key tiles).
type flashItem struct{ b, kvh, t, cost int }

// byCost orders work items heaviest first, so that under a causal mask the
// long rows start early and the short ones fill the gaps at the end.
func byCost(items []flashItem) {
	slices.SortStableFunc(items, func(x, y flashItem) int { return cmp.Compare(y.cost, x.cost) })
}

// runItems calls the function made by start for every item index in
// 0..n-1, on min(GOMAXPROCS, n) goroutines that take the next index from a
// shared counter. start is called once per goroutine, to give it its
// scratch buffers. Which goroutine runs an item does not change what the
// item computes.
func runItems(n int, start func() func(item int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		f := start()
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			f := start()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

func flashForward[T Float](o, lse, q, k, v []T, c *Config, opt flashOptions) error {
	mustFit(c, map[string][2]int{
		"o": {len(o), c.B * c.Hq * c.M * c.Dv}, "lse": {len(lse), c.B * c.Hq * c.M},
		"q": {len(q), c.B * c.Hq * c.M * c.D}, "k": {len(k), c.B * c.Hkv * c.N * c.D},
		"v": {len(v), c.B * c.Hkv * c.N * c.Dv},
	})
	if opt.br == 0 && opt.bc == 0 && unmasked(c) {
		opt.br, opt.bc = denseTiles(c)
	}
	if opt.br == 0 {
		// no larger than the problem, so that a short one allocates short
		// tiles (one tile either way: the same sums)
		opt.br = max(1, min(fwdBr, c.M))
	}
	if opt.bc == 0 {
		opt.bc = max(1, min(fwdBc, c.N))
	}
	pl := opt.plan(c)
	if c.Sinks == nil {
		if err := pl.emptyRow(c); err != nil {
			return err
		}
	}
	items := make([]flashItem, 0, c.B*c.Hkv*pl.nqt)
	for b := range c.B {
		for qt := range pl.nqt {
			cost := 0
			for kt := range pl.nkt {
				if pl.classify(b, qt, kt) != tileSkip {
					cost++
				}
			}
			for kvh := range c.Hkv {
				items = append(items, flashItem{b, kvh, qt, cost})
			}
		}
	}
	byCost(items)
	f := &fwdCall[T]{c: c, pl: pl, o: o, lse: lse, q: q, k: k, v: v, g: c.Hq / c.Hkv,
		scale: T(c.ScaleValue()), stats: opt.stats, plain: c.Softcap == 0 && c.Alibi == nil}
	runItems(len(items), func() func(int) {
		w := fwdScratch[T]{
			s:    make([]T, pl.br*pl.bc),
			m:    make([]T, f.g*pl.br),
			l:    make([]T, f.g*pl.br),
			zero: make([]T, c.Dv),
			off:  make([]T, pl.br),
		}
		return func(x int) { f.item(items[x], &w) }
	})
	return nil
}

type fwdCall[T Float] struct {
	c       *Config
	pl      *maskPlan
	o, lse  []T
	q, k, v []T
	g       int // query heads per KV head
	scale   T
	stats   *tileStats
	plain   bool // no softcap, no ALiBi
}

// fwdScratch is one worker's memory: a score tile, and the running maximum
// and sum of every row of the group's query tiles.
type fwdScratch[T Float] struct {
	s    []T // (br, bc): scores, then probabilities in place
	m, l []T // (G, br)
	zero []T // Dv zeros, read in place of hidden value rows
	off  []T // (br): a constant per score row, see logitsTile
}

// item computes the output rows of query tile it.t of every query head of
// KV head it.kvh's group in batch item it.b.
func (f *fwdCall[T]) item(it flashItem, w *fwdScratch[T]) {
	c, pl := f.c, f.pl
	M, N, D, Dv, Hq := c.M, c.N, c.D, c.Dv, c.Hq
	b, kvh := it.b, it.kvh
	i0, nr := pl.rows(it.t)
	negInf := T(math.Inf(-1))
	for g := range f.g {
		bh := b*Hq + kvh*f.g + g
		clear(f.o[(bh*M+i0)*Dv : (bh*M+i0+nr)*Dv])
		m, l := w.m[g*pl.br:g*pl.br+nr], w.l[g*pl.br:g*pl.br+nr]
		m0, l0 := negInf, T(0)
		if c.Sinks != nil { // the sink is a score seen first: exp(σ − σ) = 1
			m0, l0 = T(c.Sinks[kvh*f.g+g]), 1
		}
		for r := range m {
			m[r], l[r] = m0, l0
		}
	}
	bkv := b*c.Hkv + kvh
	for x := range pl.nkt {
		// With ALiBi the key tiles are visited last to first: a causal
		// row's nearest keys, which the bias weighs most, come first, so
		// the running maximum is near its final value early and the far
		// tiles' weights fall below expShift's flush and skip P V. Any
		// fixed order is the same softmax; this one is fixed too.
		kt := x
		if c.Alibi != nil {
			kt = pl.nkt - 1 - x
		}
		kind := pl.classify(b, it.t, kt)
		f.stats.count(kind)
		if kind == tileSkip {
			continue
		}
		j0, nc := pl.cols(kt)
		kTile := f.k[(bkv*N+j0)*D : (bkv*N+j0+nc)*D]
		vTile := f.v[(bkv*N+j0)*Dv : (bkv*N+j0+nc)*Dv]
		s := w.s[:nr*nc]
		for g := range f.g {
			bh := b*Hq + kvh*f.g + g
			qTile := f.q[(bh*M+i0)*D : (bh*M+i0+nr)*D]
			oTile := f.o[(bh*M+i0)*Dv : (bh*M+i0+nr)*Dv]
			m, l := w.m[g*pl.br:g*pl.br+nr], w.l[g*pl.br:g*pl.br+nr]

			// pass 1: scores of the tile, S = Q Kᵀ · scale, softcap and
			// ALiBi, hidden ones −Inf
			gemmNT(s, qTile, kTile, nr, nc, D, f.scale)
			var off []T // a constant per row of the scores, see logitsTile
			if !f.plain {
				off = w.off[:nr]
				logitsTile(c, s, nil, off, b, kvh*f.g+g, i0, nr, j0, nc)
			}
			if kind == tilePartial {
				maskTile(pl, s, b, i0, nr, j0, nc)
			}
			// pass 2: online softmax, P = exp(S − m) in place of S
			if !onlineSoftmax(s, off, nr, nc, m, l, oTile, Dv) {
				f.stats.countDead()
				continue // every weight of the tile is 0: P V adds nothing
			}
			// pass 3: O += P V
			if kind == tileFull {
				gemmNN(oTile, s, vTile, nr, Dv, nc)
			} else {
				gemmNNSkip(oTile, s, vTile, nr, Dv, nc, w.zero)
			}
		}
	}
	// pass 4: normalise; the maximum comes back in the saved log-sum-exp
	for g := range f.g {
		bh := b*Hq + kvh*f.g + g
		finishRows(f.o[(bh*M+i0)*Dv:(bh*M+i0+nr)*Dv], f.lse[bh*M+i0:bh*M+i0+nr],
			w.m[g*pl.br:g*pl.br+nr], w.l[g*pl.br:g*pl.br+nr], Dv)
	}
}

// onlineSoftmax folds the score tile s (nr, nc) into the running maximum m,
// sum l and output rows o (nr, dv) of its rows, leaving P = exp(S − m) in s.
// With off not nil the scores of row r are s[r, x] + off[r] (logitsTile).
// The running maximum only grows; when it does, what was summed so far (l and
// the output row) was exponentiated against the old maximum and is rescaled
// by e^(m−m'), so every exponent stays <= 0 and never overflows. A row that
// sees no key of the tile (all −Inf) gets P = 0 and leaves its state alone.
// It reports whether any P of the tile is left non-zero (expShift).
func onlineSoftmax[T Float](s, off []T, nr, nc int, m, l, o []T, dv int) (live bool) {
	negInf := T(math.Inf(-1))
	for r := range nr {
		sr := s[r*nc : r*nc+nc]
		mt := vec.Max(sr)
		if mt == negInf {
			clear(sr)
			continue
		}
		var c0 T // the row's constant
		if off != nil {
			c0 = off[r]
			mt += c0
		}
		if mt > m[r] {
			if m[r] != negInf {
				alpha := T(math.Exp(float64(m[r] - mt)))
				l[r] *= alpha
				or := o[r*dv : r*dv+dv]
				for x := range or {
					or[x] *= alpha
				}
			}
			m[r] = mt
		}
		sum, lr := expShift(sr, sr, m[r]-c0)
		l[r] += sum
		live = live || lr
	}
	return live
}

// finishRows turns the accumulated rows o (len(l), dv) into the output,
// O = O / l, and the log-sum-exp, lse = m + log l. A padding row summed
// nothing: its output stays 0 and its lse is +Inf.
func finishRows[T Float](o, lse, m, l []T, dv int) {
	for r := range l {
		if l[r] == 0 {
			lse[r] = T(math.Inf(1))
			continue
		}
		inv := 1 / l[r]
		or := o[r*dv : r*dv+dv]
		for x := range or {
			or[x] *= inv
		}
		lse[r] = m[r] + T(math.Log(float64(l[r])))
	}
}

// bwdStripes is the number of stripes the key tiles of each (batch item, KV
// head) are dealt into: enough for bwdMinItems work items, at most one per
// key tile.
func bwdStripes(bhkv, nkt int) int {
	return max(1, min(nkt, (bwdMinItems+bhkv-1)/bhkv))
}

func flashBackward[T Float](dq, dk, dv, do, q, k, v, o, lse []T, c *Config, opt flashOptions) {
	mustFit(c, map[string][2]int{
		"dq": {len(dq), c.B * c.Hq * c.M * c.D}, "dk": {len(dk), c.B * c.Hkv * c.N * c.D},
		"dv": {len(dv), c.B * c.Hkv * c.N * c.Dv}, "do": {len(do), c.B * c.Hq * c.M * c.Dv},
		"q": {len(q), c.B * c.Hq * c.M * c.D}, "k": {len(k), c.B * c.Hkv * c.N * c.D},
		"v": {len(v), c.B * c.Hkv * c.N * c.Dv},
		"o": {len(o), c.B * c.Hq * c.M * c.Dv}, "lse": {len(lse), c.B * c.Hq * c.M},
	})
	if opt.br == 0 {
		opt.br = max(1, min(bwdBr, c.M)) // as the forward's
	}
	if opt.bc == 0 {
		opt.bc = max(1, min(bwdBc, c.N))
	}
	pl := opt.plan(c)
	BH, M, Dv := c.B*c.Hq, c.M, c.Dv

	// Δ = rowsum(dO ⊙ O), one number per query row, which equals
	// rowsum(P ⊙ dP) and so replaces it in dS.
	delta := make([]T, BH*M)
	runItems(BH, func() func(int) {
		return func(bh int) {
			for i := range M {
				at := (bh*M + i) * Dv
				delta[bh*M+i] = dot(do[at:at+Dv], o[at:at+Dv])
			}
		}
	})

	stripes := bwdStripes(c.B*c.Hkv, pl.nkt)
	parts := make([][]T, stripes-1) // dQ of stripes 1.., added into dq at the end
	for s := range parts {
		parts[s] = make([]T, len(dq))
	}
	items := make([]flashItem, 0, c.B*c.Hkv*stripes)
	for b := range c.B {
		for s := range stripes {
			cost := 0
			for kt := s; kt < pl.nkt; kt += stripes {
				for qt := range pl.nqt {
					if pl.classify(b, qt, kt) != tileSkip {
						cost++
					}
				}
			}
			for kvh := range c.Hkv {
				items = append(items, flashItem{b, kvh, s, cost})
			}
		}
	}
	byCost(items)
	f := &bwdCall[T]{c: c, pl: pl, dq: dq, dk: dk, dv: dv, do: do, q: q, k: k, v: v, lse: lse,
		delta: delta, parts: parts, stripes: stripes, g: c.Hq / c.Hkv, scale: T(c.ScaleValue()), stats: opt.stats,
		plain: c.Softcap == 0 && c.Alibi == nil}
	runItems(len(items), func() func(int) {
		w := bwdScratch[T]{p: make([]T, pl.br*pl.bc), ds: make([]T, pl.br*pl.bc), zero: make([]T, max(c.D, c.Dv)),
			off: make([]T, pl.br)}
		if c.Softcap > 0 {
			w.capped = make([]T, pl.br*pl.bc)
		}
		return func(x int) { f.item(items[x], &w) }
	})

	if len(parts) > 0 {
		// dq += dQ of stripes 1, 2, … in that order, whoever computed them.
		D := c.D
		runItems(BH, func() func(int) {
			return func(bh int) {
				dst := dq[bh*M*D : (bh+1)*M*D]
				for x := range dst {
					var sum T
					for _, p := range parts {
						sum += p[bh*M*D+x]
					}
					dst[x] += sum
				}
			}
		})
	}
}

type bwdCall[T Float] struct {
	c                *Config
	pl               *maskPlan
	dq, dk, dv       []T
	do, q, k, v, lse []T
	delta            []T
	parts            [][]T
	stripes, g       int
	scale            T
	stats            *tileStats
	plain            bool // no softcap, no ALiBi
}

// bwdScratch is one worker's memory: the probability tile and the dP/dS tile.
type bwdScratch[T Float] struct {
	p, ds  []T // (br, bc)
	capped []T // (br, bc): the softcapped scores, for softcap's derivative
	zero   []T // max(D, Dv) zeros, read in place of hidden rows
	off    []T // (br): a constant per score row, see logitsTile
}

// item adds the gradients of stripe it.t of the key tiles of KV head it.kvh
// in batch item it.b: all of their dK, dV and their part of the group's dQ.
func (f *bwdCall[T]) item(it flashItem, w *bwdScratch[T]) {
	c, pl := f.c, f.pl
	M, N, D, Dv, Hq := c.M, c.N, c.D, c.Dv, c.Hq
	b, kvh := it.b, it.kvh
	bkv := b*c.Hkv + kvh
	dqDst := f.dq
	if it.t > 0 {
		dqDst = f.parts[it.t-1]
	}
	for kt := it.t; kt < pl.nkt; kt += f.stripes {
		j0, nc := pl.cols(kt)
		kTile := f.k[(bkv*N+j0)*D : (bkv*N+j0+nc)*D]
		vTile := f.v[(bkv*N+j0)*Dv : (bkv*N+j0+nc)*Dv]
		dkTile := f.dk[(bkv*N+j0)*D : (bkv*N+j0+nc)*D]
		dvTile := f.dv[(bkv*N+j0)*Dv : (bkv*N+j0+nc)*Dv]
		for qt := range pl.nqt {
			kind := pl.classify(b, qt, kt)
			f.stats.count(kind)
			if kind == tileSkip {
				continue
			}
			i0, nr := pl.rows(qt)
			p, ds := w.p[:nr*nc], w.ds[:nr*nc]
			for g := range f.g {
				bh := b*Hq + kvh*f.g + g
				qTile := f.q[(bh*M+i0)*D : (bh*M+i0+nr)*D]
				doTile := f.do[(bh*M+i0)*Dv : (bh*M+i0+nr)*Dv]
				dqTile := dqDst[(bh*M+i0)*D : (bh*M+i0+nr)*D]
				lse := f.lse[bh*M+i0 : bh*M+i0+nr]
				delta := f.delta[bh*M+i0 : bh*M+i0+nr]

				// forward was P = exp(S − lse), S = Q Kᵀ · scale with softcap
				// and ALiBi: recompute it. A padding row has lse = +Inf and
				// gets P = 0; the sink is in lse.
				gemmNT(p, qTile, kTile, nr, nc, D, f.scale)
				var capped, off []T
				if !f.plain {
					if w.capped != nil {
						capped = w.capped[:nr*nc]
					}
					off = w.off[:nr]
					logitsTile(c, p, capped, off, b, kvh*f.g+g, i0, nr, j0, nc)
				}
				if kind == tilePartial {
					maskTile(pl, p, b, i0, nr, j0, nc)
				}
				live := false
				for r := range nr {
					shift := lse[r]
					if off != nil {
						shift -= off[r]
					}
					_, lr := expShift(p[r*nc:r*nc+nc], p[r*nc:r*nc+nc], shift)
					live = live || lr
				}
				if !live {
					// P = 0 everywhere: dV gets Pᵀ dO = 0 and dS = P ⊙ … = 0,
					// so the tile adds nothing to dV, dQ or dK
					f.stats.countDead()
					continue
				}
				// forward was O = P V, so dV += Pᵀ dO (the content path) …
				if kind == tileFull {
					gemmTN(dvTile, p, doTile, nc, Dv, nr)
				} else {
					gemmTNSkip(dvTile, p, doTile, nc, Dv, nr, w.zero)
				}
				// … and dP = dO Vᵀ (the selection path)
				gemmNT(ds, doTile, vTile, nr, nc, Dv, 1)
				// through the softmax: dS = P ⊙ (dP − Δ), with the scale of S
				// folded in here once rather than in both products below.
				// A hidden pair has P = 0 and gets dS = 0 exactly, whatever
				// dP holds.
				for r := range nr {
					pr := p[r*nc : r*nc+nc]
					dsr := ds[r*nc : r*nc+nc]
					dsr = dsr[:len(pr)]
					dr := delta[r]
					if kind == tileFull {
						for x, px := range pr {
							dsr[x] = px * (dsr[x] - dr) * f.scale
						}
						continue
					}
					for x, px := range pr {
						if px == 0 {
							dsr[x] = 0
						} else {
							dsr[x] = px * (dsr[x] - dr) * f.scale
						}
					}
				}
				// forward was t = c · tanh(s / c), so dS ⊙= 1 − (t / c)²
				if capped != nil {
					inv := 1 / T(c.Softcap)
					for x, t := range capped {
						t *= inv
						ds[x] *= 1 - t*t
					}
				}
				// forward was S = Q Kᵀ · scale, so dQ += dS K · scale and
				// dK += dSᵀ Q · scale.
				if kind == tileFull {
					gemmNN(dqTile, ds, kTile, nr, D, nc)
					gemmTN(dkTile, ds, qTile, nc, D, nr)
				} else {
					gemmNNSkip(dqTile, ds, kTile, nr, D, nc, w.zero)
					gemmTNSkip(dkTile, ds, qTile, nc, D, nr, w.zero)
				}
			}
		}
	}
}

// logitsTile applies softcap and ALiBi (Config.Logit) to the scaled scores
// s (nr, nc) of queries i0.. and keys j0.. of batch item b and query head
// h; with capped not nil it also keeps the softcapped scores there, before
// the bias. tanh(x) is computed as 1 − 2/(1 + e^(2x)) with the vectorised
// exp; e^(2x) = +Inf gives exactly 1.
//
// With off not nil (len nr) ALiBi may leave part of its bias as a constant
// per row: the score of row r is then s[r, x] + off[r]. A softmax does not
// see a row's constant but its log-sum-exp does, so the callers shift by it
// (onlineSoftmax, and expShift against lse − off). It is how a tile whose
// keys all sit on one side of its queries gets the bias in one vectorised
// pass: there |qpos − kpos| = ±(kpos − ref) ∓ (qpos − ref), a vector over
// the keys and a number per row, with ref the tile's first query position
// so both parts stay as small as the distances themselves. A tile astride
// the diagonal takes the distances one by one and leaves off zero.
func logitsTile[T Float](c *Config, s, capped, off []T, b, h, i0, nr, j0, nc int) {
	s = s[:nr*nc]
	if c.Softcap > 0 {
		// c·tanh(s/c); float32 in one vector pass, c·(1 − 2/(1 + e^(2s/c)))
		vec.Softcap(s, s, T(c.Softcap))
		if capped != nil {
			copy(capped, s)
		}
	}
	if off != nil {
		clear(off[:nr])
	}
	if c.Alibi == nil {
		return
	}
	slope := T(c.Alibi[h])
	// the keys' logical positions, read once per tile; distances in
	// integers, exact at any position
	var buf [4 * flashBc]int
	var fbuf [4 * flashBc]T
	var kp []int
	if nc <= len(buf) {
		kp = buf[:nc]
	} else {
		kp = make([]int, nc)
	}
	kmin, kmax := math.MaxInt, math.MinInt
	for x := range kp {
		kp[x] = c.KeyPos(b, j0+x)
		kmin, kmax = min(kmin, kp[x]), max(kmax, kp[x])
	}
	qmin, qmax := math.MaxInt, math.MinInt
	for r := range nr {
		qp := c.QueryPos(b, i0+r)
		qmin, qmax = min(qmin, qp), max(qmax, qp)
	}
	if off != nil && (kmax <= qmin || kmin >= qmax) {
		// one side: −m·|qp − kp| = sign·m·(kp − ref) − sign·m·(qp − ref)
		sign := T(1) // keys at or before every query
		if kmax > qmin {
			sign = -1 // keys at or after every query
		}
		var kf []T
		if nc <= len(fbuf) {
			kf = fbuf[:nc]
		} else {
			kf = make([]T, nc)
		}
		for x, k := range kp {
			kf[x] = T(k - qmin)
		}
		for r := range nr {
			vec.Axpy(sign*slope, kf, s[r*nc:r*nc+nc])
			off[r] = -sign * slope * T(c.QueryPos(b, i0+r)-qmin)
		}
		return
	}
	for r := range nr {
		qp := c.QueryPos(b, i0+r)
		sr := s[r*nc : r*nc+nc]
		sr = sr[:len(kp)]
		for x, k := range kp {
			d := qp - k
			if d < 0 {
				d = -d
			}
			sr[x] -= slope * T(d)
		}
	}
}

// dot returns Σ a[x]·b[x] with four independent sums.
func dot[T Float](a, b []T) T {
	b = b[:len(a)]
	var s0, s1, s2, s3 T
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for x := range a {
		s0 += a[x] * b[x]
	}
	return (s0 + s1) + (s2 + s3)
}
