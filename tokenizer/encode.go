package tokenizer

import "math"

const (
	// noRank is the rank of a pair that is not a merge.
	noRank = math.MaxInt32

	// shortChunk is the longest chunk, in bytes, that bpeShort handles.
	// Its cost grows with the square of the length; beyond this, bpeLong's
	// heap is faster.
	shortChunk = 64

	// Chunks of at most maxCachedLen bytes are cached, and the cache is
	// emptied when it holds maxCached chunks. Code repeats a small set of
	// identifiers, keywords and indentation runs, so even a small cache
	// serves most chunks.
	maxCachedLen = 64
	maxCached    = 1 << 15
)

// An encoder holds the scratch space and the chunk cache of one Encode
// call at a time. Idle encoders wait in Tokenizer.states.
type encoder struct {
	t     *Tokenizer
	cache map[string]uint64 // chunk → offset<<32 | length of its ids in arena
	arena []int32
	syms  []int32 // symbols of the chunk being merged
	ranks []int32 // bpeShort: ranks[k] is the rank of (syms[k], syms[k+1])
	prev  []int32 // bpeLong: doubly linked list of live symbols
	next  []int32
	heap  []uint64 // bpeLong: rank<<32 | position, a min-heap
}

func (t *Tokenizer) getEncoder() *encoder {
	select {
	case e := <-t.states:
		return e
	default:
		return &encoder{t: t, cache: make(map[string]uint64)}
	}
}

func (t *Tokenizer) putEncoder(e *encoder) {
	select {
	case t.states <- e:
	default: // enough encoders are idle already
	}
}

// rank returns the rank of the merge (a, b), or noRank.
func (e *encoder) rank(a, b int32) int32 {
	if r, ok := e.t.ranks[pairKey(a, b)]; ok {
		return r
	}
	return noRank
}

// appendChunk appends the ids of one pre-tokenized chunk to dst.
func (e *encoder) appendChunk(dst []int, chunk []byte) []int {
	if len(chunk) == 1 {
		return append(dst, int(chunk[0]))
	}
	if v, ok := e.cache[string(chunk)]; ok {
		for _, id := range e.arena[v>>32 : v>>32+v&math.MaxUint32] {
			dst = append(dst, int(id))
		}
		return dst
	}
	e.syms = e.syms[:0]
	for _, b := range chunk {
		e.syms = append(e.syms, int32(b))
	}
	var syms []int32
	if len(chunk) <= shortChunk {
		syms = e.bpeShort(e.syms)
	} else {
		syms = e.bpeLong(e.syms)
	}
	if len(chunk) <= maxCachedLen {
		if len(e.cache) >= maxCached {
			clear(e.cache)
			e.arena = e.arena[:0]
		}
		e.cache[string(chunk)] = uint64(len(e.arena))<<32 | uint64(len(syms))
		e.arena = append(e.arena, syms...)
	}
	for _, id := range syms {
		dst = append(dst, int(id))
	}
	return dst
}

// bpeShort applies the merges to syms in place and returns the result.
// At each step it merges the leftmost pair of lowest rank. This equals
// applying the merges one after the other in rank order, as training did:
// a merge creates an id that only later merges refer to, so the lowest
// rank present never decreases.
func (e *encoder) bpeShort(syms []int32) []int32 {
	ranks := e.ranks[:0]
	for k := 0; k+1 < len(syms); k++ {
		ranks = append(ranks, e.rank(syms[k], syms[k+1]))
	}
	for {
		best, r := -1, int32(noRank)
		for k, rk := range ranks {
			if rk < r { // strict: the leftmost wins ties
				best, r = k, rk
			}
		}
		if best < 0 {
			break
		}
		// Replace syms[best], syms[best+1] by the new id. The pair
		// ranks[best] disappears; the pairs on either side now involve
		// the new id.
		syms[best] = NumBytes + r
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best > 0 {
			ranks[best-1] = e.rank(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best] = e.rank(syms[best], syms[best+1])
		}
	}
	e.ranks = ranks
	return syms
}

// bpeLong is bpeShort in O(n log n) for long chunks: the live symbols
// form a linked list and the candidate pairs wait in a heap ordered by
// rank, then position, so the leftmost of equal ranks comes first.
// Entries made stale by earlier merges are skipped when popped.
func (e *encoder) bpeLong(syms []int32) []int32 {
	n := int32(len(syms))
	e.prev, e.next = e.prev[:0], e.next[:0]
	for k := range n {
		e.prev = append(e.prev, k-1)
		e.next = append(e.next, k+1) // n means none
	}
	prev, next := e.prev, e.next
	h := e.heap[:0]
	for k := int32(0); k+1 < n; k++ {
		if r := e.rank(syms[k], syms[k+1]); r != noRank {
			h = heapPush(h, uint64(r)<<32|uint64(k))
		}
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		r, k := int32(top>>32), int32(top&math.MaxUint32)
		nx := next[k]
		if syms[k] < 0 || nx >= n || e.rank(syms[k], syms[nx]) != r {
			continue // stale: k was merged away or its pair changed
		}
		syms[k], syms[nx] = NumBytes+r, -1
		next[k] = next[nx]
		if next[k] < n {
			prev[next[k]] = k
		}
		if p := prev[k]; p >= 0 {
			if r := e.rank(syms[p], syms[k]); r != noRank {
				h = heapPush(h, uint64(r)<<32|uint64(p))
			}
		}
		if nx := next[k]; nx < n {
			if r := e.rank(syms[k], syms[nx]); r != noRank {
				h = heapPush(h, uint64(r)<<32|uint64(k))
			}
		}
	}
	e.heap = h
	out := syms[:0]
	for k := int32(0); k < n; k = next[k] {
		out = append(out, syms[k])
	}
	return out
}

// heapPush adds x to the min-heap h.
func heapPush(h []uint64, x uint64) []uint64 {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= x {
			break
		}
		h[i], h[p] = h[p], x
		i = p
	}
	return h
}

// heapPop removes and returns the least element of the non-empty
// min-heap h.
func heapPop(h []uint64) (uint64, []uint64) {
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	if len(h) == 0 {
		return top, h
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if last <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = last
	return top, h
}
