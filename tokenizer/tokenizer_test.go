package tokenizer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// checkRoundTrip fails t unless text survives Encode and EncodeWithSpecial
// followed by Decode, and Encode produces no special id.
func checkRoundTrip(t *testing.T, tok *Tokenizer, text []byte) {
	t.Helper()
	ids := tok.Encode(text)
	if got := tok.Decode(ids); !bytes.Equal(got, text) {
		t.Fatalf("Decode(Encode(%q)) = %q", text, got)
	}
	firstSpecial := NumBytes + tok.NumMerges()
	for i, id := range ids {
		if id < 0 || id >= firstSpecial {
			t.Fatalf("Encode(%q)[%d] = %d, not a byte or merge id", text, i, id)
		}
	}
	if got := tok.Decode(tok.EncodeWithSpecial(text)); !bytes.Equal(got, text) {
		t.Fatalf("Decode(EncodeWithSpecial(%q)) = %q", text, got)
	}
}

func TestRoundTrip(t *testing.T) {
	tok := ownTokenizer(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	texts := [][]byte{
		nil,
		{},
		all,
		[]byte("\xff\xfe\xfd"),
		[]byte("ok\xc3(\xe2\x82 broken\x80 runes\xf0\x9f\x98"),
		[]byte("func (t *Tokenizer) Encode(text []byte) []int {\n\treturn nil\n}\n"),
		[]byte(EndOfText + "<|pad|>" + "<|endoftext"),
		bytes.Repeat([]byte("a"), 10000),
		bytes.Repeat([]byte("\t"), 5000),
		bytes.Repeat([]byte("ab"), 3000),
	}
	for b := range 256 {
		texts = append(texts, []byte{byte(b)}, []byte{' ', byte(b), 'x'})
	}
	r := rand.New(rand.NewPCG(3, 1))
	for range 500 {
		n := r.IntN(200)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		texts = append(texts, b, randomText(r, n))
	}
	for _, text := range texts {
		checkRoundTrip(t, tok, text)
	}
	if ids := tok.Encode(nil); len(ids) != 0 {
		t.Errorf("Encode(nil) = %v", ids)
	}
	if got := tok.Decode(nil); len(got) != 0 {
		t.Errorf("Decode(nil) = %q", got)
	}
}

// TestEncodeLearnsFromCorpus checks that the learned merges compress text
// like the training text: a frequent chunk becomes one token.
func TestEncodeLearnsFromCorpus(t *testing.T) {
	tok := ownTokenizer(t)
	for _, chunk := range []string{"return", " err", "\n\t"} {
		if ids := tok.Encode([]byte(chunk)); len(ids) != 1 {
			t.Errorf("Encode(%q) = %v, want one token", chunk, ids)
		}
	}
}

// naiveEncode applies the merges to each chunk one after the other in
// rank order, as training did.
func naiveEncode(tok *Tokenizer, text []byte) []int {
	var out []int
	for _, c := range PreTokenize(text) {
		ids := make([]int, len(c))
		for i, b := range c {
			ids[i] = int(b)
		}
		for r, m := range tok.merges {
			k := 0
			for i := 0; i < len(ids); i++ {
				if i+1 < len(ids) && ids[i] == m.Left && ids[i+1] == m.Right {
					ids[k] = NumBytes + r
					i++
				} else {
					ids[k] = ids[i]
				}
				k++
			}
			ids = ids[:k]
		}
		out = append(out, ids...)
	}
	return out
}

// TestEncodeMatchesNaive compares Encode, through both bpeShort and
// bpeLong, with naiveEncode.
func TestEncodeMatchesNaive(t *testing.T) {
	tok := ownTokenizer(t)
	r := rand.New(rand.NewPCG(3, 2))
	words := []string{"return", "err", "a", "aa", "tok", "en", "_", "ize", "Encode", "x"}
	texts := []string{
		strings.Repeat("a", 1001),
		strings.Repeat("returnerr", 50),
		strings.Repeat(")", 200) + "\n\t\t",
	}
	for range 200 {
		var b strings.Builder
		n := 1 + r.IntN(40)
		for range n {
			b.WriteString(words[r.IntN(len(words))])
		}
		texts = append(texts, b.String(), string(randomText(r, 100)))
	}
	for _, text := range texts {
		want := naiveEncode(tok, []byte(text))
		if got := tok.Encode([]byte(text)); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, want %v", text, got, want)
		}
		// Each chunk through both paths of the encoder.
		e := tok.getEncoder()
		for _, c := range PreTokenize([]byte(text)) {
			syms := func() []int32 {
				s := make([]int32, len(c))
				for i, b := range c {
					s[i] = int32(b)
				}
				return s
			}
			short := slices.Clone(e.bpeShort(syms()))
			long := e.bpeLong(syms())
			if !slices.Equal(short, long) {
				t.Fatalf("chunk %q: bpeShort = %v, bpeLong = %v", c, short, long)
			}
		}
		tok.putEncoder(e)
	}
}

// TestEncodeCache encodes the same text with a cold and a full cache.
func TestEncodeCache(t *testing.T) {
	tok := ownTokenizer(t)
	doc := bytes.Join(ownSource(t), nil)
	first := tok.Encode(doc)
	// Overflow the cache to force a reset, then encode again.
	r := rand.New(rand.NewPCG(3, 3))
	for range maxCached + 10 {
		tok.Encode(fmt.Appendf(nil, "w%dx%d", r.Uint64(), r.Uint64()))
	}
	if again := tok.Encode(doc); !slices.Equal(first, again) {
		t.Fatal("Encode changed after the cache was reset")
	}
}

// TestEncodeConcurrent encodes from several goroutines at once; run with
// -race.
func TestEncodeConcurrent(t *testing.T) {
	tok := ownTokenizer(t)
	docs := ownSource(t)
	want := make([][]int, len(docs))
	for i, d := range docs {
		want[i] = tok.Encode(d)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 2 * len(docs) {
				i := (g + k) % len(docs)
				if got := tok.Encode(docs[i]); !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("goroutine %d: document %d encoded differently", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestEncodeWithSpecial(t *testing.T) {
	tok := ownTokenizer(t)
	eot, pad := tok.Special(EndOfText), tok.Special("<|pad|>")
	if eot != tok.VocabSize()-2 || pad != tok.VocabSize()-1 || eot != NumBytes+tok.NumMerges() {
		t.Fatalf("Special: endoftext %d, pad %d, vocabulary %d, merges %d", eot, pad, tok.VocabSize(), tok.NumMerges())
	}
	if got := tok.Special("<|nope|>"); got != -1 {
		t.Errorf("Special(<|nope|>) = %d, want -1", got)
	}
	if got := tok.Specials(); !slices.Equal(got, []string{EndOfText, "<|pad|>"}) {
		t.Errorf("Specials() = %q", got)
	}

	text := []byte("a" + EndOfText + EndOfText + "b<|pad|>" + "<|endoftext")
	ids := tok.EncodeWithSpecial(text)
	want := slices.Concat(tok.Encode([]byte("a")), []int{eot, eot}, tok.Encode([]byte("b")), []int{pad}, tok.Encode([]byte("<|endoftext")))
	if !slices.Equal(ids, want) {
		t.Errorf("EncodeWithSpecial(%q) = %v, want %v", text, ids, want)
	}
	if plain := tok.Encode(text); slices.Contains(plain, eot) || slices.Contains(plain, pad) {
		t.Errorf("Encode(%q) = %v contains a special id", text, plain)
	}
	if got := tok.Decode(ids); !bytes.Equal(got, text) {
		t.Errorf("Decode = %q, want %q", got, text)
	}

	// Overlapping names: the leftmost match wins, then the longest.
	tok2 := newTokenizer(nil, []string{"<a>", "<a><b>", "b>"})
	got := tok2.EncodeWithSpecial([]byte("x<a><b>b><a>"))
	if want := []int{'x', 257, 258, 256}; !slices.Equal(got, want) {
		t.Errorf("overlapping specials: %v, want %v", got, want)
	}
}

func TestDecodeChecked(t *testing.T) {
	tok := ownTokenizer(t)
	v := tok.VocabSize()
	got, err := tok.DecodeChecked([]int{'h', 'i', tok.Special(EndOfText)})
	if err != nil || string(got) != "hi"+EndOfText {
		t.Errorf("DecodeChecked = %q, %v", got, err)
	}
	for _, tt := range []struct {
		ids  []int
		want string
	}{
		{[]int{1, 2, v}, fmt.Sprintf("tokenizer: id %d at index 2 is outside the vocabulary [0, %d)", v, v)},
		{[]int{-1}, fmt.Sprintf("tokenizer: id -1 at index 0 is outside the vocabulary [0, %d)", v)},
	} {
		if _, err := tok.DecodeChecked(tt.ids); err == nil || err.Error() != tt.want {
			t.Errorf("DecodeChecked(%v) error = %v, want %q", tt.ids, err, tt.want)
		}
		if msg := panicMessage(func() { tok.Decode(tt.ids) }); msg != tt.want {
			t.Errorf("Decode(%v) panic = %q, want %q", tt.ids, msg, tt.want)
		}
	}
}

func TestToken(t *testing.T) {
	tok := ownTokenizer(t)
	for id := range tok.VocabSize() {
		got := tok.Token(id)
		var want []byte
		switch {
		case id < NumBytes:
			want = []byte{byte(id)}
		case id < NumBytes+tok.NumMerges():
			m := tok.merges[id-NumBytes]
			want = slices.Concat(tok.Token(m.Left), tok.Token(m.Right))
		default:
			want = []byte(tok.specials[id-NumBytes-tok.NumMerges()])
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Token(%d) = %q, want %q", id, got, want)
		}
	}
	// Token returns a copy.
	tok.Token('a')[0] = 'b'
	if got := tok.Token('a'); string(got) != "a" {
		t.Errorf("writing to Token's result changed the token to %q", got)
	}
	want := fmt.Sprintf("tokenizer: Token(%d) is outside the vocabulary [0, %d)", tok.VocabSize(), tok.VocabSize())
	if msg := panicMessage(func() { tok.Token(tok.VocabSize()) }); msg != want {
		t.Errorf("Token(VocabSize()) panic = %q, want %q", msg, want)
	}
}

// panicMessage returns the value f panics with, formatted, or "".
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestExtending: the tokens that begin with a prefix are exactly the
// ordinary tokens whose bytes have it as a prefix, the token of the prefix
// itself among them, and never a special token.
func TestExtending(t *testing.T) {
	tok := ownTokenizer(t)
	for _, prefix := range []string{"\n", " err", "{", "ret"} {
		got := tok.Extending([]byte(prefix))
		var want []int
		for id := range tok.VocabSize() {
			if bytes.HasPrefix(tok.Token(id), []byte(prefix)) && !slices.Contains(tok.Specials(), string(tok.Token(id))) {
				want = append(want, id)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Extending(%q) = %v, want %v", prefix, got, want)
		}
		if ids := tok.Encode([]byte(prefix)); len(ids) == 1 && !slices.Contains(got, ids[0]) {
			t.Errorf("Extending(%q) leaves out the prefix's own token %d", prefix, ids[0])
		}
		if len(got) < 2 {
			t.Errorf("Extending(%q) = %v: the test wants a prefix that longer tokens extend", prefix, got)
		}
	}
	if got := tok.Extending([]byte(EndOfText)); len(got) != 0 {
		t.Errorf("Extending(%q) = %v, want no token (the special token is not text)", EndOfText, got)
	}
}
