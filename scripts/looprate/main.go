// Command looprate measures how often a language model's generations fall
// into a loop, under several sampling settings, on prompts cut from
// held-out files: the measurement behind attnlab generate's defaults.
//
// The held-out files are those the training recipe never trained on: the
// standard library's held-out packages, listed by
//
//	attnlab corpus stats -val-frac 0.1 -list-heldout heldout.txt -root /
//	go run ./scripts/looprate -files heldout.txt -root /
//
// A prompt is the text of a file up to and including the line of a
// top-level func declaration (at most -context lines of it, and its last
// -max-prompt tokens); the model continues it by -n tokens. A generation
// loops when a block of p tokens (1 <= p <= 64) repeats back to back at
// least three times and over at least 12 tokens (Loops). The table gives, per setting,
// the loop rate, the share of generated lines (of 8 characters or more,
// trimmed) that repeat an earlier generated line, the share of distinct
// 4-grams of tokens, and how often the first generated line is the file's
// own next line (trimmed): a loop guard must not cost that.
package main

import (
	"context"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/tokenizer"
)

// setting is one sampling setting under test.
type setting struct {
	name string
	s    model.Sampling
}

func main() {
	dir := flag.String("model", "", "language-model checkpoint (default: the shipped one)")
	list := flag.String("files", "", "the held-out files, one a line (attnlab corpus stats -list-heldout)")
	root := flag.String("root", "/", "the folder the paths of -files are relative to")
	nPrompts := flag.Int("prompts", 200, "prompts, spread evenly over the held-out files' func declarations")
	n := flag.Int("n", 128, "new tokens per generation")
	contextLines := flag.Int("context", 30, "lines of the file before the func line in a prompt, at most")
	maxPrompt := flag.Int("max-prompt", 256, "a prompt's last tokens kept, at most")
	batch := flag.Int("batch", 16, "prompts generated at once")
	penaltyList := flag.String("penalties", "1,1.1,1.2,1.3", "the repetition penalties to measure, comma-separated")
	ngramList := flag.String("ngrams", "8,12,16", "the no-repeat-ngram sizes to measure (with penalty 1 and 1.1), comma-separated")
	only := flag.String("only", "", "measure only the settings whose name matches this regular expression")
	markdown := flag.Bool("markdown", false, "print the table as docs/model.md shows it")
	flag.Parse()
	keep, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "looprate: -only: %v\n", err)
		os.Exit(2)
	}
	var penalties []float64
	for _, f := range strings.Split(*penaltyList, ",") {
		var p float64
		if _, err := fmt.Sscan(f, &p); err != nil || p < 1 {
			fmt.Fprintf(os.Stderr, "looprate: -penalties: %q is not a penalty >= 1\n", f)
			os.Exit(2)
		}
		penalties = append(penalties, p)
	}
	var ngrams []int
	for _, f := range strings.Split(*ngramList, ",") {
		var g int
		if _, err := fmt.Sscan(f, &g); err != nil || g < 2 {
			fmt.Fprintf(os.Stderr, "looprate: -ngrams: %q is not a size >= 2\n", f)
			os.Exit(2)
		}
		ngrams = append(ngrams, g)
	}
	if *list == "" {
		fmt.Fprintln(os.Stderr, "usage: looprate -files heldout.txt [-root /] [-model DIR]")
		os.Exit(2)
	}
	files, err := readList(*list, *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "looprate:", err)
		os.Exit(1)
	}
	o := options{model: *dir, files: files, prompts: *nPrompts, n: *n, context: *contextLines,
		maxPrompt: *maxPrompt, batch: *batch, penalties: penalties, ngrams: ngrams, keep: keep}
	if !*markdown {
		o.progress = os.Stdout
	}
	res, err := measure(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "looprate:", err)
		os.Exit(1)
	}
	if *markdown {
		fmt.Print(res.markdown())
	}
}

// options are one measurement's: the model, the held-out files and the
// settings (the flags of the command).
type options struct {
	model              string // "" the shipped language model
	files              []string
	prompts, n         int
	context, maxPrompt int
	batch              int
	penalties          []float64
	ngrams             []int
	keep               *regexp.Regexp // nil: every setting
	progress           io.Writer      // the text table, a row as each setting ends; nil none
}

// result is one measurement: a row per setting, in the order measured.
type result struct {
	prompts int
	rows    []row
}

// row is one setting's measures, each a share in [0, 1].
type row struct {
	name                                           string
	loops, repeated, distinct, right, parses, secs float64
}

// markdown is the table as docs/model.md shows it: the settings and their
// loop rate, repeated lines, distinct 4-grams and closes and parses.
func (r *result) markdown() string {
	var b strings.Builder
	b.WriteString("| setting | loop rate | repeated lines | distinct 4-grams | closes and parses |\n|---|---|---|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s%s | %s | %.3f | %.3f | %.3f |\n", x.name, note(x.name), rate(x.loops), x.repeated, x.distinct, x.parses)
	}
	return b.String()
}

// note names the settings attnlab generate used by default: before the
// n-gram ban (penalty 1.1 alone) and now (penalty 1.1 and an 8-gram ban).
func note(name string) string {
	switch {
	case strings.HasSuffix(name, ", penalty 1.1"):
		return " (the old default)"
	case strings.HasSuffix(name, ", penalty 1.1, no-repeat-ngram 8"):
		return " (the default)"
	}
	return ""
}

// rate prints an exact 0 as 0: a rate forbidden by construction.
func rate(x float64) string {
	if x == 0 {
		return "0"
	}
	return fmt.Sprintf("%.3f", x)
}

// readList reads a list of files, one a line relative to root.
func readList(list, root string) ([]string, error) {
	data, err := os.ReadFile(list)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			files = append(files, filepath.Join(root, l))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s lists no file", list)
	}
	return files, nil
}

func measure(ctx context.Context, o options) (*result, error) {
	dir := o.model
	if dir == "" {
		d, err := models.Dir(models.LM)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	lm, err := model.LoadLM[float32](dir)
	if err != nil {
		return nil, err
	}
	texts, nexts, err := prompts(o.files, o.prompts, o.context)
	if err != nil {
		return nil, err
	}
	// token healing, as attnlab generate does: the prompt's last token is
	// taken back and the first new token must begin with its text
	ids, first, healed := make([][]int, len(texts)), make([][]int, len(texts)), make([]int, len(texts))
	for i, t := range texts {
		ids[i] = lm.Tok.Encode([]byte(t))
		if len(ids[i]) > o.maxPrompt {
			ids[i] = ids[i][len(ids[i])-o.maxPrompt:]
		}
		last := lm.Tok.Decode(ids[i][len(ids[i])-1:])
		ids[i], first[i], healed[i] = ids[i][:len(ids[i])-1], lm.Tok.Extending(last), len(last)
	}
	sampled := model.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1}
	with := func(s model.Sampling, penalty float64, ngram int) model.Sampling {
		s.RepetitionPenalty, s.RepetitionWindow, s.NoRepeatNGram = penalty, 64, ngram
		return s
	}
	var settings []setting
	for _, base := range []struct {
		name string
		s    model.Sampling
	}{{"greedy", model.Sampling{}}, {"sampled", sampled}} {
		for _, pen := range o.penalties {
			settings = append(settings, setting{fmt.Sprintf("%s, penalty %g", base.name, pen), with(base.s, pen, 0)})
		}
		for _, ng := range o.ngrams {
			settings = append(settings, setting{fmt.Sprintf("%s, penalty 1, no-repeat-ngram %d", base.name, ng), with(base.s, 1, ng)})
			settings = append(settings, setting{fmt.Sprintf("%s, penalty 1.1, no-repeat-ngram %d", base.name, ng), with(base.s, 1.1, ng)})
		}
	}
	eos := lm.Tok.Special(tokenizer.EndOfText)
	var w *tabwriter.Writer
	if o.progress != nil {
		fmt.Fprintf(o.progress, "model %s; %d prompts; %d new tokens each (stopping at end-of-text); repetition window 64\n", dir, len(ids), o.n)
		w = tabwriter.NewWriter(o.progress, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "setting\tloop rate\trepeated lines\tdistinct 4-grams\tfirst line right\tcloses and parses\tseconds\t\n")
	}
	res := &result{prompts: len(ids)}
	for _, st := range settings {
		if o.keep != nil && !o.keep.MatchString(st.name) {
			continue
		}
		start := time.Now()
		var outs [][]int
		for b := 0; b < len(ids); b += o.batch {
			e := min(b+o.batch, len(ids))
			out, err := lm.Generate(ctx, lm.Params, ids[b:e], model.GenerateOptions{MaxNew: o.n, EOS: eos, Sampling: st.s, First: first[b:e]}, nil)
			if err != nil {
				return nil, err
			}
			outs = append(outs, out...)
		}
		var looped, lines, repeated, grams, distinct, right, parses int
		for i, out := range outs {
			if Loops(out) {
				looped++
			}
			text := string(lm.Tok.Decode(out))[healed[i]:]
			l, r := repeatedLines(text)
			lines, repeated = lines+l, repeated+r
			g, d := distinct4(out)
			grams, distinct = grams+g, distinct+d
			if first, _, _ := strings.Cut(text, "\n"); strings.TrimSpace(first) == strings.TrimSpace(nexts[i]) {
				right++
			}
			if ClosesAndParses(texts[i], text) {
				parses++
			}
		}
		x := row{st.name, frac(looped, len(outs)), frac(repeated, lines), frac(distinct, grams), frac(right, len(outs)), frac(parses, len(outs)), time.Since(start).Seconds()}
		res.rows = append(res.rows, x)
		if w != nil {
			fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t\n", x.name, x.loops, x.repeated, x.distinct, x.right, x.parses, x.secs)
			w.Flush()
		}
	}
	return res, nil
}

// ClosesAndParses reports whether the function whose declaration line
// ends prompt is closed by a "}" line in text (its continuation) and the
// declaration, up to that line, parses as Go.
func ClosesAndParses(prompt, text string) bool {
	decl := prompt[strings.LastIndex(strings.TrimSuffix(prompt, "\n"), "\n")+1:]
	end := strings.Index(text, "\n}\n")
	if end < 0 {
		if !strings.HasSuffix(text, "\n}") {
			return false
		}
		end = len(text) - 2
	}
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n\n"+decl+text[:end+2]+"\n", 0)
	return err == nil
}

func frac(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Loops reports whether a block of p tokens (1 <= p <= 64) repeats back
// to back at least three times and over at least 12 tokens: "}}}}…" of
// one token twelve times, "Config." three times, a line over and over.
func Loops(tokens []int) bool {
	for p := 1; p <= 64; p++ {
		reps := max(3, (12+p-1)/p)
		for i := 0; i+reps*p <= len(tokens); i++ {
			k := 1
			for k < reps && slices.Equal(tokens[i:i+p], tokens[i+k*p:i+(k+1)*p]) {
				k++
			}
			if k == reps {
				return true
			}
		}
	}
	return false
}

// repeatedLines counts the generated lines of 8 characters or more
// (trimmed) and those that repeat an earlier one. The last line, which the
// token budget may have cut, is left out.
func repeatedLines(text string) (lines, repeated int) {
	all := strings.Split(text, "\n")
	seen := map[string]bool{}
	for _, l := range all[:len(all)-1] {
		l = strings.TrimSpace(l)
		if len(l) < 8 {
			continue
		}
		lines++
		if seen[l] {
			repeated++
		}
		seen[l] = true
	}
	return lines, repeated
}

// distinct4 counts the 4-grams of tokens and the distinct ones.
func distinct4(tokens []int) (grams, distinct int) {
	seen := map[[4]int]bool{}
	for i := 0; i+4 <= len(tokens); i++ {
		g := [4]int(tokens[i : i+4])
		grams++
		if !seen[g] {
			distinct++
			seen[g] = true
		}
	}
	return grams, distinct
}

// prompts cuts the prompts from files: for every top-level func line of
// every file (in order), the text up to and including it, at most
// contextLines lines before it; n of them, spread evenly. It returns each
// prompt and the file's line after it.
func prompts(files []string, n, contextLines int) (texts, nexts []string, err error) {
	var allTexts, allNexts []string
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		lines := strings.SplitAfter(string(data), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "func ") && strings.HasSuffix(l, "{\n") && i+1 < len(lines) {
				allTexts = append(allTexts, strings.Join(lines[max(0, i-contextLines):i+1], ""))
				allNexts = append(allNexts, strings.TrimSuffix(lines[i+1], "\n"))
			}
		}
	}
	if len(allTexts) == 0 {
		return nil, nil, fmt.Errorf("no func declaration in the %d files", len(files))
	}
	step := max(1, len(allTexts)/n)
	for i := 0; i < len(allTexts) && len(texts) < n; i += step {
		texts, nexts = append(texts, allTexts[i]), append(nexts, allNexts[i])
	}
	return texts, nexts, nil
}
