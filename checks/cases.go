package checks

import "github.com/attnlab/attnlab/attention"

// The configurations the checks run on. They are small on purpose (every
// element of every input is differentiated numerically) and odd-sized, and
// between them they hold every feature of the mask.

// cacheChunk is a 2-token chunk after a cache of 3 tokens, two query heads
// sharing one key/value head (MQA): the seed's second visibility table.
func cacheChunk() *attention.Config {
	return &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 2, N: 5, D: 4, Dv: 3, Causal: true}
}

// mixed is a batch of two with grouped-query heads, a window and, per item,
// the awkward mask features: item 0 is left-padded (one padding key, positions
// counted from the first real token); item 1 packs two documents with segment
// ids and positions restarting at 0, and its last query is right padding.
func mixed() *attention.Config {
	const M, N = 3, 6
	kvalid := []bool{false, true, true, true, true, true, true, true, true, true, true, false}
	kpos := attention.PositionsFromValidity(kvalid, 2, N)
	copy(kpos[N:], []int{0, 1, 2, 0, 1, 2})
	return &attention.Config{
		B: 2, Hq: 4, Hkv: 2, M: M, N: N, D: 3, Dv: 2, Causal: true, Window: 3,
		KValid: kvalid,
		KPos:   kpos,
		QValid: batchRows(kvalid, 2, N, N-M, N),
		QPos:   batchRows(kpos, 2, N, N-M, N),
		KSeg:   []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1},
		QSeg:   []int{0, 0, 0, 1, 1, 1},
	}
}

// large is a shape too big for element-by-element differences.
func large() *attention.Config {
	return &attention.Config{B: 2, Hq: 8, Hkv: 2, M: 24, N: 40, D: 16, Dv: 8, Causal: true}
}
