package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/retrieve"
)

var retrieverCmd = register(&command{
	name:  "retriever",
	usage: "data | train | rerank | translate | eval | diagnose  [flags]",
	short: "code search: build the query–code dataset, train a dense retriever and a reranker, evaluate retrievers",
	long: `Retriever builds, trains and evaluates code search, in four steps:
"retriever data" makes (doc comment → function) pairs from Go source,
"retriever train" trains the dual encoder, "retriever rerank" trains the
cross-encoder reranker on top of it, and "retriever eval" measures BM25, the
dual encoder, their fusion and the reranked systems on any file of pairs.

Example: attnlab retriever data -out retr && attnlab retriever train -data retr -out run && attnlab retriever rerank -data retr -out run && attnlab retriever eval -data retr/test.jsonl -model run/model -reranker run/reranker`,
	subs: []*command{retrieverDataCmd, retrieverTrainCmd, retrieverRerankCmd, retrieverTranslateCmd, retrieverEvalCmd, retrieverDiagnoseCmd},
})

var retrieverDataCmd = &command{
	name:  "data",
	usage: "[-src DIR] [-corpus DIR] [-out DIR] [-force] [-val-frac F] [-test-frac F] [-min-words N]",
	short: "pair each documented Go function with its doc comment, split by package",
	long: `Retriever data reads Go source (by default $(go env GOROOT)/src, non-test
files, testdata and vendor skipped) and pairs each documented function or
method with its doc comment: the query is the comment's first paragraph
without the leading name ("Foo returns…" → "returns…"), the document is the
declaration and body without the comment. Build-tag variants and code
duplicated up to white space are dropped. Pairs are split by package, by a
hash of the package path: -test-frac of the range to test, -val-frac to
validation, the rest to training (-val-frac 0 -test-frac 0 puts every pair
in train.jsonl; -test-frac 1 every pair in test.jsonl). -corpus adds the
Debian packages of a corpus folder (attnlab corpus fetch), read after -src:
their pairs are split by import path the same way, code already seen is
dropped, and a pair whose query is that of a validation or test pair of
-src is not trained on. It writes
OUT/train.jsonl, OUT/val.jsonl and OUT/test.jsonl, one
{"id","query","code","package","file","line"} object a line, and prints
what it saw and kept; a split that asked for pairs and got none is a
warning. An OUT that is not empty is refused unless -force.

Example: attnlab retriever data -out retr`,
	define: func(fs *flag.FlagSet) runFunc {
		o := retrieve.DefaultOptions()
		src := fs.String("src", "", "folder of Go source (default: $(go env GOROOT)/src)")
		corpusDir := fs.String("corpus", "", "folder of Debian Go packages (attnlab corpus fetch) read after -src")
		out := fs.String("out", "retriever-data", "output folder for train.jsonl, val.jsonl and test.jsonl")
		force := fs.Bool("force", false, "replace the files of an OUT that is not empty")
		fs.Float64Var(&o.ValFrac, "val-frac", o.ValFrac, "fraction of the package hash range for validation")
		fs.Float64Var(&o.TestFrac, "test-frac", o.TestFrac, "fraction of the package hash range for test")
		fs.IntVar(&o.MinWords, "min-words", o.MinWords, "shortest query kept, in words")
		heldout := fs.String("heldout", "", "also write the Go files of the validation and test packages into this folder, as folders to search: HELDOUT/val and HELDOUT/test, the standard library under std/ and each Debian package under debian/NAME/")
		quiet := fs.Bool("quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if !(o.ValFrac >= 0 && o.TestFrac >= 0 && o.ValFrac+o.TestFrac <= 1) || o.MinWords < 1 {
				return usagef("-val-frac %g, -test-frac %g, -min-words %d: want fractions >= 0 with a sum of at most 1, min-words >= 1", o.ValFrac, o.TestFrac, o.MinWords)
			}
			if *out == "" {
				return usagef(`-out "": want the folder of the JSONL files`)
			}
			if *src == "" {
				*src = filepath.Join(corpus.GoRoot(), "src")
			}
			if *corpusDir != "" {
				deb, err := corpus.Debian(*corpusDir)
				if err != nil {
					return err
				}
				for _, d := range deb {
					o.More = append(o.More, retrieve.Source{Name: d.Name, Dir: d.Dir})
				}
			}
			if err := runRetrieverData(ctx, *src, *out, *force, o, *quiet, stdout); err != nil {
				return err
			}
			if *heldout == "" {
				return nil
			}
			st, err := retrieve.WriteHeldOut(ctx, *heldout, append([]retrieve.Source{{Dir: *src}}, o.More...), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "held-out folders: %s (%d files of %d packages), %s (%d files of %d packages)\n",
				filepath.Join(*heldout, "val"), st.Files[1], st.Packages[1], filepath.Join(*heldout, "test"), st.Files[2], st.Packages[2])
			return nil
		}
	},
}

func runRetrieverData(ctx context.Context, src, out string, force bool, o retrieve.Options, quiet bool, stdout io.Writer) error {
	inputs := []string{src}
	for _, m := range o.More {
		inputs = append(inputs, m.Dir)
	}
	claim, err := output.Target{Path: out, Flag: "-out", Replace: force, Inputs: inputs}.ClaimDir()
	if err != nil {
		return err
	}
	defer claim.Release()
	if err := writable("-out", out, true); err != nil {
		return err
	}
	start := time.Now()
	var bar *progress
	o.Progress = func(done, total int) {
		if bar == nil {
			bar = newProgress(total, "reading Go files", quiet)
		}
		bar.set(done, "")
	}
	train, val, test, st, err := retrieve.BuildDataset(ctx, src, o)
	if err != nil {
		return err
	}
	written, err := retrieve.WriteSplits(out, train, val, test)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "source %s: %d .go files read, %d generated and %d unparsable skipped (%.1fs)\n",
		src, st.Files, st.Generated, st.Unparsable, time.Since(start).Seconds())
	for _, row := range []struct {
		n    int
		what string
	}{
		{st.Funcs, "functions and methods with a body (init excluded)"},
		{st.Documented, "with a doc comment"},
		{st.NoQuery, fmt.Sprintf("dropped: no query left (only the name, Deprecated, < %d words)", o.MinWords)},
		{st.Variants, "dropped: build-tag variant of an earlier declaration"},
		{st.Duplicates, "dropped: code identical to an earlier pair's"},
		{st.HeldQuery, "dropped from training: the query of a validation or test pair of -src"},
		{st.Kept, "kept"},
		{st.More, "of them from -corpus"},
	} {
		fmt.Fprintf(stdout, "%7d  %s\n", row.n, row.what)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "split\tpairs\tpackages\t\n")
	for i, s := range st.Split {
		fmt.Fprintf(w, "%s\t%d\t%d\t\n", retrieve.SplitNames[i], s.Pairs, s.Packages)
	}
	w.Flush()
	fmt.Fprintf(stdout, "mean query %.1f words; mean code %.1f lines, %.0f bytes\n", st.QueryWords, st.CodeLines, st.CodeBytes)
	fmt.Fprintf(stdout, "pairs whose query text another pair of the same split repeats: %d\n", st.SharedQuery)
	fmt.Fprintf(stdout, "wrote %s\n", strings.Join(written, ", "))
	for i, frac := range []float64{1 - o.ValFrac - o.TestFrac, o.ValFrac, o.TestFrac} {
		if frac > 0 && st.Split[i].Pairs == 0 {
			warnf("%s.jsonl holds no pairs although its share of the packages is %g: too few packages (%d) for the split", retrieve.SplitNames[i], frac, st.Packages())
		}
	}
	return nil
}

// warnf prints a warning on stderr: something degenerate the user must
// know, which does not stop the command.
func warnf(format string, args ...any) {
	fmt.Fprintf(progressOut, "warning: "+format+"\n", args...)
}
