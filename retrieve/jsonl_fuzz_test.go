package retrieve

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadJSONL: the JSONL reader never panics; an error is one line
// naming the file (and the line, for a malformed one); what it accepts
// has unique ids and non-empty id, query and code, and writes back
// (WriteJSONL's encoding) to a file that reads the same.
func FuzzReadJSONL(f *testing.F) {
	good := `{"id":"a","query":"q","code":"c"}`
	var b bytes.Buffer
	pairs := []Pair{
		{ID: "p.F", Query: "returns x", Code: "func F() int {\n\treturn x < 1 && y > 2\n}", Package: "p", File: "p/f.go", Line: 3},
		{ID: "p.T.M", Query: "héllo, 世界", Code: "func (T) M() {}", Package: ".", File: "m.go", Line: 1},
	}
	if err := encodePairs(pairs)(&b); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		b.String(), good, good + "\n" + good + "\n", "\n" + good + "\n\n" + `{"id":"b","query":"q2","code":"c2","extra":1}`,
		good + "\n{not json\n", `{"id":"b","query":"q"}`, `{"id":"b","query":"","code":"c"}`,
		`{"id":"b","query":"q","code":"c","line":"x"}`, `["a","q","c"]`, "", "\r\n\r\n", `{"ID":"x","Query":"q","Code":"c","id":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readJSONLWithin(bytes.NewReader(data), "in.jsonl", 256, 4096)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "retrieve: in.jsonl") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line naming the file", msg)
			}
			var fe *FormatError
			if errors.As(err, &fe) && (fe.Line < 1 || fe.Line > bytes.Count(data, []byte("\n"))+1) {
				t.Fatalf("error %v names line %d of a file of %d lines", err, fe.Line, bytes.Count(data, []byte("\n"))+1)
			}
			if len(data) > 4096 && !strings.Contains(err.Error(), "larger than 4096 bytes") && fe == nil {
				t.Fatalf("a %d-byte file: %v", len(data), err)
			}
			return
		}
		if len(data) > 4096 {
			t.Fatalf("a %d-byte file was read with a limit of 4096", len(data))
		}
		seen := map[string]bool{}
		for _, p := range got {
			if p.ID == "" || p.Query == "" || p.Code == "" || seen[p.ID] {
				t.Fatalf("accepted pair %+v: empty field or repeated id", p)
			}
			seen[p.ID] = true
		}
		var out bytes.Buffer
		if err := encodePairs(got)(&out); err != nil {
			t.Fatal(err)
		}
		again, err := readJSONL(&out, "out.jsonl")
		if err != nil {
			t.Fatalf("reading the file written for an accepted one: %v", err)
		}
		if len(got) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("write and read changed the pairs: %+v, then %+v", got, again)
		}
	})
}

// endlessZeros is a stream of zero bytes that does not end, like
// /dev/zero, counting what is read.
type endlessZeros struct{ n int64 }

func (z *endlessZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestReadJSONLBounded: a line beyond the limit and a file beyond the
// limit are errors naming the file, after reading about the limit, so
// /dev/zero (one line that never ends) or endless blank lines stop.
func TestReadJSONLBounded(t *testing.T) {
	z := &endlessZeros{}
	_, err := readJSONLWithin(z, "zero.jsonl", 1000, 1<<30)
	if err == nil || err.Error() != "retrieve: zero.jsonl:1: line longer than 1000 bytes" {
		t.Errorf("an endless line: %v", err)
	}
	if z.n > 2<<20 {
		t.Errorf("read %d bytes of an endless line, limit 1000", z.n)
	}
	blank := strings.NewReader(strings.Repeat("\n", 5000))
	if _, err := readJSONLWithin(blank, "blank.jsonl", 1000, 4999); err == nil || err.Error() != "retrieve: blank.jsonl: larger than 4999 bytes" {
		t.Errorf("5000 blank lines, limit 4999: %v", err)
	}
	// lines of up to len(good)+1 bytes, the '\n' not counted
	good := `{"id":"a","query":"q","code":"` + strings.Repeat("c", 100) + `"}`
	limit := len(good) + 1
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{good, true}, {good + "\n", true}, {good + "\r\n", true}, {" " + good, true}, {" " + good + "\n", true},
		{" " + good + " ", false}, {good + "\n  " + good, false}, {good + "  \n", false},
	} {
		_, err := readJSONLWithin(strings.NewReader(c.text), "d.jsonl", limit, 1<<20)
		switch {
		case c.ok && err != nil:
			t.Errorf("%q, line limit %d: %v", c.text, limit, err)
		case !c.ok && (err == nil || !strings.HasSuffix(err.Error(), ": line longer than "+strconv.Itoa(limit)+" bytes")):
			t.Errorf("%q, line limit %d: %v, want a line too long", c.text, limit, err)
		}
	}
}
