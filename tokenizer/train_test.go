package tokenizer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// repeat returns n copies of the document s.
func repeat(s string, n int) [][]byte {
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = []byte(s)
	}
	return docs
}

// TestTrainHandComputed checks Train against merges worked out by hand.
func TestTrainHandComputed(t *testing.T) {
	// The corpus of the Hugging Face course's BPE chapter, one word per
	// document so that no word gets a space prefix:
	//
	//	hug ×10, pug ×5, pun ×12, bun ×4, hugs ×5
	//
	// Pair counts, and the merge each round picks (ids: b=98, g=103,
	// h=104, n=110, p=112, s=115, u=117):
	//
	//	1. hu 15, ug 20, pu 17, un 16, bu 4, gs 5       → u g    = 256 "ug"
	//	2. h·ug 15, p·ug 5, pu 12, un 16, bu 4, ug·s 5   → u n    = 257 "un"
	//	3. h·ug 15, p·ug 5, p·un 12, b·un 4, ug·s 5      → h 256  = 258 "hug"
	//	4. p·ug 5, p·un 12, b·un 4, hug·s 5              → p 257  = 259 "pun"
	//	5. p·ug 5, b·un 4, hug·s 5: a tie at 5, and the
	//	   lower left id wins, p = 112 < hug = 258         → p 256  = 260 "pug"
	//	6. b·un 4, hug·s 5                                → 258 s  = 261 "hugs"
	//	7. b·un 4                                         → b 257  = 262 "bun"
	//
	// after which every word is one token and training stops short of
	// the requested size.
	var docs [][]byte
	for _, w := range []struct {
		word string
		n    int
	}{{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}} {
		docs = append(docs, repeat(w.word, w.n)...)
	}
	want := []Pair{{'u', 'g'}, {'u', 'n'}, {'h', 256}, {'p', 257}, {'p', 256}, {258, 's'}, {'b', 257}}
	tok, err := Train(docs, 1000, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Merges(); !slices.Equal(got, want) {
		t.Errorf("merges = %v, want %v", got, want)
	}
	if got, want := tok.VocabSize(), 256+7+1; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
	if got := tok.Special(EndOfText); got != 263 {
		t.Errorf("Special(EndOfText) = %d, want 263", got)
	}
	for id, s := range map[int]string{258: "hug", 261: "hugs", 262: "bun"} {
		if got := string(tok.Token(id)); got != s {
			t.Errorf("Token(%d) = %q, want %q", id, got, s)
		}
	}

	// A smaller vocabulary keeps the first merges.
	tok, err = Train(docs, 256+3+1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Merges(); !slices.Equal(got, want[:3]) {
		t.Errorf("vocabulary 260: merges = %v, want %v", got, want[:3])
	}

	// MinFrequency 5 stops before round 7, whose best pair occurs 4 times.
	tok, err = Train(docs, 1000, Options{MinFrequency: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Merges(); !slices.Equal(got, want[:6]) {
		t.Errorf("MinFrequency 5: merges = %v, want %v", got, want[:6])
	}
}

// TestTrainRuns checks merges of a pair of equal tokens, which can
// overlap. The chunks of "aaaa aab" are "aaaa" and " aab" (a=97, ' '=32):
//
//  1. aa occurs 3 times in aaaa and once in aab: 4   → a a    = 256
//     aaaa becomes 256 256, not 256 a a: the scan is left to right.
//  2. 256·256 1, ' '·256 1, 256·b 1: a tie, lowest left id → ' ' 256 = 257
//  3. 256·256 1, 257·b 1                             → 256 256 = 258
//  4. 257·b 1                                        → 257 b   = 259
func TestTrainRuns(t *testing.T) {
	tok, err := Train([][]byte{[]byte("aaaa aab")}, 1000, Options{Specials: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Pair{{'a', 'a'}, {' ', 256}, {256, 256}, {257, 'b'}}
	if got := tok.Merges(); !slices.Equal(got, want) {
		t.Errorf("merges = %v, want %v", got, want)
	}
	if got := tok.Encode([]byte("aaaaa")); !slices.Equal(got, []int{258, 'a'}) {
		t.Errorf("Encode(aaaaa) = %v, want [258 97]", got)
	}
}

// naiveTrain is the oracle for Train: it recounts every pair of every
// chunk before each merge. It returns the merges and, for each distinct
// chunk, its ids after the last merge.
func naiveTrain(docs [][]byte, nMerges int) ([]Pair, map[string][]int) {
	words := make(map[string][]int)
	weight := make(map[string]int64)
	for _, d := range docs {
		for _, c := range PreTokenize(d) {
			if _, ok := words[string(c)]; !ok {
				ids := make([]int, len(c))
				for i, b := range c {
					ids[i] = int(b)
				}
				words[string(c)] = ids
			}
			weight[string(c)]++
		}
	}
	var merges []Pair
	for len(merges) < nMerges {
		count := make(map[Pair]int64)
		for w, ids := range words {
			for i := 0; i+1 < len(ids); i++ {
				count[Pair{ids[i], ids[i+1]}] += weight[w]
			}
		}
		var best Pair
		var bestN int64
		for p, n := range count {
			if n > bestN || n == bestN && (p.Left < best.Left || p.Left == best.Left && p.Right < best.Right) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			break
		}
		z := NumBytes + len(merges)
		merges = append(merges, best)
		for w, ids := range words {
			var out []int
			for i := 0; i < len(ids); i++ {
				if i+1 < len(ids) && ids[i] == best.Left && ids[i+1] == best.Right {
					out = append(out, z)
					i++
				} else {
					out = append(out, ids[i])
				}
			}
			words[w] = out
		}
	}
	return merges, words
}

// ownSource returns this package's Go files as documents, a corpus that
// is always present.
func ownSource(tb testing.TB) [][]byte {
	tb.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no Go files in the package directory: %v", err)
	}
	slices.Sort(paths)
	var docs [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		docs = append(docs, data)
	}
	return docs
}

// TestTrainMatchesNaive compares the incremental trainer with naiveTrain,
// merge by merge, and Encode with naiveTrain's final chunks.
func TestTrainMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	var random [][]byte
	for range 50 {
		random = append(random, randomText(r, 1+r.IntN(300)))
	}
	// A small alphabet makes long runs of equal tokens and many ties.
	var ab [][]byte
	for range 40 {
		b := make([]byte, 1+r.IntN(60))
		for i := range b {
			b[i] = "aab "[r.IntN(4)]
		}
		ab = append(ab, b)
	}
	own := ownSource(t)
	if testing.Short() {
		own = own[:1]
	}
	corpora := []struct {
		name    string
		docs    [][]byte
		nMerges int
	}{
		{"random", random, 300},
		{"ab", ab, 200},
		{"own-source", own, 400},
	}
	for _, c := range corpora {
		t.Run(c.name, func(t *testing.T) {
			want, words := naiveTrain(c.docs, c.nMerges)
			tok, err := Train(c.docs, NumBytes+c.nMerges+1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := tok.Merges()
			t.Logf("%d merges, %d distinct chunks", len(want), len(words))
			if len(got) != len(want) {
				t.Errorf("%d merges, oracle has %d", len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("merge %d = %v, oracle has %v", i, got[i], want[i])
				}
			}
			for w, ids := range words {
				if enc := tok.Encode([]byte(w)); !slices.Equal(enc, ids) {
					t.Fatalf("Encode(%q) = %v, training left %v", w, enc, ids)
				}
			}
		})
	}
}

// TestTrainDeterministic checks that the merges do not depend on the
// number of workers, nor on the run.
func TestTrainDeterministic(t *testing.T) {
	own := ownSource(t)
	// One long document, cut into pieces by the counter.
	long := bytes.Repeat(bytes.Join(own, []byte("\n")), 1+2*pieceSize/len(bytes.Join(own, nil)))
	for _, docs := range [][][]byte{own, {long}} {
		var first []Pair
		for i, workers := range []int{1, 2, 3, 2} {
			tok, err := Train(docs, 700, Options{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = tok.Merges()
				continue
			}
			if got := tok.Merges(); !slices.Equal(got, first) {
				t.Fatalf("run %d with %d workers learned different merges", i, workers)
			}
		}
	}
}

func TestTrainErrors(t *testing.T) {
	docs := [][]byte{[]byte("x")}
	tests := []struct {
		vocab int
		opt   Options
		want  string
	}{
		{256, Options{}, "vocabulary size 256 is outside [257, 16777216]"},
		{1 << 25, Options{}, "vocabulary size 33554432 is outside"},
		{300, Options{Specials: []string{"a", ""}}, "special token 1 is empty"},
		{300, Options{Specials: []string{"<a>", "<b>", "<a>"}}, `special token 2 ("<a>") repeats special token 0`},
		{300, Options{Specials: []string{"\xff"}}, `special token 0 ("\xff") is not valid UTF-8`},
	}
	for _, tt := range tests {
		_, err := Train(docs, tt.vocab, tt.opt)
		if err == nil || !strings.HasPrefix(err.Error(), "tokenizer: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Train(vocab %d, %+v) error = %v, want %q", tt.vocab, tt.opt, err, tt.want)
		}
	}
	// An empty corpus has nothing to merge.
	tok, err := Train(nil, 1000, Options{})
	if err != nil || tok.VocabSize() != 257 || tok.Special(EndOfText) != 256 {
		t.Errorf("Train(no documents) = %v, %v", tok, err)
	}
	// 256 is enough without special tokens.
	tok, err = Train(docs, 256, Options{Specials: []string{}})
	if err != nil || tok.VocabSize() != 256 {
		t.Errorf("Train(vocab 256, no specials) = %v, %v", tok, err)
	}
}

func TestTrainReader(t *testing.T) {
	text := "if err != nil {\n\treturn err\n}\n"
	a, err := TrainReader(strings.NewReader(strings.Repeat(text, 3)), 300, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train([][]byte{[]byte(strings.Repeat(text, 3))}, 300, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Merges(), b.Merges()) {
		t.Error("TrainReader and Train learned different merges")
	}
	_, err = TrainReader(errReader{}, 300, Options{})
	if err == nil || !strings.Contains(err.Error(), "tokenizer: reading training text: broken") {
		t.Errorf("TrainReader(broken reader) error = %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("broken") }

var (
	ownOnce sync.Once
	ownTok  *Tokenizer
)

// ownTokenizer returns a tokenizer of 1000 ids trained once on this
// package's source.
func ownTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	ownOnce.Do(func() {
		tok, err := Train(ownSource(tb), 1000, Options{Specials: []string{EndOfText, "<|pad|>"}})
		if err != nil {
			tb.Fatal(err)
		}
		ownTok = tok
	})
	return ownTok
}
