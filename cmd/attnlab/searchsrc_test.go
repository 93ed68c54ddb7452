package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// statsLine is the summary search -src writes to stderr.
var statsLine = regexp.MustCompile(`(\d+) functions \(\d+ with a doc comment; \d+ build-tag twins grouped\) in (\d+) files \((\d+) from the cache, (\d+) embedded; (\d+) generated \w+ and (\d+) unreadable skipped\)`)

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
	// -json: paths relative to the folder the command runs in, which
	// open; the reranker's score on the rows it re-scored
	code, stdout, stderr := attnlab(t, "search", "-src", src, "-model", model, "-cache", cache, "-k", "7", "-reranker", filepath.Join(run, "reranker"), "-json", "widgets", "of", "the", "store")
	if code != 0 {
		t.Fatalf("search -json: exit %d\n%s%s", code, stdout, stderr)
	}
	var res struct {
		Query string
		Hits  []struct {
			Path   string
			Line   int
			Func   string
			Score  float64
			Scores struct {
				BM25, Dense, First float64
				Rerank             *float64
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("search -json: %v\n%s", err, stdout)
	}
	if res.Query != "widgets of the store" || len(res.Hits) != 7 {
		t.Fatalf("search -json: query %q, %d hits", res.Query, len(res.Hits))
	}
	for i, h := range res.Hits {
		if filepath.IsAbs(h.Path) || !strings.HasSuffix(h.Path, "p.go") || h.Line < 1 || !strings.HasPrefix(h.Func, "Count") && !strings.HasPrefix(h.Func, "Reset") {
			t.Errorf("hit %d: %+v: want a relative path to a p.go, a line and a function name", i+1, h)
		}
		if _, err := os.Stat(h.Path); err != nil {
			t.Errorf("hit %d: %s does not open from the folder the command ran in: %v", i+1, h.Path, err)
		}
		if (h.Scores.Rerank != nil) != (i < 5) {
			t.Errorf("hit %d: reranker score %v; want one on the 5 rows re-scored (-depth 5) alone", i+1, h.Scores.Rerank)
		}
	}
	if rows := strings.Split(strings.TrimSpace(out1), "\n"); !strings.HasPrefix(strings.Fields(rows[0])[2], res.Hits[0].Path+":") {
		t.Errorf("the table's first path %q is not -json's %q", strings.Fields(rows[0])[2], res.Hits[0].Path)
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
