package tokenizer

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzRoundTrip checks that Decode inverts Encode and EncodeWithSpecial
// for any bytes, and that pre-tokenization covers the input.
func FuzzRoundTrip(f *testing.F) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, seed := range [][]byte{
		nil,
		all,
		[]byte("\xff\xfe\xc3(\xe2\x82"),
		[]byte("package main\n\nfunc main() {\n\tprintln(\"héllo, 世界\", 12345)\n}\n"),
		[]byte("a" + EndOfText + "b<|pad|><|endoftext"),
		[]byte("  \t\n\r\n  x  "),
		bytes.Repeat([]byte("ab"), 100),
	} {
		f.Add(seed)
	}
	for _, doc := range ownSource(f)[:2] {
		f.Add(doc[:min(len(doc), 2000)])
	}
	tok := ownTokenizer(f)
	f.Fuzz(func(t *testing.T, text []byte) {
		if got := bytes.Join(PreTokenize(text), nil); !bytes.Equal(got, text) {
			t.Fatalf("PreTokenize(%q) joins to %q", text, got)
		}
		checkRoundTrip(t, tok, text)
		if got, want := tok.Encode(text), naiveEncode(tok, text); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, naive merges give %v", text, got, want)
		}
	})
}

// FuzzReadJSON checks that ReadJSON never panics and that whatever it
// accepts writes back to a file that reads the same.
func FuzzReadJSON(f *testing.F) {
	var b bytes.Buffer
	if err := ownTokenizer(f).WriteJSON(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"format": "attnlab-bpe", "version": 1, "pretokenizer": "gocode-v1", "vocab_size": 259,
"merges": [[104, 105], [256, 33]], "special_tokens": [{"id": 258, "content": "<|endoftext|>"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := tok.WriteJSON(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ReadJSON(&out)
		if err != nil {
			t.Fatalf("reading the file written for an accepted input: %v", err)
		}
		if !slices.Equal(again.Merges(), tok.Merges()) || !slices.Equal(again.Specials(), tok.Specials()) {
			t.Fatal("write and read changed the tokenizer")
		}
	})
}
