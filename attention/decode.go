package attention

import (
	"fmt"
	"math"
)

// decodeChunk is the number of cache keys per split of DecodeForward: four
// key tiles. At N = 8192 and 8 KV heads that is 256 work items, enough to
// keep every core busy and to balance them, while each item still streams
// 256 keys (64 KiB of K and V at D = 64 in float32) per unit of overhead.
const decodeChunk = 4 * flashBc

// DecodeForward computes o and lse like FlashForward for a single new query
// per batch item and head (M = 1) against a long cache: split-K attention
// (flash-decoding). The cache is cut into chunks of decodeChunk keys, and each
// (batch item, KV head, chunk) is a work item, so that all cores share even a
// single head's cache. Within an item the G query heads of the group are the
// rows of one tile against each key tile (GQA packing): K and V are read once
// per group. Each chunk leaves a partial state per head, its maximum m_c, sum
// l_c and unnormalised output o_c, and the chunks are merged by the
// log-sum-exp rule
//
//	m = max_c m_c    l = Σ_c e^(m_c − m) l_c    O = Σ_c e^(m_c − m) o_c / l    lse = m + log l
//
// in chunk order, so that the result does not depend on the number of
// threads. The mask rule, tile skipping, padding and the *EmptyRowError are
// those of FlashForward. Extra memory is B·Hq·⌈N/decodeChunk⌉·(Dv+2) partial
// values plus one tile per worker. There is no backward: decoding does not
// train.
//
// DecodeForward panics if c.M != 1, if c is invalid or a slice has the
// wrong length.
func DecodeForward[T Float](o, lse, q, k, v []T, c *Config) error {
	return decodeForward(o, lse, q, k, v, c, flashOptions{})
}

func decodeForward[T Float](o, lse, q, k, v []T, c *Config, opt flashOptions) error {
	if c.M != 1 {
		panic(fmt.Sprintf("attention: DecodeForward needs M = 1, got M = %d", c.M))
	}
	mustFit(c, map[string][2]int{
		"o": {len(o), c.B * c.Hq * c.Dv}, "lse": {len(lse), c.B * c.Hq},
		"q": {len(q), c.B * c.Hq * c.D}, "k": {len(k), c.B * c.Hkv * c.N * c.D},
		"v": {len(v), c.B * c.Hkv * c.N * c.Dv},
	})
	if opt.bc == 0 {
		opt.bc = flashBc
	}
	opt.br = 1 // one query per batch item: one query tile
	pl := opt.plan(c)
	if err := pl.emptyRow(c); err != nil {
		return err
	}
	B, Hq, Hkv, N, D, Dv := c.B, c.Hq, c.Hkv, c.N, c.D, c.Dv
	G := Hq / Hkv
	tilesPerChunk := max(1, decodeChunk/pl.bc)
	nch := (pl.nkt + tilesPerChunk - 1) / tilesPerChunk

	// Partial states, laid out (B, Hkv, chunk, G, ·) so that one work item
	// writes one contiguous block.
	pm := make([]T, B*Hkv*nch*G)
	pls := make([]T, B*Hkv*nch*G)
	po := make([]T, B*Hkv*nch*G*Dv)

	items := make([]flashItem, 0, B*Hkv*nch)
	for b := range B {
		for ch := range nch {
			cost := 0
			for kt := ch * tilesPerChunk; kt < min(pl.nkt, (ch+1)*tilesPerChunk); kt++ {
				if pl.classify(b, 0, kt) != tileSkip {
					cost++
				}
			}
			for kvh := range Hkv {
				items = append(items, flashItem{b, kvh, ch, cost})
			}
		}
	}
	byCost(items)
	scale := T(c.ScaleValue())
	negInf := T(math.Inf(-1))
	runItems(len(items), func() func(int) {
		s := make([]T, G*pl.bc)
		zero := make([]T, Dv)
		return func(x int) {
			it := items[x]
			b, kvh, ch := it.b, it.kvh, it.t
			bkv := b*Hkv + kvh
			state := (bkv*nch + ch) * G
			m, l, acc := pm[state:state+G], pls[state:state+G], po[state*Dv:(state+G)*Dv]
			for r := range G {
				m[r] = negInf
			}
			qRows := q[(b*Hq+kvh*G)*D : (b*Hq+kvh*G+G)*D] // the group's heads, M = 1 row each
			for kt := ch * tilesPerChunk; kt < min(pl.nkt, (ch+1)*tilesPerChunk); kt++ {
				kind := pl.classify(b, 0, kt)
				opt.stats.count(kind)
				if kind == tileSkip {
					continue
				}
				j0, nc := pl.cols(kt)
				st := s[:G*nc]
				gemmNT(st, qRows, k[(bkv*N+j0)*D:(bkv*N+j0+nc)*D], G, nc, D, scale)
				if kind == tilePartial {
					for r := range G { // every head of the group has the same query, so the same mask
						maskTile(pl, st[r*nc:], b, 0, 1, j0, nc)
					}
				}
				onlineSoftmax(st, G, nc, m, l, acc, Dv)
				vTile := v[(bkv*N+j0)*Dv : (bkv*N+j0+nc)*Dv]
				if kind == tileFull {
					gemmNN(acc, st, vTile, G, Dv, nc)
				} else {
					gemmNNSkip(acc, st, vTile, G, Dv, nc, zero)
				}
			}
		}
	})

	// Merge the chunks of each head in chunk order.
	for b := range B {
		for h := range Hq {
			bh := b*Hq + h
			out := o[bh*Dv : (bh+1)*Dv]
			clear(out)
			bkv, g := b*Hkv+h/G, h%G
			mx := negInf
			for ch := range nch {
				mx = max(mx, pm[(bkv*nch+ch)*G+g])
			}
			if mx == negInf { // a padding query: nothing seen
				lse[bh] = T(math.Inf(1))
				continue
			}
			var sum T
			for ch := range nch {
				at := (bkv*nch+ch)*G + g
				if pm[at] == negInf {
					continue
				}
				w := T(math.Exp(float64(pm[at] - mx)))
				sum += w * pls[at]
				oc := po[at*Dv : (at+1)*Dv]
				for x := range out {
					out[x] += w * oc[x]
				}
			}
			inv := 1 / sum
			for x := range out {
				out[x] *= inv
			}
			lse[bh] = mx + T(math.Log(float64(sum)))
		}
	}
	return nil
}
