package tokenizer

import (
	"bytes"
	"fmt"
	"runtime"
)

// EndOfText is the special token that separates documents. [Train] adds it
// by default.
const EndOfText = "<|endoftext|>"

// NumBytes is the number of byte tokens: id b < NumBytes is the single
// byte b.
const NumBytes = 256

// maxVocab bounds the vocabulary so that ids fit in an int32 with room to
// spare and a corrupt file cannot make Load allocate without bound.
const maxVocab = 1 << 24

// maxTokenBytes bounds the total length of the bytes of all tokens. A
// merge of a token with itself doubles its length, so a few dozen merges
// of a small file could otherwise ask for terabytes. Real vocabularies
// stay far below: 4096 ids learned on Go source hold 17 KB.
const maxTokenBytes = 1 << 26

// A Pair is a merge: the tokens Left and Right, adjacent in a chunk, are
// replaced by one new token.
type Pair struct {
	Left, Right int
}

// A Tokenizer is a byte-level BPE tokenizer, made by [Train],
// [TrainReader], [Load] or [ReadJSON]; the zero value is not usable. It is
// safe for concurrent use by multiple goroutines.
type Tokenizer struct {
	merges   []Pair           // merge i creates id NumBytes+i
	ranks    map[uint64]int32 // pairKey(merge i) → i
	specials []string         // special i has id NumBytes+len(merges)+i
	special  map[string]int   // special token → id

	// The bytes of token id are tokBytes[tokOff[id]:tokOff[id+1]].
	tokBytes []byte
	tokOff   []int32

	states chan *encoder // idle encoders, each with its own chunk cache
}

// pairKey packs the pair (a, b) into one map key. Ordering keys as
// integers orders pairs by a, then b.
func pairKey(a, b int32) uint64 {
	return uint64(uint32(a))<<32 | uint64(uint32(b))
}

// tokenBytesOverflow returns the index of the first merge whose token
// makes the total length of the tokens exceed maxTokenBytes, or -1 if the
// merges stay within it. Every merge must refer only to earlier ids.
func tokenBytesOverflow(merges []Pair) int {
	size := make([]int64, NumBytes, NumBytes+len(merges))
	for i := range size {
		size[i] = 1
	}
	total := int64(NumBytes)
	for i, m := range merges {
		n := size[m.Left] + size[m.Right] // at most 2*maxTokenBytes
		total += n
		if total > maxTokenBytes {
			return i
		}
		size = append(size, n)
	}
	return -1
}

// newTokenizer builds a Tokenizer from merges and specials, which must
// already be valid: every merge refers only to earlier ids, no merge is
// repeated, the tokens pass tokenBytesOverflow, and the specials are
// distinct and non-empty.
func newTokenizer(merges []Pair, specials []string) *Tokenizer {
	t := &Tokenizer{
		merges:   merges,
		ranks:    make(map[uint64]int32, len(merges)),
		specials: specials,
		special:  make(map[string]int, len(specials)),
		states:   make(chan *encoder, runtime.GOMAXPROCS(0)),
	}
	for i, m := range merges {
		t.ranks[pairKey(int32(m.Left), int32(m.Right))] = int32(i)
	}
	n := NumBytes + len(merges) + len(specials)
	t.tokOff = make([]int32, 1, n+1)
	for b := range NumBytes {
		t.tokBytes = append(t.tokBytes, byte(b))
		t.tokOff = append(t.tokOff, int32(len(t.tokBytes)))
	}
	for _, m := range merges {
		t.tokBytes = append(t.tokBytes, t.token(m.Left)...)
		t.tokBytes = append(t.tokBytes, t.token(m.Right)...)
		t.tokOff = append(t.tokOff, int32(len(t.tokBytes)))
	}
	for i, s := range specials {
		t.special[s] = NumBytes + len(merges) + i
		t.tokBytes = append(t.tokBytes, s...)
		t.tokOff = append(t.tokOff, int32(len(t.tokBytes)))
	}
	return t
}

// token returns the bytes of id, which must be in range, without copying.
func (t *Tokenizer) token(id int) []byte {
	return t.tokBytes[t.tokOff[id]:t.tokOff[id+1]:t.tokOff[id+1]]
}

// VocabSize returns the number of ids: 256 byte tokens, the merges, and
// the special tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokOff) - 1 }

// NumMerges returns the number of merges. Merge i creates the id 256+i.
func (t *Tokenizer) NumMerges() int { return len(t.merges) }

// Merges returns a copy of the merges in rank order.
func (t *Tokenizer) Merges() []Pair { return append([]Pair(nil), t.merges...) }

// Token returns a copy of the bytes that id stands for: one byte for
// id < 256, the concatenation of the merged pair for a merge, and the
// name for a special token. It is meant for display; [Tokenizer.Decode]
// is the way to turn ids back into text.
//
// It panics if id is not in [0, VocabSize()).
func (t *Tokenizer) Token(id int) []byte {
	if id < 0 || id >= t.VocabSize() {
		panic(fmt.Sprintf("tokenizer: Token(%d) is outside the vocabulary [0, %d)", id, t.VocabSize()))
	}
	return bytes.Clone(t.token(id))
}

// Special returns the id of the special token name, such as [EndOfText],
// or -1 if the tokenizer has no such special token.
func (t *Tokenizer) Special(name string) int {
	if id, ok := t.special[name]; ok {
		return id
	}
	return -1
}

// Extending returns the ids, in increasing order, of the ordinary (not
// special) tokens whose bytes begin with prefix: the tokens a text ending
// in prefix may continue with when prefix was split off as a token of its
// own (token healing).
func (t *Tokenizer) Extending(prefix []byte) []int {
	var out []int
	for id := range t.VocabSize() - len(t.specials) {
		if bytes.HasPrefix(t.token(id), prefix) {
			out = append(out, id)
		}
	}
	return out
}

// Specials returns the special tokens in id order. The first has the id
// 256+NumMerges().
func (t *Tokenizer) Specials() []string { return append([]string(nil), t.specials...) }

// Encode returns the ids of text. Text is always plain: a special token's
// name in text is encoded as ordinary bytes, never as the special id (see
// [Tokenizer.EncodeWithSpecial]).
//
// Decode(Encode(text)) equals text for every text, including text that is
// not valid UTF-8.
func (t *Tokenizer) Encode(text []byte) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+1), text)
}

// AppendEncode appends the ids of text to dst and returns the extended
// slice. It is Encode without the allocation when dst has room.
func (t *Tokenizer) AppendEncode(dst []int, text []byte) []int {
	e := t.getEncoder()
	for i := 0; i < len(text); {
		j := nextChunk(text, i)
		dst = e.appendChunk(dst, text[i:j])
		i = j
	}
	t.putEncoder(e)
	return dst
}

// EncodeWithSpecial is like Encode but turns every occurrence of a special
// token's name in text into its id. Where names overlap, the leftmost
// match wins, and the longest of those starting at the same byte. The text
// between matches is encoded as by Encode, so chunks never straddle a
// special token.
func (t *Tokenizer) EncodeWithSpecial(text []byte) []int {
	dst := make([]int, 0, len(text)/3+1)
	if len(t.specials) == 0 {
		return t.AppendEncode(dst, text)
	}
	// next[k] is the offset in text of the next occurrence of special k
	// at or after pos, or -1 if there is none.
	next := make([]int, len(t.specials))
	for k, s := range t.specials {
		next[k] = bytes.Index(text, []byte(s))
	}
	pos := 0
	for {
		best := -1
		for k, s := range t.specials {
			if next[k] >= 0 && next[k] < pos {
				if i := bytes.Index(text[pos:], []byte(s)); i >= 0 {
					next[k] = pos + i
				} else {
					next[k] = -1
				}
			}
			if next[k] < 0 {
				continue
			}
			if best < 0 || next[k] < next[best] ||
				next[k] == next[best] && len(s) > len(t.specials[best]) {
				best = k
			}
		}
		if best < 0 {
			return t.AppendEncode(dst, text[pos:])
		}
		dst = t.AppendEncode(dst, text[pos:next[best]])
		dst = append(dst, NumBytes+len(t.merges)+best)
		pos = next[best] + len(t.specials[best])
	}
}

// Decode returns the bytes that ids stand for, the concatenation of
// Token(id) for every id. It is meant for ids known to be valid, such as
// the output of Encode, and saves the caller an error check;
// [Tokenizer.DecodeChecked] is the variant for ids from elsewhere.
//
// It panics if an id is not in [0, VocabSize()).
func (t *Tokenizer) Decode(ids []int) []byte {
	out, err := t.DecodeChecked(ids)
	if err != nil {
		panic(err.Error())
	}
	return out
}

// DecodeChecked is like Decode but returns an error naming the first id
// outside the vocabulary and its index in ids.
func (t *Tokenizer) DecodeChecked(ids []int) ([]byte, error) {
	v := t.VocabSize()
	n := 0
	for i, id := range ids {
		if id < 0 || id >= v {
			return nil, fmt.Errorf("tokenizer: id %d at index %d is outside the vocabulary [0, %d)", id, i, v)
		}
		n += int(t.tokOff[id+1] - t.tokOff[id])
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		out = append(out, t.tokBytes[t.tokOff[id]:t.tokOff[id+1]]...)
	}
	return out, nil
}
