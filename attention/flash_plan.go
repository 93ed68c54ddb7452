package attention

import (
	"cmp"
	"math"
	"slices"
)

// maskPlan is the mask rule of one call, precomputed once per token and once
// per tile (O(B·(M+N)) memory) so that the tile loops never call a function
// per element.
//
// Every convention reduces to one distance dist = qp[i] − kp[j] between a
// query coordinate and a key coordinate: the logical positions under
// Positions, (i + N − M, j) under BottomRight and (i, j) under TopLeft. The
// causal and window conditions then bound the key coordinate,
//
//	lo[i] <= kp[j] <= hi[i]    hi = qp (causal) or +∞;  lo = qp − Window + 1 (window) or −∞,
//
// so that key j is visible to query i iff kp[j] lies in [lo[i], hi[i]] and,
// with segments, kseg[j] == qseg[i]. Validity is folded in: an invalid key
// gets kp = minInt, below every lo (lo >= minInt+1), and an invalid query gets
// the empty interval lo = maxInt, hi = minInt.
type maskPlan struct {
	m, n     int
	br, bc   int // tile sizes: queries and keys
	nqt, nkt int // tiles per batch item

	rowLo, rowHi   []int // (B, M)
	keyPos         []int // (B, N)
	rowSeg, keySeg []int // (B, M), (B, N); nil without segments

	qtiles []queryTile // (B, nqt)
	ktiles []keyTile   // (B, nkt)

	noSkip bool // classify every tile as partial (tests: results must not change)
}

// queryTile summarises the valid queries of one tile: how many there are and
// the extremes of their bounds and segments.
type queryTile struct {
	valid          int
	loMin, loMax   int
	hiMin, hiMax   int
	segMin, segMax int
}

// keyTile summarises the valid keys of one tile.
type keyTile struct {
	valid          int
	posMin, posMax int
	segMin, segMax int
}

// tileKind says how a tile of queries against a tile of keys is computed.
type tileKind uint8

const (
	tileSkip    tileKind = iota // no query of the tile sees any key of the tile: not computed
	tilePartial                 // some pairs are hidden: the exact rule per element
	tileFull                    // every query sees every key: no mask at all
)

const (
	minInt = math.MinInt
	maxInt = math.MaxInt
)

func newMaskPlan(c *Config, br, bc int) *maskPlan {
	p := new(maskPlan)
	p.init(c, br, bc)
	return p
}

// init fills p for c, reusing its slices when they are large enough.
func (p *maskPlan) init(c *Config, br, bc int) {
	B, M, N := c.B, c.M, c.N
	*p = maskPlan{
		m: M, n: N, br: br, bc: bc,
		nqt: (M + br - 1) / br, nkt: (N + bc - 1) / bc,
		rowLo: grow(p.rowLo, B*M), rowHi: grow(p.rowHi, B*M), keyPos: grow(p.keyPos, B*N),
		rowSeg: c.QSeg, keySeg: c.KSeg,
		qtiles: p.qtiles, ktiles: p.ktiles,
	}
	for b := range B {
		for i := range M {
			lo, hi := maxInt, minInt // an invalid query sees nothing
			if c.QueryValid(b, i) {
				var qp int
				switch c.Convention {
				case BottomRight:
					qp = i + N - M
				case TopLeft:
					qp = i
				default:
					qp = c.QueryPos(b, i)
				}
				lo, hi = minInt+1, maxInt
				if c.Causal {
					hi = qp // dist >= 0
				}
				if c.Window > 0 && qp >= minInt+c.Window {
					lo = qp - c.Window + 1 // dist < Window (a window reaching below minInt+1 bounds nothing)
				}
			}
			p.rowLo[b*M+i], p.rowHi[b*M+i] = lo, hi
		}
		for j := range N {
			kp := minInt
			if c.KeyValid(b, j) {
				kp = j
				if c.Convention == Positions {
					kp = c.KeyPos(b, j)
				}
			}
			p.keyPos[b*N+j] = kp
		}
	}

	p.qtiles = grow(p.qtiles, B*p.nqt)
	for b := range B {
		for t := range p.nqt {
			qt := queryTile{loMin: maxInt, loMax: minInt, hiMin: maxInt, hiMax: minInt, segMin: maxInt, segMax: minInt}
			for i := t * br; i < min(M, (t+1)*br); i++ {
				lo, hi := p.rowLo[b*M+i], p.rowHi[b*M+i]
				if lo > hi {
					continue // padding
				}
				qt.valid++
				qt.loMin, qt.loMax = min(qt.loMin, lo), max(qt.loMax, lo)
				qt.hiMin, qt.hiMax = min(qt.hiMin, hi), max(qt.hiMax, hi)
				if p.rowSeg != nil {
					s := p.rowSeg[b*M+i]
					qt.segMin, qt.segMax = min(qt.segMin, s), max(qt.segMax, s)
				}
			}
			p.qtiles[b*p.nqt+t] = qt
		}
	}
	p.ktiles = grow(p.ktiles, B*p.nkt)
	for b := range B {
		for t := range p.nkt {
			kt := keyTile{posMin: maxInt, posMax: minInt, segMin: maxInt, segMax: minInt}
			for j := t * bc; j < min(N, (t+1)*bc); j++ {
				kp := p.keyPos[b*N+j]
				if kp == minInt {
					continue
				}
				kt.valid++
				kt.posMin, kt.posMax = min(kt.posMin, kp), max(kt.posMax, kp)
				if p.keySeg != nil {
					s := p.keySeg[b*N+j]
					kt.segMin, kt.segMax = min(kt.segMin, s), max(kt.segMax, s)
				}
			}
			p.ktiles[b*p.nkt+t] = kt
		}
	}
}

// rows returns the first query row and the row count of query tile t.
func (p *maskPlan) rows(t int) (i0, nr int) { return t * p.br, min(p.br, p.m-t*p.br) }

// cols returns the first key and the key count of key tile t.
func (p *maskPlan) cols(t int) (j0, nc int) { return t * p.bc, min(p.bc, p.n-t*p.bc) }

// classify decides how query tile qt meets key tile kt of batch item b, from
// the tiles' summaries alone. The tile is skipped when
//
//   - it holds no valid query or no valid key; or
//   - every valid key lies before every valid query's window:
//     max kp < min lo (a sliding window has moved past the tile); or
//   - every valid key lies in every valid query's future:
//     min kp > max hi (a causal mask, above the diagonal); or
//   - with segments, the segment ids of its valid queries and keys span
//     disjoint ranges.
//
// A skipped tile is provably all hidden, so skipping it changes no result.
// The tile is full (no mask applied) when every query and key is valid,
// min kp >= max lo, max kp <= min hi and all of them share one segment.
// Anything else is partial and gets the exact rule per element.
func (p *maskPlan) classify(b, qt, kt int) tileKind {
	q, k := &p.qtiles[b*p.nqt+qt], &p.ktiles[b*p.nkt+kt]
	if p.noSkip {
		return tilePartial
	}
	if q.valid == 0 || k.valid == 0 || k.posMax < q.loMin || k.posMin > q.hiMax {
		return tileSkip
	}
	seg := p.rowSeg != nil
	if seg && (k.segMax < q.segMin || k.segMin > q.segMax) {
		return tileSkip
	}
	_, nr := p.rows(qt)
	_, nc := p.cols(kt)
	if q.valid == nr && k.valid == nc && k.posMin >= q.loMax && k.posMax <= q.hiMin &&
		(!seg || q.segMin == q.segMax && k.segMin == k.segMax && q.segMin == k.segMin) {
		return tileFull
	}
	return tilePartial
}

// mask applies the rule to the scores s (nr, nc) of queries i0.. and keys j0..
// of batch item b: a hidden score becomes −Inf, so that its probability
// exp(−Inf − m) is exactly 0. This is a select on the scores, whatever they
// hold (NaN included), not a bias added to them.
func maskTile[T Float](p *maskPlan, s []T, b, i0, nr, j0, nc int) {
	neg := T(math.Inf(-1))
	kp := p.keyPos[b*p.n+j0 : b*p.n+j0+nc]
	var ks []int
	if p.keySeg != nil {
		ks = p.keySeg[b*p.n+j0 : b*p.n+j0+nc]
	}
	for r := range nr {
		at := b*p.m + i0 + r
		lo, hi := p.rowLo[at], p.rowHi[at]
		sr := s[r*nc : r*nc+nc]
		sr = sr[:len(kp)]
		if ks == nil {
			for c, pos := range kp {
				if pos < lo || pos > hi {
					sr[c] = neg
				}
			}
			continue
		}
		qs := p.rowSeg[at]
		ks := ks[:len(kp)]
		for c, pos := range kp {
			if pos < lo || pos > hi || ks[c] != qs {
				sr[c] = neg
			}
		}
	}
}

// emptyRow returns an *EmptyRowError for the first valid query row (batch
// item, then row) that sees no key, or nil. It needs no (M, N) buffer. With
// few rows per batch item (decoding) each row scans the keys: O(M·N). With
// more, the valid keys of the batch item are sorted by (segment, coordinate)
// once, and a row sees some key iff the first key at or after (its segment,
// lo) exists, is in its segment and is at most hi: O((N + M) log N).
func (p *maskPlan) emptyRow(c *Config) error {
	type key struct{ seg, pos int }
	order := func(a, b key) int {
		if a.seg != b.seg {
			return cmp.Compare(a.seg, b.seg)
		}
		return cmp.Compare(a.pos, b.pos)
	}
	var keys []key
	for b := range c.B {
		kp := p.keyPos[b*p.n : (b+1)*p.n]
		var ks []int
		if p.keySeg != nil {
			ks = p.keySeg[b*p.n : (b+1)*p.n]
		}
		sees := func(i int) bool { // by scanning
			lo, hi := p.rowLo[b*p.m+i], p.rowHi[b*p.m+i]
			for j, pos := range kp {
				if lo <= pos && pos <= hi && (ks == nil || ks[j] == p.rowSeg[b*p.m+i]) {
					return true
				}
			}
			return false
		}
		if p.m > emptyRowScan {
			if keys == nil {
				keys = make([]key, 0, p.n)
			}
			keys = keys[:0]
			for j, pos := range kp {
				if pos != minInt {
					s := 0
					if ks != nil {
						s = ks[j]
					}
					keys = append(keys, key{s, pos})
				}
			}
			slices.SortFunc(keys, order)
			sees = func(i int) bool { // by binary search
				lo, hi := p.rowLo[b*p.m+i], p.rowHi[b*p.m+i]
				s := 0
				if p.rowSeg != nil {
					s = p.rowSeg[b*p.m+i]
				}
				x, _ := slices.BinarySearchFunc(keys, key{s, lo}, order)
				return lo <= hi && x < len(keys) && keys[x].seg == s && keys[x].pos <= hi
			}
		}
		for i := range p.m {
			if c.QueryValid(b, i) && !sees(i) {
				return &EmptyRowError{Batch: b, Row: i, Pos: c.QueryPos(b, i)}
			}
		}
	}
	return nil
}

// emptyRowScan is the number of query rows per batch item up to which
// emptyRow scans the keys per row instead of sorting them.
const emptyRowScan = 8
