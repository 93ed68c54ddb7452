package attention

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/attnlab/attnlab/internal/vec"
)

// decodeChunk is the number of cache keys per split of DecodeForward: eight
// key tiles. At N = 8192 and 8 KV heads that is 128 work items, enough to
// keep every core busy and to balance them, while each item streams 512
// keys of K and then of V (256 KiB each at D = 128 in float32) per unit of
// overhead. Chunks of 256 keys were measured 1.4–1.6× slower on one thread
// at N = 4096, D = 128, where K and V do not fit in L3 (2.5–3.7 ms a token
// against 1.7–1.8 ms for 512 to 4096 keys): each item's short runs of K and
// V restart the hardware's streams; inside L3 (D = 64, N = 1024) the two
// sizes time alike.
const decodeChunk = 8 * flashBc

// decodeDirectRows is the largest number of query rows per group that
// DecodeForward streams through the keys row by row; more rows go through
// the tile products, which reuse each loaded key for several rows.
const decodeDirectRows = 8

// DecodeMaxM is the largest number of new queries per batch item that
// DecodeForward takes: a decoded token, or a short speculative chunk.
const DecodeMaxM = 8

// DecodeForward computes o and lse like FlashForward for a few new queries
// per batch item and head (M ≤ DecodeMaxM) against a long cache: split-K
// attention (flash-decoding). The cache is cut into chunks of decodeChunk
// keys, and each (batch item, KV head, chunk) is a work item, so that all
// cores share even a single head's cache. Within an item the G·M queries of
// the group (G query heads, M queries each) are the rows of one tile
// against each key tile (GQA packing): K and V are streamed from memory once
// per group, the scores by dot products and the output by scaled
// accumulation of V's rows, with no packing. Each chunk leaves a partial
// state per row, its maximum m_c, sum l_c and unnormalised output o_c, and
// the chunks are merged by the log-sum-exp rule
//
//	m = max_c m_c    l = Σ_c e^(m_c − m) l_c    O = Σ_c e^(m_c − m) o_c / l    lse = m + log l
//
// in chunk order, so that the result does not depend on the number of
// threads. The mask rule, tile skipping, padding and the *EmptyRowError are
// those of FlashForward. The working memory, B·Hq·M·⌈N/decodeChunk⌉·(Dv+2)
// partial values and one tile per thread, is kept between calls: once warm,
// a call allocates nothing. There is no backward: decoding does not train.
//
// DecodeForward panics if c.M > DecodeMaxM, if c is invalid or a slice has
// the wrong length.
func DecodeForward[T Float](o, lse, q, k, v []T, c *Config) error {
	return decodeForward(o, lse, q, k, v, c, flashOptions{})
}

// decodeWork is one DecodeForward call and its working memory, kept in a
// pool between calls.
type decodeWork[T Float] struct {
	plan         maskPlan
	items        []flashItem
	pm, pl, po   []T      // partial states, (B, Hkv, chunk, G·M, ·)
	tiles        chan []T // score tiles, one per thread
	tileLen      int
	zero         []T
	q, k, v      []T
	c            *Config
	opt          flashOptions
	rows, nch    int // G·M, chunks per row of the cache
	tilesInChunk int
	scale        T
}

var decodePools [2]sync.Pool

func decodePool[T Float]() *sync.Pool {
	p := &decodePools[1]
	if vec.Is32[T]() {
		p = &decodePools[0]
	}
	return p
}

// grow returns s with length n, reusing its memory when it is large enough.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

func decodeForward[T Float](o, lse, q, k, v []T, c *Config, opt flashOptions) error {
	if c.M > DecodeMaxM {
		panic(fmt.Sprintf("attention: DecodeForward needs M <= %d, got M = %d", DecodeMaxM, c.M))
	}
	mustFit(c, map[string][2]int{
		"o": {len(o), c.B * c.Hq * c.M * c.Dv}, "lse": {len(lse), c.B * c.Hq * c.M},
		"q": {len(q), c.B * c.Hq * c.M * c.D}, "k": {len(k), c.B * c.Hkv * c.N * c.D},
		"v": {len(v), c.B * c.Hkv * c.N * c.Dv},
	})
	if opt.bc == 0 {
		opt.bc = decodeChunk // one key tile per chunk: the fewest calls per key
	}
	w, _ := decodePool[T]().Get().(*decodeWork[T])
	if w == nil {
		w = new(decodeWork[T])
	}
	defer func() {
		w.q, w.k, w.v, w.c = nil, nil, nil, nil
		decodePool[T]().Put(w)
	}()
	pl := &w.plan
	pl.init(c, c.M, opt.bc) // all M queries in one query tile
	pl.noSkip = opt.noSkip
	if c.Sinks == nil {
		if err := pl.emptyRow(c); err != nil {
			return err
		}
	}
	B, Hq, Hkv, M, Dv := c.B, c.Hq, c.Hkv, c.M, c.Dv
	G := Hq / Hkv
	w.q, w.k, w.v, w.c, w.opt = q, k, v, c, opt
	w.rows = G * M
	w.tilesInChunk = max(1, decodeChunk/pl.bc)
	w.nch = (pl.nkt + w.tilesInChunk - 1) / w.tilesInChunk
	w.scale = T(c.ScaleValue())
	states := B * Hkv * w.nch * w.rows
	w.pm, w.pl, w.po = grow(w.pm, states), grow(w.pl, states), grow(w.po, states*Dv)
	w.zero = grow(w.zero, Dv)
	clear(w.zero)
	threads := runtime.GOMAXPROCS(0)
	if need := w.rows * pl.bc; w.tiles == nil || cap(w.tiles) != threads || w.tileLen < need {
		w.tiles, w.tileLen = make(chan []T, threads), need
		for range threads {
			w.tiles <- make([]T, need)
		}
	}

	w.items = w.items[:0]
	for b := range B {
		for ch := range w.nch {
			cost := 0
			for kt := ch * w.tilesInChunk; kt < min(pl.nkt, (ch+1)*w.tilesInChunk); kt++ {
				if pl.classify(b, 0, kt) != tileSkip {
					cost++
				}
			}
			for kvh := range Hkv {
				w.items = append(w.items, flashItem{b, kvh, ch, cost})
			}
		}
	}
	byCost(w.items)
	vec.Parallel(len(w.items), w)

	// Merge the chunks of each row in chunk order.
	negInf := T(math.Inf(-1))
	for b := range B {
		for h := range Hq {
			bkv, g := b*Hkv+h/G, h%G
			for i := range M {
				bh := (b*Hq+h)*M + i
				r := g*M + i
				out := o[bh*Dv : (bh+1)*Dv]
				clear(out)
				mx, sink := negInf, negInf
				if c.Sinks != nil {
					mx, sink = T(c.Sinks[h]), T(c.Sinks[h])
				}
				for ch := range w.nch {
					mx = max(mx, w.pm[(bkv*w.nch+ch)*w.rows+r])
				}
				if mx == negInf { // a padding query: nothing seen
					lse[bh] = T(math.Inf(1))
					continue
				}
				var sum T
				if sink != negInf { // the sink's term of the denominator
					sum = T(math.Exp(float64(sink - mx)))
				}
				for ch := range w.nch {
					at := (bkv*w.nch+ch)*w.rows + r
					if w.pm[at] == negInf {
						continue
					}
					f := T(math.Exp(float64(w.pm[at] - mx)))
					sum += f * w.pl[at]
					vec.Axpy(f, w.po[at*Dv:(at+1)*Dv], out)
				}
				inv := 1 / sum
				for x := range out {
					out[x] *= inv
				}
				lse[bh] = mx + T(math.Log(float64(sum)))
			}
		}
	}
	return nil
}

// Run computes work item x: one chunk of the cache of one (batch item, KV
// head) against the G·M query rows of its group.
func (w *decodeWork[T]) Run(x int) {
	it := w.items[x]
	b, kvh, ch := it.b, it.kvh, it.t
	c, pl, R := w.c, &w.plan, w.rows
	N, D, Dv, M := c.N, c.D, c.Dv, c.M
	bkv := b*c.Hkv + kvh
	state := (bkv*w.nch + ch) * R
	m, l, acc := w.pm[state:state+R], w.pl[state:state+R], w.po[state*Dv:(state+R)*Dv]
	for r := range m {
		m[r] = T(math.Inf(-1))
	}
	clear(l)
	clear(acc)
	G := c.Hq / c.Hkv
	q0 := (b*c.Hq + kvh*G) * M // the group's heads, M rows each: consecutive
	qRows := w.q[q0*D : (q0+R)*D]
	s := <-w.tiles
	for kt := ch * w.tilesInChunk; kt < min(pl.nkt, (ch+1)*w.tilesInChunk); kt++ {
		kind := pl.classify(b, 0, kt)
		w.opt.stats.count(kind)
		if kind == tileSkip {
			continue
		}
		j0, nc := pl.cols(kt)
		st := s[:R*nc]
		kTile := w.k[(bkv*N+j0)*D : (bkv*N+j0+nc)*D]
		vTile := w.v[(bkv*N+j0)*Dv : (bkv*N+j0+nc)*Dv]
		// A few rows against many keys: each row streams the tile by dot
		// products and scaled additions of V's rows (vec.Dots, vec.Axpys),
		// the tile staying in cache for the group's other rows.
		direct := useVec && R <= decodeDirectRows
		if direct {
			for r := range R {
				sr := st[r*nc : (r+1)*nc]
				vec.Dots(qRows[r*D:(r+1)*D], kTile, D, sr)
				for x := range sr {
					sr[x] *= w.scale
				}
			}
		} else {
			gemmNT(st, qRows, kTile, R, nc, D, w.scale)
		}
		if c.Softcap > 0 || c.Alibi != nil {
			for r := range R { // row r is query r%M of head kvh·G + r/M
				logitsTile(c, st[r*nc:(r+1)*nc], nil, nil, b, kvh*G+r/M, r%M, 1, j0, nc)
			}
		}
		if kind == tilePartial {
			for r := range R { // row r is query r%M of head r/M; the heads share the query's mask
				maskTile(pl, st[r*nc:], b, r%M, 1, j0, nc)
			}
		}
		if !onlineSoftmax(st, nil, R, nc, m, l, acc, Dv) {
			continue // every weight of the tile is 0: P V adds nothing
		}
		switch {
		case direct && (kind == tileFull || finite(vTile)):
			// every row of V finite: a hidden key's 0·v adds an exact zero,
			// as skipping it would (see gemmNNSkip)
			for r := range R {
				vec.Axpys(st[r*nc:(r+1)*nc], vTile, Dv, acc[r*Dv:(r+1)*Dv])
			}
		case kind == tileFull:
			gemmNN(acc, st, vTile, R, Dv, nc)
		default:
			gemmNNSkip(acc, st, vTile, R, Dv, nc, w.zero)
		}
	}
	w.tiles <- s
}
