package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// statsLine is the summary search -src writes to stderr.
var statsLine = regexp.MustCompile(`(\d+) functions in (\d+) files \((\d+) from the cache, (\d+) embedded; (\d+) generated and (\d+) unreadable skipped\)`)

// TestSearchSrc indexes a folder with a trained encoder and reranker: a
// second search of the unchanged tree embeds nothing, an edited file is
// embedded again alone, another encoder never reads the first's cache.
func TestSearchSrc(t *testing.T) {
	data := retrieverData(t)
	run := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, run)
	if code, stdout, stderr := attnlab(t, "retriever", "rerank", "-data", data, "-out", run, "-quiet", "-steps", "2", "-warmup", "1", "-groups", "2",
		"-candidates", "3", "-max-query", "16", "-max-code", "32"); code != 0 {
		t.Fatalf("rerank: exit %d\n%s%s", code, stdout, stderr)
	}
	src, cache := retrieverTree(t), t.TempDir()
	search := func(model string, extra ...string) (stats []string, out string) {
		t.Helper()
		args := append([]string{"search", "-src", src, "-model", model, "-cache", cache, "-k", "3"}, extra...)
		code, stdout, stderr := attnlab(t, append(args, "widgets", "of", "the", "store")...)
		m := statsLine.FindStringSubmatch(stderr)
		if code != 0 || m == nil {
			t.Fatalf("search: exit %d\n%s%s", code, stdout, stderr)
		}
		return m[1:], stdout
	}
	model := filepath.Join(run, "model")
	first, out1 := search(model, "-reranker", filepath.Join(run, "reranker"))
	if first[0] != "80" || first[1] != "40" || first[2] != "0" || first[3] != "80" {
		t.Errorf("first search: %v, want 80 functions in 40 files, all embedded", first)
	}
	if rows := strings.Split(strings.TrimSpace(out1), "\n"); len(rows) != 3 || !strings.Contains(rows[0], "p.go:") {
		t.Errorf("results:\n%s", out1)
	}
	second, out2 := search(model, "-reranker", filepath.Join(run, "reranker"))
	if second[2] != "40" || second[3] != "0" || out2 != out1 {
		t.Errorf("second search: %v (want 40 from the cache, 0 embedded) and the same results", second)
	}
	// an edited file: that file alone is embedded again
	p := filepath.Join(src, "pkg07", "p.go")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, append(b, []byte("\n// Extra returns one.\nfunc Extra() int { return 1 }\n")...), 0o644)
	third, out3 := search(model)
	if third[0] != "81" || third[2] != "39" || third[3] != "3" {
		t.Errorf("after an edit: %v, want 81 functions, 39 files from the cache, 3 embedded", third)
	}
	// without a reranker the scores are the fused scores that ordered the hits
	var last float64
	for i, row := range strings.Split(strings.TrimSpace(out3), "\n") {
		f := strings.Fields(row)
		score, err := strconv.ParseFloat(f[1], 64)
		if err != nil || i > 0 && score > last {
			t.Errorf("hit %d scores %q after %g: want non-increasing scores\n%s", i+1, f[1], last, out3)
		}
		last = score
	}
	// an unreadable file is skipped and counted
	os.WriteFile(filepath.Join(src, "pkg08", "broken.go"), []byte("package pkg08\nfunc ("), 0o644)
	if fourth, _ := search(model); fourth[5] != "1" {
		t.Errorf("a broken file: %v, want 1 unreadable", fourth)
	}
	// another encoder: its own cache
	other := filepath.Join(t.TempDir(), "other")
	trainRetriever(t, data, other, "-seed", "9")
	if fifth, _ := search(filepath.Join(other, "model")); fifth[2] != "0" {
		t.Errorf("another encoder read %s files from the first's cache", fifth[2])
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"search", "-src", t.TempDir(), "-model", model, "query"}, 1, "no Go file"},
		{[]string{"search", "-src", src, "-model", model, "!!!"}, 1, "nothing the encoder reads"},
	} {
		code, _, stderr := attnlab(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}
