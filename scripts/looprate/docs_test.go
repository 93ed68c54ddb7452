package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/internal/docblock"
	"github.com/attnlab/attnlab/internal/vec"
)

var update = flag.Bool("update", false, "rewrite the loop-rate tables of docs/model.md")

const (
	loopBegin = "<!-- loop rates: go test ./scripts/looprate -run DocsLoopRates -update -->\n"
	loopEnd   = "<!-- end of loop rates -->"
)

// TestDocsLoopRates measures the loop rates of docs/model.md again, with
// the shipped language model on prompts cut from the held-out packages of
// the Go installation's standard library (as the training recipe holds
// them out), and compares them with the page's tables: they are what the
// measurement prints, to the digit. The prompts are the text of the
// installation's files, so a different Go release (another text) or
// another SIMD path (other roundings, other greedy choices) skips the
// comparison, naming what differs; -update rewrites the tables.
func TestDocsLoopRates(t *testing.T) {
	if testing.Short() {
		t.Skip("a few minutes of generation: skipped with -short")
	}
	root := corpus.GoRoot()
	sv, err := corpus.TakeSurvey(context.Background(), corpus.SurveyOptions{Std: true, GoRoot: root, MaxFileKB: 1024, Frac: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	h := sha256.New()
	for _, d := range sv.HeldDocs {
		files = append(files, d.File)
		data, err := os.ReadFile(d.File)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, d.File)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	sum := fmt.Sprintf("%x", h.Sum(nil))[:16]
	header := fmt.Sprintf("The shipped model on prompts from the %d held-out standard-library files of %s (their text's sha256 begins %s), on the %s path:\n",
		len(files), runtime.Version(), sum, vec.Path())

	blk, err := docblock.Find(filepath.Join("..", "..", "docs", "model.md"), loopBegin, loopEnd)
	if err != nil {
		t.Fatal(err)
	}
	page := blk.Text()
	if !*update {
		if was, _, _ := strings.Cut(page, "\n"); was+"\n" != header {
			t.Skipf("the tables were measured on other prompts or another path; -update measures them here\n page: %s\n here: %s", was, strings.TrimSuffix(header, "\n"))
		}
	}
	all := options{files: files, prompts: 96, n: 96, context: 30, maxPrompt: 256, batch: 16,
		penalties: []float64{1, 1.1, 1.2, 1.3}, ngrams: []int{8, 12}}
	defaults := all
	defaults.prompts, defaults.penalties, defaults.ngrams = 192, []float64{1.1}, []int{8}
	defaults.keep = regexp.MustCompile(`^(greedy|sampled), penalty 1.1(, no-repeat-ngram 8)?$`)
	var b strings.Builder
	b.WriteString(header)
	for _, m := range []struct {
		o     options
		title string
	}{
		{all, "96 prompts (`go run ./scripts/looprate -files heldout.txt -root / -prompts 96 -n 96 -penalties 1,1.1,1.2,1.3 -ngrams 8,12 -markdown`)"},
		{defaults, "192 prompts, the old default against the new (`-prompts 192 -n 96 -penalties 1.1 -ngrams 8 -only '^(greedy|sampled), penalty 1.1(, no-repeat-ngram 8)?$'`)"},
	} {
		res, err := measure(t.Context(), m.o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n%s:\n\n%s", m.title, res.markdown())
	}
	if *update {
		if err := blk.Replace(b.String()); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := b.String(); got != page {
		t.Errorf("docs/model.md's loop rates are not what the measurement prints (go test ./scripts/looprate -run DocsLoopRates -update rewrites them):\n--- page\n%s--- measured\n%s", page, got)
	}
}
