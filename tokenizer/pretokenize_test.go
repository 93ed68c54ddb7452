package tokenizer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestPreTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"x", []string{"x"}},
		// A Go function: a single space or punctuation unit is the
		// prefix of the word after it; punctuation takes the newline
		// and indentation that follow it.
		{"func main() {\n\tfmt.Println(\"hi\")\n}\n",
			[]string{"func", " main", "()", " {\n\t", "fmt", ".Println", "(\"", "hi", "\")\n", "}\n"}},
		{"if err != nil {\n\t\treturn err\n\t}",
			[]string{"if", " err", " !=", " nil", " {\n\t\t", "return", " err", "\n\t", "}"}},
		// Digits come in groups of at most three, from the left.
		{"x := 1234567", []string{"x", " :=", " 123", "456", "7"}},
		{"0x1F", []string{"0", "x", "1", "F"}},
		{"int64", []string{"int", "64"}},
		// '_' is a letter.
		{"_, foo_bar", []string{"_", ",", " foo_bar"}},
		// Runs of spaces: the last space goes to the next word, as in GPT-2.
		{"a  b", []string{"a", " ", " b"}},
		{"a   = b", []string{"a", "  ", " =", " b"}},
		{"a \n\tb", []string{"a", " \n\t", "b"}},
		{"x  ", []string{"x", "  "}},
		{"\n\n\tx", []string{"\n\n\t", "x"}},
		{"\t\t// note", []string{"\t\t", "//", " note"}},
		// Punctuation takes a following whitespace run only if it starts
		// with a newline, and not its last space before a word.
		{"x,\n  y", []string{"x", ",\n ", " y"}},
		{"x, y", []string{"x", ",", " y"}},
		{"x;\r\n", []string{"x", ";\r\n"}},
		// Only a single punctuation unit is a prefix.
		{"((x", []string{"((", "x"}},
		{" (x", []string{" (", "x"}},
		{"a.b.c", []string{"a", ".b", ".c"}},
		// Unicode letters, marks and numbers.
		{"héllo wörld", []string{"héllo", " wörld"}},
		{"e\u0301t\u00e9", []string{"e\u0301t\u00e9"}},
		{"x=٣٤٥٦", []string{"x", "=", "٣٤٥", "٦"}},
		{"a→b", []string{"a", "→b"}},
		// Invalid UTF-8: each byte is a punctuation unit.
		{"a\xffb", []string{"a", "\xffb"}},
		{"\xff\xfe\xc3", []string{"\xff\xfe\xc3"}},
		{"\xc3(", []string{"\xc3("}},
		{"x\xe2\x82", []string{"x", "\xe2\x82"}},
	}
	for _, tt := range tests {
		var got []string
		for _, c := range PreTokenize([]byte(tt.in)) {
			got = append(got, string(c))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("PreTokenize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// randomText returns n bytes drawn from a mix of Go-like fragments,
// Unicode and arbitrary bytes.
func randomText(r *rand.Rand, n int) []byte {
	frags := []string{
		" ", "  ", "\t", "\n", "\n\t", "\r\n", "x", "foo", "_", "é", "\u0301", "٣",
		"1", "23", "(", ")", ".", "{", "}", ":=", "//", "\"", "→", "\xff", "\xc3", "\xe2\x82",
	}
	var b []byte
	for len(b) < n {
		if r.IntN(8) == 0 {
			b = append(b, byte(r.IntN(256)))
		} else {
			b = append(b, frags[r.IntN(len(frags))]...)
		}
	}
	return b[:n]
}

// TestPreTokenizeCovers checks that the chunks are non-empty and
// concatenate to the input.
func TestPreTokenizeCovers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for n := range 300 {
		text := randomText(r, n)
		chunks := PreTokenize(text)
		for _, c := range chunks {
			if len(c) == 0 {
				t.Fatalf("PreTokenize(%q) has an empty chunk", text)
			}
		}
		if got := bytes.Join(chunks, nil); !bytes.Equal(got, text) {
			t.Fatalf("PreTokenize(%q) joins to %q", text, got)
		}
	}
}

// TestSafeCut checks the claim parallel counting relies on: at a safe
// cut, the two sides pre-tokenize to the chunks of the whole.
func TestSafeCut(t *testing.T) {
	src, err := os.ReadFile("pretokenize.go")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	texts := [][]byte{src}
	for range 200 {
		texts = append(texts, randomText(r, 200))
	}
	cuts := 0
	for _, text := range texts {
		whole := PreTokenize(text)
		for i := range text {
			if !safeCut(text, i) {
				continue
			}
			cuts++
			parts := append(PreTokenize(text[:i]), PreTokenize(text[i:])...)
			if !slices.EqualFunc(parts, whole, bytes.Equal) {
				t.Fatalf("cut at %d of %q:\n got %q\nwant %q", i, text, parts, whole)
			}
		}
	}
	if cuts < 100 {
		t.Fatalf("only %d safe cuts tried", cuts)
	}
}

// TestCountChunks compares the parallel counter, which cuts long
// documents into pieces, with a plain count over PreTokenize.
func TestCountChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 3))
	src, err := os.ReadFile("pretokenize.go")
	if err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for big.Len() < 2*pieceSize+pieceSize/2 {
		big.Write(src)
		big.Write(randomText(r, 100))
		fmt.Fprintf(&big, "\nline %d\n", big.Len())
	}
	docs := [][]byte{[]byte(big.String()), []byte("a b"), nil, []byte("x")}
	want := make(map[string]int64)
	for _, d := range docs {
		for _, c := range PreTokenize(d) {
			if len(c) >= 2 {
				want[string(c)]++
			}
		}
	}
	for _, workers := range []int{1, 2, 5} {
		keys, counts := countChunks(docs, workers)
		got := make(map[string]int64, len(keys))
		for i, k := range keys {
			if _, dup := got[k]; dup {
				t.Fatalf("workers=%d: chunk %q listed twice", workers, k)
			}
			got[k] = counts[i]
		}
		if len(got) != len(want) {
			t.Fatalf("workers=%d: %d distinct chunks, want %d", workers, len(got), len(want))
		}
		for k, c := range want {
			if got[k] != c {
				t.Fatalf("workers=%d: chunk %q counted %d times, want %d", workers, k, got[k], c)
			}
		}
	}
}
