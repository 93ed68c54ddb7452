package retrieve

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"ReadFile", []string{"readfile", "read", "file"}},
		{"HTTPServer", []string{"httpserver", "http", "server"}},
		{"parseURL2", []string{"parseurl2", "parse", "url"}}, // "2" is one character: dropped
		{"ServeHTTP", []string{"servehttp", "serve", "http"}},
		{"snake_case_name", []string{"snake", "case", "name"}}, // underscores separate words
		{"utf8.DecodeRune", []string{"utf8", "utf", "decoderune", "decode", "rune"}},
		{"int64 sha256", []string{"int64", "int", "64", "sha256", "sha", "256"}},
		{"IDs of the TLSState", []string{"ids", "tlsstate", "tls", "state"}},
		{"URLsForHost", []string{"urlsforhost", "urls", "host"}}, // "IDs"/"URLs": a plural s closes the acronym; "for" is a stop term
		{"returns the number of bytes", []string{"returns", "number", "bytes"}},
		{"reports whether x is not empty", []string{"reports", "whether", "not", "empty"}},
		{"func (b *Buffer) Len() int { return len(b.buf) }", []string{"buffer", "len", "int", "len", "buf"}},
		{"for i := range m { if v, ok := m[k]; ok { return v } }", []string{"range", "ok", "ok"}},
		{"x, y, i, 0", nil},
		{"Größe zählen", []string{"größe", "zählen"}},
		{"0x7fff", []string{"0x7fff", "fff"}}, // 0|x|7|fff: the single characters go
		{"", nil},
	} {
		if got := Terms(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func ExampleTerms() {
	fmt.Println(Terms("NewHTTPClient returns a client_config for parseURL2"))
	// Output: [newhttpclient new http client returns client config parseurl2 parse url]
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"entries": "entry", "matches": "match", "indexes": "index", "processes": "process", "types": "type",
		"flags": "flag", "bytes": "byte", "status": "status", "class": "class", "analysis": "analysis",
		"bus": "bus", "its": "its", "timing": "timing", "used": "used", "boxes": "box", "keys": "key",
	} {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
	if got := StemTerms("ReadEntries of the Flags"); strings.Join(got, " ") != "readentry read entry flag" {
		t.Errorf("StemTerms = %q", got)
	}
}
