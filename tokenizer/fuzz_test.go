package tokenizer

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
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
	// a small tokenizer trained here, not ownTokenizer: training 1000
	// merges under the fuzzer's coverage instrumentation takes the worker
	// a minute before its first input
	docs := ownSource(f)[:2]
	for i, d := range docs {
		docs[i] = d[:min(len(d), 4000)]
	}
	small, err := Train(docs, NumBytes+40, Options{Specials: []string{EndOfText, "<|pad|>"}})
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if err := small.WriteJSON(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"format": "attnlab-bpe", "version": 1, "pretokenizer": "gocode-v1", "vocab_size": 259,
"merges": [[104, 105], [256, 33]], "special_tokens": [{"id": 258, "content": "<|endoftext|>"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "tokenizer: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line starting with \"tokenizer: \"", msg)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v of a malformed file is not a *FormatError", err)
			}
			if fe.Field != "" && !strings.Contains(fe.Msg, fe.Field) && !strings.Contains(fe.Msg, "merge ") && !strings.Contains(fe.Msg, "special token ") {
				t.Fatalf("error %q does not name its field %q", fe.Error(), fe.Field)
			}
			return
		}
		if tok.VocabSize() != NumBytes+len(tok.Merges())+len(tok.Specials()) {
			t.Fatalf("an accepted file gives vocabulary %d, with %d merges and %d special tokens", tok.VocabSize(), len(tok.Merges()), len(tok.Specials()))
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

// zeros is an endless stream of zero bytes, like /dev/zero.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestReadJSONBounded: ReadJSON stops one byte past its limit, so a
// stream that does not end is an error naming the limit, not a read until
// memory runs out.
func TestReadJSONBounded(t *testing.T) {
	z := &zeros{}
	_, err := readJSON(z, 1<<20)
	if err == nil || err.Error() != "tokenizer: file is larger than 1048576 bytes" {
		t.Errorf("readJSON of an endless stream: %v", err)
	}
	if z.n > 1<<20+1 {
		t.Errorf("read %d bytes of an endless stream, limit %d", z.n, 1<<20)
	}
	var b bytes.Buffer
	if err := ownTokenizer(t).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	n := int64(b.Len())
	if _, err := readJSON(bytes.NewReader(b.Bytes()), n); err != nil {
		t.Errorf("a file of exactly the limit: %v", err)
	}
	if _, err := readJSON(io.MultiReader(&b, strings.NewReader(" ")), n); err == nil {
		t.Error("a file one byte past the limit was read")
	}
}
