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

	"github.com/schollz/progressbar/v3"

	"github.com/attnlab/attnlab/dense"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/rerank"
	"github.com/attnlab/attnlab/retrieve"
)

var retrieverCmd = register(&command{
	name:  "retriever",
	usage: "data [-src DIR] [-out DIR] | train -data DIR [-out DIR] | rerank -data DIR [-out DIR] | eval -data FILE.jsonl [-model DIR] [-reranker DIR] [-systems LIST]",
	short: "code search: build the query–code dataset from Go source, train a dense retriever and a reranker, evaluate retrievers",
	// long is completed in init with the flags of the subcommands.
	long: `Retriever builds, trains and evaluates code search, in four steps.

"retriever data" reads Go source (by default $(go env GOROOT)/src, non-test
files, testdata and vendor skipped) and pairs each documented function or
method with its doc comment: the query is the comment's first paragraph
without the leading name ("Foo returns…" → "returns…"), the document is the
declaration and body without the comment. Build-tag variants and code
duplicated up to white space are dropped. Pairs are split by package, 80/10/10
by a hash of the package path, and written as OUT/train.jsonl, OUT/val.jsonl
and OUT/test.jsonl: one {"id","query","code","package","file","line"} object
a line. It prints what it saw and kept.

"retriever train" trains a dense dual encoder on DATA/train.jsonl: the
encoder reads the code-aware terms of queries and code (-text terms, the
units BM25 sees: identifiers split and lower-cased) or the raw text, cut by
a BPE tokenizer learned on the split's code and queries; one transformer tower
shared by queries and code (token embedding, pre-norm blocks with
bidirectional attention and padding masks, final RMSNorm, mean pooling over
real tokens, unit length); the InfoNCE loss over in-batch negatives plus
BM25-mined hard negatives (mined once; candidates with the gold's code, or
scoring within -mine-margin of the gold, are dropped as likely false
negatives; in-batch copies of a positive and positives of identical queries
are masked), both directions (query→code and code→query) unless
-symmetric=false, at a fixed temperature unless -learn-tau; AdamW with
warmup and cosine decay. The defaults train in about 12 minutes on two
cores. It shows a progress bar, writes OUT/curves.csv (every 50
steps and at the end), the checkpoint OUT/model (config.json,
model.safetensors, tokenizer.json, dense.json) and OUT/index, the
embeddings of -index-data (DATA/test.jsonl by default) for "attnlab
search", and reports MRR@10 of the model and of BM25 on DATA/val.jsonl.

"retriever rerank" trains a cross-encoder reranker: the sequence "query
SEP code" goes through the transformer of the dual encoder of -model
(OUT/model by default), which it starts from, with bidirectional attention;
the token vectors are averaged and a score head (zero at the start) gives
the pair's relevance. Each step takes -groups training queries, each with
its own code and -candidates−1 hard negatives drawn from those mined once
from BM25 and from the dual encoder (the gold's code, other pairs with the
same query, and BM25 candidates within -mine-margin of the gold dropped);
the loss is each group's softmax cross-entropy against its positive. It
writes OUT/reranker and OUT/rerank-curves.csv and reports the validation
MRR@10 of bm25, dense, hybrid and hybrid+rerank.

"retriever eval" reads any JSONL file in that format and, for each system,
ranks all code documents of the file for each query (the gold is the query's
own document): MRR@10, Recall@1/5/10 and nDCG@10, then the CodeSearchNet
protocol (the gold among 999 distractors drawn with -seed): CSN MRR, the
time to build the system's index, and the time of one top-10 query. Systems:
bm25 (Okapi BM25, k1 = 1.2, b = 0.75, over the code-aware terms of
retrieve.Terms); dense (the encoder of -model, exhaustive cosine search over
the embedded code); hybrid (reciprocal rank fusion, k = 60, of the top 100 of
bm25 and of dense); bm25+rerank, dense+rerank and hybrid+rerank (the
cross-encoder of -reranker re-scores the top -rerank-depth candidates of
the first stage; in the CodeSearchNet protocol, the top of the candidate
set). -write-index saves the dense index of the file.

Example: attnlab retriever data -out retr && attnlab retriever train -data retr -out run && attnlab retriever rerank -data retr -out run && attnlab retriever eval -data retr/test.jsonl -model run/model -reranker run/reranker`,
})

func init() {
	retrieverCmd.run = runRetriever
	for _, first := range []string{"bm25", "dense", "hybrid"} {
		retrieverSystems[first+"+rerank"] = reranked(first)
	}
	var b strings.Builder
	b.WriteString(strings.Replace(retrieverCmd.long, "\n\nExample:", "\n\nFlags of data:\n%s\nFlags of train:\n%s\nFlags of rerank:\n%s\nFlags of eval:\n%s\nExample:", 1))
	defaults := func(fs *flag.FlagSet) string {
		var sb strings.Builder
		fs.SetOutput(&sb)
		fs.PrintDefaults()
		return sb.String()
	}
	dfs, _ := retrieverDataFlags()
	tfs, _ := retrieverTrainFlags()
	rfs, _ := retrieverRerankFlags()
	efs, _ := retrieverEvalFlags()
	retrieverCmd.long = fmt.Sprintf(b.String(), defaults(dfs), defaults(tfs), defaults(rfs), defaults(efs))
}

// retrieverEnv is what the systems of an evaluation share: the corpus, and
// the indexes built so far (hybrid reuses those of bm25 and dense).
type retrieverEnv struct {
	pairs []retrieve.Pair
	codes []string
	model *dense.Model // nil without -model

	reranker *rerank.Model // nil without -reranker
	depth    int           // candidates the reranker re-scores
	fuse     bool          // fuse the first stage's and the reranker's ranks

	bm25                *retrieve.BM25
	index               *dense.Index
	bm25Time, denseTime time.Duration
}

func (e *retrieverEnv) getBM25() *retrieve.BM25 {
	if e.bm25 == nil {
		start := time.Now()
		e.bm25 = retrieve.NewBM25(e.codes)
		e.bm25Time = time.Since(start)
	}
	return e.bm25
}

func (e *retrieverEnv) getDense() (*dense.Index, error) {
	if e.model == nil {
		return nil, usageError{"systems dense and hybrid need -model"}
	}
	if e.index == nil {
		start := time.Now()
		e.index = dense.NewIndex(e.model, e.pairs, barFunc(newBar(len(e.pairs), "embedding the code", false)))
		e.denseTime = time.Since(start)
	}
	return e.index, nil
}

// retrieverSystems builds each evaluable system over the code documents and
// returns it with the time its indexes took to build.
var retrieverSystems = map[string]func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error){
	"bm25": func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error) {
		r := e.getBM25()
		return r, e.bm25Time, nil
	},
	"dense": func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error) {
		x, err := e.getDense()
		if err != nil {
			return nil, 0, err
		}
		return x.Ranker(), e.denseTime, nil
	},
	"hybrid": func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error) {
		x, err := e.getDense()
		if err != nil {
			return nil, 0, err
		}
		bm := e.getBM25()
		return retrieve.Fusion{Systems: []retrieve.Ranker{bm, x.Ranker()}}, e.bm25Time + e.denseTime, nil
	},
}

// reranked returns the system that re-scores the top candidates of first
// with the cross-encoder.
func reranked(first string) func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error) {
	return func(e *retrieverEnv) (retrieve.Ranker, time.Duration, error) {
		if e.reranker == nil {
			return nil, 0, usageError{"systems with +rerank need -reranker"}
		}
		r, build, err := retrieverSystems[first](e)
		if err != nil {
			return nil, 0, err
		}
		rr := rerank.NewRanker(e.reranker, r, e.codes, e.depth)
		rr.Fuse = e.fuse
		return rr, build, nil
	}
}

func runRetriever(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"missing subcommand: data, train, rerank or eval"}
	}
	switch args[0] {
	case "data":
		return runRetrieverData(args[1:], stdout)
	case "train":
		return runRetrieverTrain(ctx, args[1:], stdout)
	case "eval":
		return runRetrieverEval(args[1:], stdout)
	case "rerank":
		return runRetrieverRerank(ctx, args[1:], stdout)
	}
	return usageError{fmt.Sprintf("unknown subcommand %q: want data, train, rerank or eval", args[0])}
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
	data, systems, model, writeIndex string
	reranker                         string
	depth                            int
	fuse                             bool
	eval                             retrieve.EvalOptions
}

func retrieverEvalFlags() (*flag.FlagSet, *retrieverEvalOpts) {
	o := &retrieverEvalOpts{}
	fs := flag.NewFlagSet("retriever eval", flag.ContinueOnError)
	fs.StringVar(&o.data, "data", "", "JSONL file of query–code pairs (required)")
	fs.StringVar(&o.systems, "systems", "", "comma-separated systems to evaluate: "+strings.Join(systemNames(), ", ")+" (default: bm25, and dense and hybrid with -model)")
	fs.StringVar(&o.model, "model", "", "dense encoder: a checkpoint folder (retriever train's OUT/model) or an index folder")
	fs.StringVar(&o.writeIndex, "write-index", "", "save the dense index of the file's code to this folder (needs -model)")
	fs.StringVar(&o.reranker, "reranker", "", "cross-encoder checkpoint (retriever rerank's OUT/reranker) for the systems with +rerank")
	fs.IntVar(&o.depth, "rerank-depth", 20, "first-stage candidates the reranker re-scores per query")
	fs.BoolVar(&o.fuse, "rerank-fuse", false, "order the re-scored candidates by reciprocal rank fusion of their first-stage and reranker ranks")
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
	var bar *progressbar.ProgressBar
	o.opt.Progress = func(done, total int) {
		if bar == nil {
			bar = newBar(total, "reading Go files", false)
		}
		if bar != nil {
			bar.Set(done)
		}
	}
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
	if o.systems == "" {
		o.systems = "bm25"
		if o.model != "" {
			o.systems = "bm25,dense,hybrid"
		}
		if o.reranker != "" {
			o.systems += ",bm25+rerank"
			if o.model != "" {
				o.systems += ",dense+rerank,hybrid+rerank"
			}
		}
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
	if o.model == "" && (o.writeIndex != "" || slices.ContainsFunc(systems, func(s string) bool { return strings.HasPrefix(s, "dense") || strings.HasPrefix(s, "hybrid") })) {
		return usageError{"systems dense and hybrid, and -write-index, need -model"}
	}
	if o.reranker == "" && slices.ContainsFunc(systems, func(s string) bool { return strings.HasSuffix(s, "+rerank") }) {
		return usageError{"systems with +rerank need -reranker"}
	}
	if o.depth < 1 {
		return usageError{fmt.Sprintf("-rerank-depth %d: want >= 1", o.depth)}
	}

	pairs, err := retrieve.ReadJSONL(o.data)
	if err != nil {
		return err
	}
	if len(pairs) == 0 {
		return fmt.Errorf("%s holds no pairs", o.data)
	}
	env := &retrieverEnv{pairs: pairs, depth: o.depth, fuse: o.fuse}
	if o.model != "" {
		if env.model, err = loadDenseModel(o.model); err != nil {
			return err
		}
	}
	if o.reranker != "" {
		if env.reranker, err = rerank.Load(o.reranker); err != nil {
			return err
		}
	}
	queries := make([]string, len(pairs))
	env.codes = make([]string, len(pairs))
	pkgs := map[string]bool{}
	for i, p := range pairs {
		queries[i], env.codes[i] = p.Query, p.Code
		pkgs[p.Package] = true
	}
	workers := o.eval.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	fmt.Fprintf(stdout, "%s: %d queries over %d code documents from %d packages; CSN candidates %d, seed %d; workers %d\n",
		o.data, len(pairs), len(env.codes), len(pkgs), min(o.eval.Candidates, len(env.codes)), o.eval.Seed, workers)

	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "system\tMRR@10\tR@1\tR@5\tR@10\tnDCG@10\tCSN MRR\tindex\tquery mean\tp50\tp95\t\n")
	for _, name := range systems {
		r, build, err := retrieverSystems[name](env)
		if err != nil {
			return err
		}
		m := retrieve.Evaluate(r, queries, len(env.codes), o.eval)
		fmt.Fprintf(w, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\t%s\t\n", name,
			m.MRR10, m.Recall1, m.Recall5, m.Recall10, m.NDCG10, m.CSNMRR,
			roundDuration(build), roundDuration(m.RankMean), roundDuration(m.RankP50), roundDuration(m.RankP95))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if o.writeIndex != "" {
		x, err := env.getDense()
		if err != nil {
			return err
		}
		if err := x.Save(o.writeIndex); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote the dense index of %d documents to %s\n", len(pairs), o.writeIndex)
	}
	return nil
}

// loadDenseModel reads a dense checkpoint folder, or the encoder of an index
// folder.
func loadDenseModel(dir string) (*dense.Model, error) {
	if _, err := os.Stat(filepath.Join(dir, dense.EncoderDir, dense.SettingsFile)); err == nil {
		dir = filepath.Join(dir, dense.EncoderDir)
	}
	return dense.Load(dir)
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

type retrieverTrainOpts struct {
	data, out, indexData   string
	text                   string
	vocab, dim, layers     int
	heads, kvHeads, ffn    int
	maxQuery, maxCode      int
	batch, hard, mineDepth int
	mineMargin, tau        float64
	learnTau, symmetric    bool
	chunk                  int
	optimFlags
	std   float64
	seed  uint64
	quiet bool
}

func retrieverTrainFlags() (*flag.FlagSet, *retrieverTrainOpts) {
	o := &retrieverTrainOpts{}
	fs := flag.NewFlagSet("retriever train", flag.ContinueOnError)
	fs.StringVar(&o.data, "data", "", "folder of train.jsonl, val.jsonl and test.jsonl, as retriever data writes it (required)")
	fs.StringVar(&o.out, "out", "retriever-run", "output folder: model, index, curves.csv")
	fs.StringVar(&o.indexData, "index-data", "", "comma-separated JSONL files whose code OUT/index holds (default DATA/test.jsonl)")
	fs.StringVar(&o.text, "text", dense.TextTerms, "what the encoder reads: terms (code-aware terms of retrieve.Terms, as BM25) or raw (the text as written)")
	fs.IntVar(&o.vocab, "vocab", 4096, "tokenizer vocabulary size")
	fs.IntVar(&o.dim, "dim", 128, "model width")
	fs.IntVar(&o.layers, "layers", 2, "transformer blocks")
	fs.IntVar(&o.heads, "heads", 4, "query heads")
	fs.IntVar(&o.kvHeads, "kv-heads", 4, "key/value heads")
	fs.IntVar(&o.ffn, "ffn", 344, "SwiGLU hidden width")
	fs.IntVar(&o.maxQuery, "max-query", 64, "query tokens kept")
	fs.IntVar(&o.maxCode, "max-code", 256, "code tokens kept")
	fs.IntVar(&o.batch, "batch", 64, "pairs per step: each query's in-batch negatives are the other B−1 positives")
	fs.IntVar(&o.hard, "hard-negatives", 1, "BM25-mined hard negatives per query and step")
	fs.IntVar(&o.mineDepth, "mine-depth", 20, "BM25 results examined per query when mining")
	fs.Float64Var(&o.mineMargin, "mine-margin", 0.05, "drop mined candidates scoring at least (1 − margin)·the gold's BM25 score (negative: keep all)")
	fs.Float64Var(&o.tau, "tau", 0.05, "temperature (the starting value with -learn-tau)")
	fs.BoolVar(&o.learnTau, "learn-tau", false, "learn the temperature (as log τ, kept ≥ 0.01)")
	fs.BoolVar(&o.symmetric, "symmetric", true, "add the code→query direction to the loss (-symmetric=false: queries→code only)")
	fs.IntVar(&o.chunk, "chunk", 0, "sequences whose activations are kept at once in the backward (GradCache): each sequence is encoded a second time, the gradients are the same bit for bit; 0: the whole step")
	o.register(fs, 800, 50, 1e-3, 1e-4)
	fs.Float64Var(&o.std, "init-std", 0.02, "standard deviation of the initial weights")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of initialisation and batch order")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	return fs, o
}

func runRetrieverTrain(ctx context.Context, args []string, stdout io.Writer) error {
	fs, o := retrieverTrainFlags()
	if err := parseSub(fs, args); err != nil {
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	}
	switch {
	case o.data == "":
		return usageError{"-data is required"}
	case o.steps < 1 || o.batch < 2 || o.hard < 0 || o.warmup < 0 || o.chunk < 0:
		return usageError{"-steps must be positive, -batch at least 2, -hard-negatives, -warmup and -chunk at least 0"}
	case o.maxQuery < 1 || o.maxCode < 1:
		return usageError{"-max-query and -max-code must be positive"}
	case !(o.tau > 0):
		return usageError{fmt.Sprintf("-tau %v: want > 0", o.tau)}
	case o.text != dense.TextTerms && o.text != dense.TextRaw:
		return usageError{fmt.Sprintf("-text %q: want %s or %s", o.text, dense.TextTerms, dense.TextRaw)}
	}
	cfg := model.Config{HiddenSize: o.dim, IntermediateSize: o.ffn, NumHiddenLayers: o.layers, NumAttentionHeads: o.heads,
		NumKeyValueHeads: o.kvHeads, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: o.vocab,
		MaxPositionEmbeddings: (max(o.maxQuery, o.maxCode) + 15) &^ 15, TieWordEmbeddings: true}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	start := time.Now()
	trainPairs, err := retrieve.ReadJSONL(filepath.Join(o.data, "train.jsonl"))
	if err != nil {
		return err
	}
	valPairs, err := retrieve.ReadJSONL(filepath.Join(o.data, "val.jsonl"))
	if err != nil {
		return err
	}
	indexFiles := []string{filepath.Join(o.data, "test.jsonl")}
	if o.indexData != "" {
		indexFiles = strings.Split(o.indexData, ",")
	}
	var indexPairs []retrieve.Pair
	for _, f := range indexFiles {
		ps, err := retrieve.ReadJSONL(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		indexPairs = append(indexPairs, ps...)
	}
	if len(trainPairs) < o.batch {
		return fmt.Errorf("%s: %d pairs, fewer than a batch of %d", filepath.Join(o.data, "train.jsonl"), len(trainPairs), o.batch)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	// Tokenizer, hard negatives, tokenised data.
	t0 := time.Now()
	settings := dense.Settings{Text: o.text, MaxQuery: o.maxQuery, MaxCode: o.maxCode, Tau: o.tau}
	tok, err := dense.TrainTokenizer(trainPairs, o.vocab, settings)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tokenizer: %d ids learned on the code and queries (%s) of %d training pairs (%.1fs)\n", tok.VocabSize(), o.text, len(trainPairs), time.Since(t0).Seconds())
	t0 = time.Now()
	negs, ms := retrieve.MineHardNegatives(trainPairs, retrieve.MineOptions{K: max(o.hard, 1), Depth: o.mineDepth, Margin: o.mineMargin})
	if o.hard == 0 {
		negs = nil
	}
	fmt.Fprintf(stdout, "hard negatives: %d kept for %d queries (top %d of BM25); dropped %d with the gold's code, %d within %.0f%% of the gold's score; %d queries short (%.1fs)\n",
		ms.Kept, ms.Queries, o.mineDepth, ms.Same, ms.Near, 100*o.mineMargin, ms.Short, time.Since(t0).Seconds())

	cfg.VocabSize = tok.VocabSize()
	m, err := dense.New(cfg, tok, settings, o.std, o.seed)
	if err != nil {
		return err
	}
	data := dense.NewData(m, trainPairs, negs)
	tr, err := dense.NewTrainer(m.Enc, data, dense.Options{
		Batch: o.batch, HardNegatives: o.hard, Tau: o.tau, LearnTau: o.learnTau, Symmetric: o.symmetric,
		Schedule: o.schedule(),
		Beta1:    0.9, Beta2: 0.999, Eps: 1e-8, WD: o.wd, Clip: o.clip, Seed: o.seed, Chunk: o.chunk,
	})
	if err != nil {
		return err
	}
	var params int
	for _, t := range m.Enc.Model.Tensors(m.Enc.Params) {
		params += len(t.Data)
	}
	fmt.Fprintf(stdout, "encoder: %d parameters (dim %d, %d blocks, %d/%d heads, ffn %d); batch %d pairs + %d hard negatives each, τ %g%s, %s loss, %d steps\n",
		params, o.dim, o.layers, o.heads, o.kvHeads, o.ffn, o.batch, o.hard, o.tau, map[bool]string{true: " learned", false: " fixed"}[o.learnTau],
		map[bool]string{true: "symmetric", false: "query→code"}[o.symmetric], o.steps)

	run, err := stepLoop(ctx, o.steps, tr.Step, func() (loopStep, error) {
		res, err := tr.TrainStep()
		return loopStep{Step: res.Step, Loss: res.Loss, Accuracy: res.Accuracy, Tokens: res.Tokens,
			Row: fmt.Sprintf("%d,%.6f,%.4f,%.6g,%.6g,%.6g,%d,%d", res.Step, res.Loss, res.Accuracy, res.LR, res.GradNorm, res.Tau, res.Docs, res.Tokens)}, err
	}, "step,loss,accuracy,lr,grad_norm,tau,docs,tokens", filepath.Join(o.out, "curves.csv"), o.quiet)
	if err != nil {
		return err
	}
	m.Settings.Tau = tr.Tau
	modelDir := filepath.Join(o.out, "model")
	if tr.Step == 0 {
		fmt.Fprintf(stdout, "%v at step 0: nothing trained, nothing saved\n", run.Stopped)
		return errFailed
	}
	if err := m.Save(modelDir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); loss %.3f → %.3f, in-batch accuracy %.2f → %.2f\n",
		tr.Step, run.Time.Seconds(), float64(run.Tokens)/run.Time.Seconds(), run.First.Loss, run.Last.Loss, run.First.Accuracy, run.Last.Accuracy)
	if run.Stopped != nil {
		fmt.Fprintf(stdout, "%v at step %d: the model so far is saved in %s\n", run.Stopped, tr.Step, modelDir)
		return errFailed
	}

	// Validation: MRR@10 of the model and of BM25 over the validation split.
	t0 = time.Now()
	valIndex := dense.NewIndex(m, valPairs, barFunc(newBar(len(valPairs), "embedding the validation code", o.quiet)))
	queries, codes := make([]string, len(valPairs)), make([]string, len(valPairs))
	for i, p := range valPairs {
		queries[i], codes[i] = p.Query, p.Code
	}
	dm := retrieve.Evaluate(valIndex.Ranker(), queries, len(codes), retrieve.EvalOptions{})
	bm := retrieve.Evaluate(retrieve.NewBM25(codes), queries, len(codes), retrieve.EvalOptions{})
	fmt.Fprintf(stdout, "validation (%d pairs): MRR@10 dense %.4f, bm25 %.4f; R@10 dense %.4f, bm25 %.4f (%.1fs)\n",
		len(valPairs), dm.MRR10, bm.MRR10, dm.Recall10, bm.Recall10, time.Since(t0).Seconds())

	// The index of -index-data, for attnlab search.
	t0 = time.Now()
	x := dense.NewIndex(m, indexPairs, barFunc(newBar(len(indexPairs), "embedding the index", o.quiet)))
	indexDir := filepath.Join(o.out, "index")
	if err := x.Save(indexDir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "index: %d documents embedded in %.1fs, saved to %s\n", len(indexPairs), time.Since(t0).Seconds(), indexDir)
	fmt.Fprintf(stdout, "model: %s; curves: %s; total %.0f s\n", modelDir, filepath.Join(o.out, "curves.csv"), time.Since(start).Seconds())
	return nil
}

// barFunc returns a progress callback that sets bar, or nil for no bar.
func barFunc(bar *progressbar.ProgressBar) func(done int) {
	if bar == nil {
		return nil
	}
	return func(done int) { bar.Set(done) }
}
