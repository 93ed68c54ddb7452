package docs

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/docblock"
)

var update = flag.Bool("update", false, "rewrite the generated blocks this package's tests own")

const (
	heldOutBegin = "<!-- held-out table: scripts/lm-eval-readme.sh CORPUS -->\n"
	heldOutEnd   = "<!-- end of held-out table -->"
)

// lmEval is what attnlab lm-eval -json prints, the fields the table shows.
type lmEval struct {
	Files        int     `json:"files"`
	Bytes        int     `json:"bytes"`
	Tokens       int     `json:"tokens"`
	BitsPerByte  float64 `json:"bits_per_byte"`
	NatsPerToken float64 `json:"nats_per_token"`
	Compressors  []struct {
		Tool        string  `json:"tool"`
		BitsPerByte float64 `json:"bits_per_byte"`
		PerFile     float64 `json:"per_file_bits_per_byte"`
	} `json:"compressors"`
}

func (e *lmEval) tool(t *testing.T, name string) (concat, perFile float64) {
	for _, c := range e.Compressors {
		if c.Tool == name {
			return c.BitsPerByte, c.PerFile
		}
	}
	t.Fatalf("the lm-eval result has no %s row: install it and run scripts/lm-eval-readme.sh again", name)
	return 0, 0
}

// heldOutTable renders the block of docs/model.md from the two lm-eval
// results, the standard library's and the Debian packages'.
func heldOutTable(t *testing.T, std, deb *lmEval) string {
	var b strings.Builder
	b.WriteString("| held-out set | files | bytes | tokens | attnlab bits/byte | nats/token | gzip -9 | zstd -19 | xz -9e | xz -9e per file |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		e    *lmEval
	}{{"standard library (packages held out)", std}, {"Debian corpus (packages held out)", deb}} {
		gz, _ := r.e.tool(t, "gzip -9")
		zs, _ := r.e.tool(t, "zstd -19")
		xz, xzFile := r.e.tool(t, "xz -9e")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%.3f** | %.3f | %.3f | %.3f | %.3f | %.3f |\n", r.name,
			thousands(r.e.Files), thousands(r.e.Bytes), thousands(r.e.Tokens), r.e.BitsPerByte, r.e.NatsPerToken, gz, zs, xz, xzFile)
	}
	xzStd, xzStdFile := std.tool(t, "xz -9e")
	xzDeb, _ := deb.tool(t, "xz -9e")
	below := "Below"
	if std.BitsPerByte >= xzStd || deb.BitsPerByte >= xzDeb {
		below = "Against"
	}
	fmt.Fprintf(&b, "\n%s `xz -9e` on both sets, on its strongest footing (the whole set as one\nstream): %.2f× its bits on the standard library, %.2f× on the Debian\npackages. File by file, xz -9e needs %.2f bits per byte on the\nstandard-library set.\n",
		below, std.BitsPerByte/xzStd, deb.BitsPerByte/xzDeb, xzStdFile)
	return b.String()
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestHeldOutTable: docs/model.md's held-out table of the shipped language
// model is the rendering of the two lm-eval results that
// scripts/lm-eval-readme.sh keeps beside it (docs/lm-eval-std.json and
// docs/lm-eval-deb.json); -update renders it.
func TestHeldOutTable(t *testing.T) {
	var res [2]lmEval
	for i, name := range []string{"lm-eval-std.json", "lm-eval-deb.json"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &res[i]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res[i].Files == 0 || res[i].Bytes == 0 || res[i].Tokens == 0 {
			t.Fatalf("%s measured nothing: %+v", name, res[i])
		}
	}
	syncBlock(t, "model.md", heldOutBegin, heldOutEnd, heldOutTable(t, &res[0], &res[1]),
		"the rendering of lm-eval-std.json and lm-eval-deb.json (go test ./docs -run HeldOutTable -update)")
}

// syncBlock rewrites the block of page between begin and end with want
// under -update, and otherwise fails unless the block is want, which is
// what.
func syncBlock(t *testing.T, page, begin, end, want, what string) {
	t.Helper()
	blk, err := docblock.Find(page, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if blk.Text() != want {
		t.Errorf("docs/%s: the block after %q is not %s:\n--- page\n%s--- rendered\n%s", page, strings.TrimSpace(begin), what, blk.Text(), want)
	}
}
