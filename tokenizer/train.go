package tokenizer

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Options configures [Train]. The zero value is ready to use.
type Options struct {
	// Specials lists the special tokens, which get the ids after the
	// merges in this order. Nil means []string{EndOfText}; use an empty
	// non-nil slice for none. Each must be non-empty, valid UTF-8 and
	// distinct.
	Specials []string

	// MinFrequency stops training early when the most frequent pair
	// occurs fewer times than this. Values below 1 mean 1: training goes
	// on while any chunk has two tokens left.
	MinFrequency int64

	// Workers is the number of goroutines that pre-tokenize and count
	// chunks. Values below 1 mean runtime.GOMAXPROCS(0). The result does
	// not depend on it.
	Workers int
}

// pieceSize is the amount of text, in bytes, that one counting task
// pre-tokenizes. Documents longer than this are cut at safe points.
const pieceSize = 1 << 20

// Train learns a tokenizer of vocabSize ids from docs: 256 byte tokens,
// vocabSize−256−len(specials) merges, and the special tokens. Merges never
// cross document or chunk boundaries, and the text of docs is plain: a
// special token's name in it is ordinary text.
//
// Each merge replaces the most frequent adjacent pair of tokens, counted
// over all chunks of all documents. Ties go to the pair (a, b) with the
// lowest a, then the lowest b. Training stops early, with fewer merges,
// when no pair occurs MinFrequency times; the result is then smaller than
// vocabSize. The output depends only on docs, vocabSize, Specials and
// MinFrequency.
//
// Train returns an error if vocabSize is too small to hold the byte and
// special tokens, larger than 1<<24, or if a special token is invalid.
func Train(docs [][]byte, vocabSize int, opt Options) (*Tokenizer, error) {
	return TrainContext(context.Background(), docs, vocabSize, opt)
}

// TrainContext is [Train] that stops, with ctx's error, soon after ctx is
// done.
func TrainContext(ctx context.Context, docs [][]byte, vocabSize int, opt Options) (*Tokenizer, error) {
	specials := opt.Specials
	if specials == nil {
		specials = []string{EndOfText}
	}
	if err := checkSpecials(specials); err != nil {
		return nil, err
	}
	specials = append([]string(nil), specials...)
	reserved := NumBytes + len(specials)
	if vocabSize < reserved || vocabSize > maxVocab {
		return nil, fmt.Errorf("tokenizer: vocabulary size %d is outside [%d, %d] (%d byte tokens and %d special tokens)",
			vocabSize, reserved, maxVocab, NumBytes, len(specials))
	}
	workers := opt.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	chunks, counts := countChunks(docs, workers)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := newLearner(chunks, counts)
	merges := l.learn(ctx, vocabSize-reserved, max(opt.MinFrequency, 1))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if i := tokenBytesOverflow(merges); i >= 0 {
		return nil, fmt.Errorf("tokenizer: merge %d makes the tokens longer than %d bytes in all; the corpus repeats very long chunks", i, maxTokenBytes)
	}
	return newTokenizer(merges, specials), nil
}

// TrainReader is [Train] on the whole of r as one document.
func TrainReader(r io.Reader, vocabSize int, opt Options) (*Tokenizer, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading training text: %w", err)
	}
	return Train([][]byte{data}, vocabSize, opt)
}

// checkSpecials returns an error naming the first invalid special token.
func checkSpecials(specials []string) error {
	seen := make(map[string]int, len(specials))
	for i, s := range specials {
		switch {
		case s == "":
			return fmt.Errorf("tokenizer: special token %d is empty", i)
		case !utf8.ValidString(s):
			return fmt.Errorf("tokenizer: special token %d (%q) is not valid UTF-8", i, s)
		}
		if j, ok := seen[s]; ok {
			return fmt.Errorf("tokenizer: special token %d (%q) repeats special token %d", i, s, j)
		}
		seen[s] = i
	}
	return nil
}

// countChunks pre-tokenizes docs on workers goroutines and returns every
// distinct chunk of at least two bytes with its number of occurrences.
// Shorter chunks cannot take part in a merge.
func countChunks(docs [][]byte, workers int) ([]string, []int64) {
	// Cut the documents into pieces of about pieceSize bytes at points
	// where pre-tokenizing the pieces separately changes nothing.
	var pieces [][]byte
	for _, d := range docs {
		for len(d) > pieceSize {
			i := pieceSize
			for i < len(d) && !safeCut(d, i) {
				i++
			}
			pieces = append(pieces, d[:i])
			d = d[i:]
		}
		if len(d) > 0 {
			pieces = append(pieces, d)
		}
	}
	workers = max(1, min(workers, len(pieces)))

	type table struct {
		index  map[string]int32 // chunk → index in keys and counts
		keys   []string
		counts []int64
	}
	tables := make([]table, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range tables {
		tab := &tables[w]
		tab.index = make(map[string]int32)
		wg.Go(func() {
			for {
				p := int(next.Add(1) - 1)
				if p >= len(pieces) {
					return
				}
				text := pieces[p]
				for i := 0; i < len(text); {
					j := nextChunk(text, i)
					if j-i >= 2 {
						// A lookup with string(b) does not allocate;
						// only a new chunk costs a string.
						if k, ok := tab.index[string(text[i:j])]; ok {
							tab.counts[k]++
						} else {
							s := string(text[i:j])
							tab.index[s] = int32(len(tab.keys))
							tab.keys = append(tab.keys, s)
							tab.counts = append(tab.counts, 1)
						}
					}
					i = j
				}
			}
		})
	}
	wg.Wait()

	// Fold the other tables into the first.
	all := &tables[0]
	for _, tab := range tables[1:] {
		for k, s := range tab.keys {
			if i, ok := all.index[s]; ok {
				all.counts[i] += tab.counts[k]
			} else {
				all.index[s] = int32(len(all.keys))
				all.keys = append(all.keys, s)
				all.counts = append(all.counts, tab.counts[k])
			}
		}
	}
	return all.keys, all.counts
}

// A learner runs the BPE merge loop with incremental pair counts.
//
// Each distinct chunk (a "word") is a sequence of ids, rewritten in place
// by each merge. count holds, for every adjacent pair, the number of its
// occurrences weighted by word counts. where lists, for each pair, the
// words that held it when it was counted: a word is appended when a merge
// gives it the pair, so it may be listed twice, and entries go stale when
// a merge removes the pair; the merge loop skips both. A merge visits only
// the words listed for its pair and adjusts count for the pairs next to
// each replaced occurrence, so its cost is proportional to the words it
// changes, not to the corpus.
//
// The heap holds (count, pair) entries ordered by count, then by pair
// key. An entry is pushed whenever a pair's count changes, and an entry
// whose count is no longer current is discarded when it reaches the top.
type learner struct {
	words  [][]int32
	weight []int64
	count  map[uint64]int64
	where  map[uint64][]int32
	heap   []pairCount
	delta  map[uint64]int64 // count changes of the merge in progress
	seen   []uint32         // seen[w] == stamp: word w already merged
	stamp  uint32
}

type pairCount struct {
	count int64
	key   uint64
}

// before reports whether x is merged before y: a higher count, or the
// same count and a lower pair.
func (x pairCount) before(y pairCount) bool {
	return x.count > y.count || x.count == y.count && x.key < y.key
}

func newLearner(chunks []string, counts []int64) *learner {
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	l := &learner{
		words:  make([][]int32, len(chunks)),
		weight: counts,
		count:  make(map[uint64]int64),
		where:  make(map[uint64][]int32),
		delta:  make(map[uint64]int64),
		seen:   make([]uint32, len(chunks)),
	}
	backing := make([]int32, n)
	for w, c := range chunks {
		s := backing[:len(c):len(c)]
		backing = backing[len(c):]
		for i := range len(c) {
			s[i] = int32(c[i])
		}
		l.words[w] = s
	}
	// Byte pairs fit a dense table; count them there first.
	byteCount := make([]int64, NumBytes*NumBytes)
	byteWhere := make([][]int32, NumBytes*NumBytes)
	for w, s := range l.words {
		for i := 0; i+1 < len(s); i++ {
			p := s[i]<<8 | s[i+1]
			byteCount[p] += counts[w]
			if lst := byteWhere[p]; len(lst) == 0 || lst[len(lst)-1] != int32(w) {
				byteWhere[p] = append(lst, int32(w))
			}
		}
	}
	for p, c := range byteCount {
		if c > 0 {
			key := pairKey(int32(p>>8), int32(p&0xff))
			l.count[key] = c
			l.where[key] = byteWhere[p]
			l.heap = append(l.heap, pairCount{c, key})
		}
	}
	for i := len(l.heap)/2 - 1; i >= 0; i-- {
		l.down(i)
	}
	return l
}

// learn performs up to n merges of pairs that occur at least minFreq
// times and returns them; it stops early when ctx is done.
func (l *learner) learn(ctx context.Context, n int, minFreq int64) []Pair {
	merges := make([]Pair, 0, min(n, 1<<16)) // n may be far more than the corpus allows
	for len(merges) < n {
		if len(merges)%64 == 0 && ctx.Err() != nil {
			break
		}
		// step 1: the most frequent pair, lowest key on ties
		top, ok := l.pop()
		if !ok || top.count < minFreq {
			break
		}
		a, b := int32(top.key>>32), int32(uint32(top.key))
		z := int32(NumBytes + len(merges))
		merges = append(merges, Pair{int(a), int(b)})

		// step 2: rewrite each word listed for the pair once, collecting
		// the count changes in l.delta
		list := l.where[top.key]
		delete(l.where, top.key)
		l.stamp++
		for _, w := range list {
			if l.seen[w] != l.stamp {
				l.seen[w] = l.stamp
				l.mergeWord(w, a, b, z)
			}
		}
		// step 3: apply the changes, with a fresh heap entry for each
		// pair whose count moved
		for key, d := range l.delta {
			if d == 0 {
				continue
			}
			c := l.count[key] + d
			if c == 0 {
				delete(l.count, key)
				continue
			}
			l.count[key] = c
			l.push(pairCount{c, key})
		}
		clear(l.delta)
		if _, ok := l.count[top.key]; ok {
			panic("tokenizer: internal error: merged pair still counted")
		}
	}
	return merges
}

// mergeWord replaces every occurrence of (a, b) in word w by z, scanning
// left to right so that in a run a a a of a == b the first two merge.
//
// Only the pairs that touch a replaced occurrence change: in the old word
// the pairs ending at, inside and starting after each occurrence, in the
// new word the pairs on either side of each z. Every other pair has an
// unchanged twin in the new word. Their counts are adjusted in l.delta
// by the word's weight, and the new pairs list w in l.where.
func (l *learner) mergeWord(w int32, a, b, z int32) {
	s := l.words[w]
	n := len(s)
	wt := l.weight[w]

	// Pass 1: remove the old pairs around each occurrence. last is the
	// last pair index removed, so that pairs shared by neighbouring
	// occurrences are removed once.
	found, last := false, -1
	for i := 0; i+1 < n; {
		if s[i] != a || s[i+1] != b {
			i++
			continue
		}
		found = true
		for j := max(i-1, last+1); j <= i+1 && j+1 < n; j++ {
			l.delta[pairKey(s[j], s[j+1])] -= wt
			last = j
		}
		i += 2
	}
	if !found {
		return // a stale entry of l.where
	}

	// Pass 2: rewrite the word in place.
	o := 0
	for i := 0; i < n; o++ {
		if i+1 < n && s[i] == a && s[i+1] == b {
			s[o] = z
			i += 2
		} else {
			s[o] = s[i]
			i++
		}
	}
	s = s[:o]
	l.words[w] = s

	// Pass 3: add the new pairs on either side of each z.
	last = -1
	for q := range o {
		if s[q] != z {
			continue
		}
		for j := max(q-1, last+1); j <= q && j+1 < o; j++ {
			key := pairKey(s[j], s[j+1])
			l.delta[key] += wt
			if lst := l.where[key]; len(lst) == 0 || lst[len(lst)-1] != w {
				l.where[key] = append(lst, w)
			}
			last = j
		}
	}
}

// pop removes and returns the first current entry of the heap; ok is
// false when no pair is left.
func (l *learner) pop() (top pairCount, ok bool) {
	for len(l.heap) > 0 {
		top = l.heap[0]
		n := len(l.heap) - 1
		l.heap[0] = l.heap[n]
		l.heap = l.heap[:n]
		l.down(0)
		if c, ok := l.count[top.key]; ok && c == top.count {
			return top, true
		}
	}
	return pairCount{}, false
}

func (l *learner) push(x pairCount) {
	l.heap = append(l.heap, x)
	for i := len(l.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !x.before(l.heap[p]) {
			break
		}
		l.heap[i] = l.heap[p]
		i = p
		l.heap[i] = x
	}
}

func (l *learner) down(i int) {
	h := l.heap
	if i >= len(h) {
		return
	}
	x := h[i]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1].before(h[c]) {
			c++
		}
		if !h[c].before(x) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
}
