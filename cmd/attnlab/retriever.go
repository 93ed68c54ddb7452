package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/retrieve"
)

var retrieverCmd = register(&command{
	name:  "retriever",
	usage: "data [-src DIR] [-out DIR] | eval -data FILE.jsonl [-systems LIST]",
	short: "code search: build the query–code dataset from Go source, evaluate retrievers",
	// long is completed in init with the flags of both subcommands.
	long: `Retriever builds and evaluates code search, in two steps.

"retriever data" reads Go source (by default $(go env GOROOT)/src, non-test
files, testdata and vendor skipped) and pairs each documented function or
method with its doc comment: the query is the comment's first paragraph
without the leading name ("Foo returns…" → "returns…"), the document is the
declaration and body without the comment. Build-tag variants and code
duplicated up to white space are dropped. Pairs are split by package, 80/10/10
by a hash of the package path, and written as OUT/train.jsonl, OUT/val.jsonl
and OUT/test.jsonl: one {"id","query","code","package","file","line"} object
a line. It prints what it saw and kept.

"retriever eval" reads any JSONL file in that format and, for each system,
ranks all code documents of the file for each query (the gold is the query's
own document): MRR@10, Recall@1/5/10 and nDCG@10, then the CodeSearchNet
protocol (the gold among 999 distractors drawn with -seed): CSN MRR, and the
time of one top-10 query. Systems: bm25 (Okapi BM25, k1 = 1.2, b = 0.75, over
the code-aware terms of retrieve.Terms).

Example: attnlab retriever data -out retr && attnlab retriever eval -data retr/test.jsonl`,
})

func init() {
	retrieverCmd.run = runRetriever
	var b strings.Builder
	b.WriteString(strings.Replace(retrieverCmd.long, "\n\nExample:", "\n\nFlags of data:\n%s\nFlags of eval:\n%s\nExample:", 1))
	defaults := func(fs *flag.FlagSet) string {
		var sb strings.Builder
		fs.SetOutput(&sb)
		fs.PrintDefaults()
		return sb.String()
	}
	dfs, _ := retrieverDataFlags()
	efs, _ := retrieverEvalFlags()
	retrieverCmd.long = fmt.Sprintf(b.String(), defaults(dfs), defaults(efs))
}

// retrieverSystems builds each evaluable system over the code documents.
var retrieverSystems = map[string]func(codes []string) retrieve.Ranker{
	"bm25": func(codes []string) retrieve.Ranker { return retrieve.NewBM25(codes) },
}

func runRetriever(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"missing subcommand: data or eval"}
	}
	switch args[0] {
	case "data":
		return runRetrieverData(args[1:], stdout)
	case "eval":
		return runRetrieverEval(args[1:], stdout)
	}
	return usageError{fmt.Sprintf("unknown subcommand %q: want data or eval", args[0])}
}

type retrieverDataOpts struct {
	src, out string
	opt      retrieve.Options
}

func retrieverDataFlags() (*flag.FlagSet, *retrieverDataOpts) {
	o := &retrieverDataOpts{}
	fs := flag.NewFlagSet("retriever data", flag.ContinueOnError)
	fs.StringVar(&o.src, "src", "", "folder of Go source (default: $(go env GOROOT)/src)")
	fs.StringVar(&o.out, "out", "retriever-data", "output folder for train.jsonl, val.jsonl and test.jsonl")
	fs.Float64Var(&o.opt.ValFrac, "val-frac", 0.1, "fraction of the package hash range for validation")
	fs.Float64Var(&o.opt.TestFrac, "test-frac", 0.1, "fraction of the package hash range for test")
	fs.IntVar(&o.opt.MinWords, "min-words", 3, "shortest query kept, in words")
	return fs, o
}

type retrieverEvalOpts struct {
	data, systems string
	eval          retrieve.EvalOptions
}

func retrieverEvalFlags() (*flag.FlagSet, *retrieverEvalOpts) {
	o := &retrieverEvalOpts{}
	fs := flag.NewFlagSet("retriever eval", flag.ContinueOnError)
	fs.StringVar(&o.data, "data", "", "JSONL file of query–code pairs (required)")
	fs.StringVar(&o.systems, "systems", "bm25", "comma-separated systems to evaluate: "+strings.Join(systemNames(), ", "))
	fs.IntVar(&o.eval.Candidates, "candidates", 1000, "CodeSearchNet candidate set: the gold and candidates−1 distractors")
	fs.Uint64Var(&o.eval.Seed, "seed", 1, "seed of the distractor draw")
	fs.IntVar(&o.eval.Workers, "workers", 0, "queries evaluated in parallel (0: GOMAXPROCS); 1 for undisturbed timings")
	return fs, o
}

func systemNames() []string {
	var names []string
	for n := range retrieverSystems {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parseSub parses the flags of a subcommand. It returns errHelpShown after
// -h (the usage is printed), and a usageError for bad flags or arguments.
func parseSub(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(retrieverCmd.flags.Output())
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

var errHelpShown = errors.New("help shown")

func runRetrieverData(args []string, stdout io.Writer) error {
	fs, o := retrieverDataFlags()
	if err := parseSub(fs, args); err != nil {
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
	if o.opt.ValFrac < 0 || o.opt.TestFrac < 0 || o.opt.ValFrac+o.opt.TestFrac >= 1 {
		return usageError{fmt.Sprintf("-val-frac %g, -test-frac %g: want >= 0 with a sum below 1", o.opt.ValFrac, o.opt.TestFrac)}
	}
	if o.opt.MinWords < 1 {
		return usageError{fmt.Sprintf("-min-words %d: want >= 1", o.opt.MinWords)}
	}
	src := o.src
	if src == "" {
		src = filepath.Join(goRoot(), "src")
	}
	start := time.Now()
	train, val, test, st, err := retrieve.BuildDataset(src, o.opt)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var written []string
	for i, ps := range [][]retrieve.Pair{train, val, test} {
		path := filepath.Join(o.out, retrieve.SplitNames[i]+".jsonl")
		if err := retrieve.WriteJSONL(path, ps); err != nil {
			return err
		}
		written = append(written, path)
	}

	fmt.Fprintf(stdout, "source %s: %d .go files read, %d generated and %d unparsable skipped (%.1fs)\n",
		src, st.Files, st.Generated, st.Unparsable, time.Since(start).Seconds())
	for _, row := range []struct {
		n    int
		what string
	}{
		{st.Funcs, "functions and methods with a body (init excluded)"},
		{st.Documented, "with a doc comment"},
		{st.NoQuery, fmt.Sprintf("dropped: no query left (only the name, Deprecated, < %d words)", o.opt.MinWords)},
		{st.Variants, "dropped: build-tag variant of an earlier declaration"},
		{st.Duplicates, "dropped: code identical to an earlier pair's"},
		{st.Kept, "kept"},
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
	return nil
}

func runRetrieverEval(args []string, stdout io.Writer) error {
	fs, o := retrieverEvalFlags()
	if err := parseSub(fs, args); err != nil {
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
	if o.data == "" {
		return usageError{"-data is required"}
	}
	var systems []string
	for s := range strings.SplitSeq(o.systems, ",") {
		s = strings.TrimSpace(s)
		if _, ok := retrieverSystems[s]; !ok {
			return usageError{fmt.Sprintf("-systems: unknown system %q (known: %s)", s, strings.Join(systemNames(), ", "))}
		}
		if !slices.Contains(systems, s) {
			systems = append(systems, s)
		}
	}
	if o.eval.Candidates < 2 {
		return usageError{fmt.Sprintf("-candidates %d: want >= 2", o.eval.Candidates)}
	}
	if o.eval.Workers < 0 {
		return usageError{fmt.Sprintf("-workers %d: want >= 0", o.eval.Workers)}
	}

	pairs, err := retrieve.ReadJSONL(o.data)
	if err != nil {
		return err
	}
	if len(pairs) == 0 {
		return fmt.Errorf("%s holds no pairs", o.data)
	}
	queries := make([]string, len(pairs))
	codes := make([]string, len(pairs))
	pkgs := map[string]bool{}
	for i, p := range pairs {
		queries[i], codes[i] = p.Query, p.Code
		pkgs[p.Package] = true
	}
	workers := o.eval.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	fmt.Fprintf(stdout, "%s: %d queries over %d code documents from %d packages; CSN candidates %d, seed %d; workers %d\n",
		o.data, len(pairs), len(codes), len(pkgs), min(o.eval.Candidates, len(codes)), o.eval.Seed, workers)

	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "system\tMRR@10\tR@1\tR@5\tR@10\tnDCG@10\tCSN MRR\tindex\tquery mean\tp50\tp95\t\n")
	for _, name := range systems {
		start := time.Now()
		r := retrieverSystems[name](codes)
		build := time.Since(start)
		m := retrieve.Evaluate(r, queries, len(codes), o.eval)
		fmt.Fprintf(w, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\t%s\t\n", name,
			m.MRR10, m.Recall1, m.Recall5, m.Recall10, m.NDCG10, m.CSNMRR,
			roundDuration(build), roundDuration(m.RankMean), roundDuration(m.RankP50), roundDuration(m.RankP95))
	}
	return w.Flush()
}

// roundDuration keeps three significant digits.
func roundDuration(d time.Duration) time.Duration {
	for r := time.Duration(1); ; r *= 10 {
		if d < 1000*r {
			return d.Round(r)
		}
	}
}

// goRoot returns the GOROOT that the go command reports, or the one this
// binary was built with when there is no go command.
func goRoot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	return runtime.GOROOT()
}
