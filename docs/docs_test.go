// Package docs holds attnlab's documentation; its tests keep the README a
// front page whose numbers are those of the pages that own them, and every
// link of the README and of these pages pointing somewhere.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxREADME is the most the README may weigh: a front page of a few
// screens. What does not fit goes into a page of docs/.
const maxREADME = 12 << 10

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestREADMEIsAFrontPage: the README stays under maxREADME bytes.
func TestREADMEIsAFrontPage(t *testing.T) {
	if n := len(read(t, "../README.md")); n > maxREADME {
		t.Errorf("README.md is %d bytes, more than the %d of a front page: move a section into docs/", n, maxREADME)
	}
}

// TestREADMEHasCIsTestCommand: the test command the README gives is the
// one CI runs (.ci/run), word for word.
func TestREADMEHasCIsTestCommand(t *testing.T) {
	var cmd string
	for _, line := range strings.Split(read(t, "../.ci/run"), "\n") {
		if strings.HasPrefix(line, "go test ") && strings.HasSuffix(line, " ./...") {
			cmd = line
			break
		}
	}
	if cmd == "" {
		t.Fatal(".ci/run has no line go test … ./...")
	}
	for _, line := range strings.Split(read(t, "../README.md"), "\n") {
		if c, _, _ := strings.Cut(line, "#"); strings.TrimSpace(c) == cmd {
			return
		}
	}
	t.Errorf("README.md does not give CI's test command %q on a line of its own", cmd)
}

// pages are the files whose links are checked: every Markdown file of
// the repository (node_modules and hidden folders left out).
func pages(t *testing.T) []string {
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```[^\n]*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#* *$`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose is a Markdown file without its fenced code blocks, where a "]("
// or a "#" is not Markdown's.
func prose(md string) string { return fence.ReplaceAllString(md, "") }

// anchors are the ids GitHub gives the headings of a Markdown file: the
// text lower-cased, links reduced to their text, every character but
// letters, digits, spaces, hyphens and underscores dropped, spaces made
// hyphens, and -1, -2, … after a repeated one.
func anchors(md string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose(md), -1) {
		text := mdLink.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// TestLinks: every relative link of the README, of docs/ and of every
// other Markdown file names a file that exists, and a #fragment a heading
// of the Markdown file it points to.
func TestLinks(t *testing.T) {
	for _, page := range pages(t) {
		md := read(t, page)
		text := inlineCode.ReplaceAllString(prose(md), "") // code spans too
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(read(t, path))[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
}

// block is the text of a generated block of a page: between the line
// "<!-- NAME: …" and "<!-- end of NAME -->".
func block(t *testing.T, page, name string) string {
	t.Helper()
	s := read(t, page)
	i := strings.Index(s, "<!-- "+name+":")
	j := strings.Index(s, "<!-- end of "+name+" -->")
	if i < 0 || j < i {
		t.Fatalf("%s has no %s block", page, name)
	}
	_, body, _ := strings.Cut(s[i:j], "\n")
	return body
}

// table is the rows of the first Markdown table of text, each as its
// trimmed cells; the header is row 0, the separator left out.
func table(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// cell is the cell of the row whose first cell is row, in the column
// whose header is col.
func cell(t *testing.T, rows [][]string, row, col string) string {
	t.Helper()
	c := -1
	for i, h := range rows[0] {
		if h == col {
			c = i
		}
	}
	for _, r := range rows[1:] {
		if r[0] == row && c >= 0 && c < len(r) {
			return strings.Trim(r[c], "*")
		}
	}
	t.Fatalf("no cell %q of row %q in the table headed %q", col, row, rows[0])
	return ""
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// seconds hides the lab's run time, the one number that changes between
// runs.
var seconds = regexp.MustCompile(`operations; [0-9.]+ s\.`)

// TestHeadlineNumbers: each number of the README's "In numbers" and of its
// lab step is the one of the page that owns it, where a test or a script
// writes or checks it.
func TestHeadlineNumbers(t *testing.T) {
	readme := seconds.ReplaceAllString(read(t, "../README.md"), "operations; ")
	want := func(owner, s string) {
		t.Helper()
		if !strings.Contains(readme, s) {
			t.Errorf("README.md does not say %q, as %s does", s, owner)
		}
	}

	// the lab: docs/lab.md's block, which go test ./lab checks
	lab := block(t, "lab.md", "lab numbers")
	m := regexp.MustCompile(`SUMMARY: (\d+)/(\d+) checks pass on the correct implementations; (\d+)/(\d+) faults caught \((\d+) invisible to finite differences\); (\d+) operations`).FindStringSubmatch(lab)
	if m == nil {
		t.Fatalf("docs/lab.md's lab block has no summary:\n%s", lab)
	}
	want("docs/lab.md", fmt.Sprintf("**Lab**: %s/%s checks pass and %s/%s faults are caught (%s invisible to finite differences) over %s operations", m[1], m[2], m[3], m[4], m[5], m[6]))
	_, run, _ := strings.Cut(lab, "$ go run ./cmd/attnlab lab\n")
	run, _, _ = strings.Cut(run, "```")
	want("docs/lab.md", "```text\n$ attnlab lab\n"+seconds.ReplaceAllString(run, "operations; ")+"```")

	// against PyTorch: docs/lab.md's block, which go test ./oracle writes
	cases, worst, worstText := 0, 0.0, ""
	for _, r := range table(block(t, "lab.md", "pytorch table"))[1:] {
		n, err := strconv.Atoi(r[1])
		if err != nil {
			t.Fatal(err)
		}
		cases += n
		if w := atof(t, r[2]); w > worst {
			worst, worstText = w, r[2]
		}
	}
	want("docs/lab.md", fmt.Sprintf("in float64 autograd, %d cases: worst error %s", cases, worstText))

	// conform: docs/conform.md's compact table, which go test ./adapters writes
	cards := table(block(t, "conform.md", "conform cards"))[1:]
	conformant := 0
	for _, r := range cards {
		if r[len(r)-1] == "conformant" {
			conformant++
		}
	}
	want("docs/conform.md", fmt.Sprintf("%d implementations carded by `attnlab conform`, %d conformant", len(cards), conformant))

	// the language model: docs/model.md's held-out table
	lm := read(t, "model.md")
	i := strings.Index(lm, "| held-out set |")
	if i < 0 {
		t.Fatal("docs/model.md has no held-out table")
	}
	held := table(lm[i:])
	bpb := func(set, col string) (string, float64) {
		s := cell(t, held, set, col)
		return s, atof(t, s)
	}
	stdLM, stdLMv := bpb("standard library (packages held out)", "attnlab bits/byte")
	stdXZ, stdXZv := bpb("standard library (packages held out)", "xz -9e")
	debLM, debLMv := bpb("Debian corpus (packages held out)", "attnlab bits/byte")
	debXZ, debXZv := bpb("Debian corpus (packages held out)", "xz -9e")
	want("docs/model.md", fmt.Sprintf("%s bits per byte where `xz -9e` needs %s (%.2f×) on the standard library, %s against %s (%.2f×) on Debian's",
		stdLM, stdXZ, stdLMv/stdXZv, debLM, debXZ, debLMv/debXZv))

	// retrieval: docs/retrieval.md's blocks, which scripts/retrieval-readme.sh writes
	pairs := table(block(t, "retrieval.md", "retrieval table"))
	dev := table(block(t, "retrieval.md", "developer queries table"))
	want("docs/retrieval.md", fmt.Sprintf("reranked hybrid search %s against BM25's %s (%s×)",
		cell(t, pairs, "hybrid+rerank+fused", "MRR@10"), cell(t, pairs, "bm25", "MRR@10"), cell(t, pairs, "hybrid+rerank+fused", "× BM25")))
	want("docs/retrieval.md", fmt.Sprintf("`search`'s default %s against BM25's %s on doc and code (%s×)",
		cell(t, dev, "hybrid", "MRR@10"), cell(t, dev, "bm25-doc+code", "MRR@10"), cell(t, dev, "hybrid", "× BM25 doc+code")))

	// speed: docs/kernels.md's block, which scripts/bench-readme.sh writes
	ratios := benchRatios(t, block(t, "kernels.md", "bench table"))
	span := func(group, col string) string {
		r := ratios[group][col]
		if len(r) == 0 {
			t.Fatalf("docs/kernels.md's bench table has no %s ratios of %s", col, group)
		}
		lo, hi := strconv.FormatFloat(slices.Min(r), 'f', 2, 64), strconv.FormatFloat(slices.Max(r), 'f', 2, 64)
		if lo == hi {
			return lo + "×"
		}
		return lo + "–" + hi + "×"
	}
	want("docs/kernels.md", fmt.Sprintf("attention forward+backward %s PyTorch; the forward (prefill) %s ggml's flash_attn_ext, %s ONNX Runtime; decoding a token %s PyTorch, %s ggml, %s ONNX Runtime; generation %s PyTorch",
		span("attention fwd+bwd", "PyTorch"), span("attention fwd", "ggml"), span("attention fwd", "onnxruntime"),
		span("decode", "PyTorch"), span("decode", "ggml"), span("decode", "onnxruntime"), span("generate", "PyTorch")))
}

// benchRatios reads attnlab bench's text tables: for each group, the
// ratios of each peer column (PyTorch, ggml, ggml f16 K/V, onnxruntime)
// over its rows. The tables are right-aligned, so a cell ends where its
// column's header ends.
func benchRatios(t *testing.T, text string) map[string]map[string][]float64 {
	t.Helper()
	out := map[string]map[string][]float64{}
	num := regexp.MustCompile(`^([0-9.]+)×`)
	var cols []string // the column each ratio belongs to, by header
	var ends []int    // where each header ends, in runes
	for _, line := range strings.Split(text, "\n") {
		r := []rune(line)
		if f := strings.Fields(line); len(f) > 2 && f[0] == "group" && f[1] == "case" {
			cols, ends = nil, nil
			// the headers, each ending at its column's right edge
			hdr := regexp.MustCompile(`\S+(?: \S+)*`)
			for _, m := range hdr.FindAllStringIndex(line, -1) {
				cols = append(cols, line[m[0]:m[1]])
				ends = append(ends, len([]rune(line[:m[1]])))
			}
			continue
		}
		if len(cols) == 0 || len(r) == 0 {
			continue
		}
		group := strings.TrimSpace(string(r[:min(ends[0], len(r))]))
		for i := 1; i < len(cols); i++ {
			if !strings.HasPrefix(cols[i], "ratio") || ends[i] > len(r) {
				continue
			}
			c := strings.TrimSpace(string(r[ends[i-1]:ends[i]]))
			m := num.FindStringSubmatch(c)
			if m == nil {
				continue
			}
			peer := cols[i-1]
			if out[group] == nil {
				out[group] = map[string][]float64{}
			}
			out[group][peer] = append(out[group][peer], atof(t, m[1]))
		}
	}
	return out
}

// TestRetrievalCounts: the pair count the search measurement of
// docs/retrieval.md states is the dataset block's (go test ./retrieve
// writes it).
func TestRetrievalCounts(t *testing.T) {
	m := regexp.MustCompile(`With every package in one split, [^,]*, ([0-9,]+) pairs`).FindStringSubmatch(strings.ReplaceAll(block(t, "retrieval.md", "retrieval data"), "\n", " "))
	if m == nil {
		t.Fatal("docs/retrieval.md's dataset block has no count of every package in one split")
	}
	if s := "over the whole standard library (" + m[1] + " functions"; !strings.Contains(strings.ReplaceAll(read(t, "retrieval.md"), "\n", " "), s) {
		t.Errorf("docs/retrieval.md does not say %q, as its dataset block counts", s)
	}
}
