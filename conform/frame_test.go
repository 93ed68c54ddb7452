package conform

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/attnlab/attnlab/safetensors"
)

// frame returns data as one frame: its length, then data.
func frame(data []byte) []byte {
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(data)))
	return append(hdr[:], data...)
}

// u64 is x in 8 little-endian bytes.
func u64(x uint64) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	return b[:]
}

// TestReadFrameError: a read that fails before any byte is that error,
// not the adapter closing its output.
func TestReadFrameError(t *testing.T) {
	broken := errors.New("input/output error")
	_, err := readFrame(bufio.NewReader(iotest.ErrReader(broken)))
	if !errors.Is(err, broken) || errors.Is(err, errClosed) || !strings.Contains(err.Error(), "reading its output") {
		t.Errorf("%v, want reading its output: %v", err, broken)
	}
}

// TestReadFrame: each way output can fail to be a frame is named, at the
// bounds of each check; a good frame reads back.
func TestReadFrame(t *testing.T) {
	good := safetensors.New()
	good.Metadata = map[string]string{"op": "attention"}
	data, err := good.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("\x02\x00\x00\x00\x00\x00\x00\x00{}") // the smallest safetensors file: 10 bytes
	for _, c := range []struct {
		name string
		in   []byte
		want string // "" : reads; "closed": errClosed
	}{
		{"good", frame(data), ""},
		{"smallest", frame(small), ""},
		{"nothing", nil, "closed"},
		{"part of a length", []byte{1, 2, 3}, `closed its output after "\x01\x02\x03", within a frame's length`},
		{"length 9", append(u64(9), small...), "a frame length of 9 bytes"},
		{"length 2^31+1", append(u64(1<<31+1), small...), "a frame length of 2147483649 bytes"},
		{"text", []byte("loading weights\n"), `it wrote "loading weights\n"`},
		{"cut in the header length", append(u64(10), 2, 0, 0), `the output ended within the frame): it wrote "\n\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00"`},
		{"header length 1", append(u64(10), append(u64(1), '{', '}')...), "a safetensors header of 1 bytes in a frame of 10"},
		{"header longer than the frame", append(u64(10), append(u64(3), '{', '}')...), "a safetensors header of 3 bytes in a frame of 10"},
		{"no JSON", append(u64(10), append(u64(2), '[', ']')...), "no JSON header where the safetensors header begins"},
		{"cut short", append(u64(12), append(u64(4), '{', '}')...), "a frame cut short"},
		{"not safetensors", frame([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{x")), "the answer is not a safetensors file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := readFrame(bufio.NewReader(bytes.NewReader(c.in)))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want a frame", err)
			case c.want == "" && f == nil:
				t.Error("no frame")
			case c.want == "closed" && !errors.Is(err, errClosed):
				t.Errorf("error %v, want errClosed", err)
			case c.want != "" && c.want != "closed" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
	// the largest frame length passes the length check: it is the data
	// that is missing
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(append(u64(1<<31), append(u64(2), '{', '}')...)))); err == nil ||
		!strings.Contains(err.Error(), "a frame cut short") {
		t.Errorf("a frame of 2^31 bytes cut short: %v", err)
	}
}

// TestMalformedQuotesWhatWaits: the error quotes what was read and up to
// 64 bytes in all of what already waits.
func TestMalformedQuotesWhatWaits(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(strings.Repeat("x", 100)))
	r.Peek(100)
	err := malformed(r, []byte("ab"), "why")
	if !strings.Contains(err.Error(), `it wrote "ab`+strings.Repeat("x", 62)+`"`) {
		t.Errorf("%v", err)
	}
	r = bufio.NewReader(strings.NewReader(""))
	if err := malformed(r, []byte("ab"), "why"); !strings.Contains(err.Error(), `(why): it wrote "ab";`) {
		t.Errorf("%v", err)
	}
}

// TestTail keeps the last 4096 bytes written, whatever the sizes of the
// writes.
func TestTail(t *testing.T) {
	var tl tail
	tl.Write(bytes.Repeat([]byte("a"), 4096))
	if got := tl.String(); len(got) != 4096 {
		t.Errorf("4096 bytes kept as %d", len(got))
	}
	tl.Write([]byte("bc"))
	if got := tl.String(); len(got) != 4096 || !strings.HasSuffix(got, "abc") {
		t.Errorf("after 4098 bytes: %d kept, ending %q", len(got), got[len(got)-3:])
	}
	if n, err := tl.Write([]byte("xyz")); n != 3 || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
}

// TestSplitWordsEscapes: the quoting rules one by one.
func TestSplitWordsEscapes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`a\tb`, []string{`a\tb`}},
		{"a\tb\nc  d", []string{"a", "b", "c", "d"}},
		{`"a\\b"`, []string{`a\b`}},
		{`"a\xb"`, []string{`a\xb`}},
		{`"x\"" y`, []string{`x"`, "y"}},
		{`"a\\"`, []string{`a\`}},
		{`'' x`, []string{"", "x"}},
		{`""`, []string{""}},
		{`a'b c'd`, []string{"ab cd"}},
		{`  `, nil},
	} {
		got, err := splitWords(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`"abc`, `"ab\"`, `'x`, `"ab\`} { // the last ends in a backslash, with nothing to escape
		if _, err := splitWords(bad); err == nil {
			t.Errorf("splitWords(%q): no error", bad)
		}
	}
}

// TestAbbrev: a text of 80 bytes is shown whole, a longer one cut to 80
// with an ellipsis.
func TestAbbrev(t *testing.T) {
	s80 := strings.Repeat("x", 80)
	if got := abbrev(s80); got != s80 {
		t.Errorf("80 bytes: %q", got)
	}
	if got := abbrev(s80 + "y"); got != strings.Repeat("x", 77)+"..." {
		t.Errorf("81 bytes: %q", got)
	}
}
