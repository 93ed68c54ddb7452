package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
)

// tinyRetriever is a dense encoder small enough to train in a fraction of a
// second.
var tinyRetriever = []string{"-quiet", "-steps", "3", "-warmup", "1", "-dim", "16", "-layers", "1", "-heads", "2", "-kv-heads", "2",
	"-ffn", "32", "-vocab", "300", "-batch", "4", "-max-query", "32", "-max-code", "64"}

// retrieverData writes the dataset of retrieverTree and returns its folder.
func retrieverData(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if code, stdout, stderr := attnlab(t, "retriever", "data", "-src", retrieverTree(t), "-out", data); code != 0 {
		t.Fatalf("retriever data exited %d\n%s\n%s", code, stdout, stderr)
	}
	return data
}

// trainRetriever runs retriever train on data into out with tinyRetriever
// and then extra, and returns its standard output.
func trainRetriever(t *testing.T, data, out string, extra ...string) string {
	t.Helper()
	args := append([]string{"retriever", "train", "-data", data, "-out", out}, tinyRetriever...)
	code, stdout, stderr := attnlab(t, append(args, extra...)...)
	if code != 0 {
		t.Fatalf("retriever train exited %d\n%s\n%s", code, stdout, stderr)
	}
	return stdout
}

func readPairs(t *testing.T, path string) []retrieve.Pair {
	t.Helper()
	ps, err := retrieve.ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// searchRow is a line of search's output: rank, score, path:line, the
// function and the first line of the code.
var searchRow = regexp.MustCompile(`^(\d+)\s+(-?\d+\.\d{4})\s+(\S+\.go):(\d+)\s+(\S+)\s+(\S.*)$`)

func TestRetrieverTrainThenEvalAndSearch(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout := trainRetriever(t, data, out)
	test := readPairs(t, filepath.Join(data, "test.jsonl"))
	val := readPairs(t, filepath.Join(data, "val.jsonl"))

	for _, f := range []string{
		"curves.csv",
		"model/config.json", "model/model.safetensors", "model/tokenizer.json", "model/dense.json",
		"index/" + dense.EmbeddingsFile, "index/" + dense.CorpusFile,
		"index/encoder/config.json", "index/encoder/model.safetensors", "index/encoder/tokenizer.json", "index/encoder/dense.json",
	} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"curves.csv", "index", "model"}; !slices.Equal(names, want) {
		t.Errorf("the output folder holds %q, want %q", names, want)
	}

	// curves.csv: the header and one row per step, in order.
	csv, err := os.ReadFile(filepath.Join(out, "curves.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(csv), "\n"), "\n")
	header := strings.Split(lines[0], ",")
	if header[0] != "step" || header[1] != "loss" {
		t.Errorf("curves.csv header %q", lines[0])
	}
	if len(lines) != 1+3 {
		t.Fatalf("curves.csv has %d rows after its header, want 3:\n%s", len(lines)-1, csv)
	}
	for i, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != len(header) || f[0] != strconv.Itoa(i+1) {
			t.Errorf("curves.csv row %d: %q", i+1, line)
			continue
		}
		if loss, err := strconv.ParseFloat(f[1], 64); err != nil || math.IsNaN(loss) || math.IsInf(loss, 0) || loss <= 0 {
			t.Errorf("curves.csv row %d: loss %q", i+1, f[1])
		}
	}

	// The report: steps, validation MRR of both systems, the index.
	if !strings.Contains(stdout, "trained 3 steps") {
		t.Errorf("the report does not give the steps trained:\n%s", stdout)
	}
	m := regexp.MustCompile(`validation \((\d+) pairs\): MRR@10 dense ([01]\.\d{4}), bm25 ([01]\.\d{4})`).FindStringSubmatch(stdout)
	if m == nil || m[1] != strconv.Itoa(len(val)) {
		t.Errorf("want the validation MRR@10 over the %d pairs of val.jsonl in:\n%s", len(val), stdout)
	}
	indexDir := filepath.Join(out, "index")
	if want := "index: " + strconv.Itoa(len(test)) + " documents in " + indexDir; !strings.Contains(stdout, want) {
		t.Errorf("the report lacks %q:\n%s", want, stdout)
	}

	// eval reads the checkpoint, or the encoder of the index: same ranks.
	evalRows := func(model string) map[string]string {
		t.Helper()
		code, stdout, stderr := attnlab(t, "retriever", "eval", "-data", data, "-model", model, "-workers", "1")
		if code != 0 {
			t.Fatalf("eval -model %s exited %d\n%s\n%s", model, code, stdout, stderr)
		}
		rows := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^\s*(\w+)((?:\s+[01]\.\d{4}){6})\s`).FindAllStringSubmatch(stdout, -1) {
			rows[m[1]] = strings.Join(strings.Fields(m[2]), " ")
		}
		for _, sys := range []string{"bm25", "dense", "hybrid"} {
			if rows[sys] == "" {
				t.Errorf("eval -model %s prints no row %s:\n%s", model, sys, stdout)
			}
		}
		return rows
	}
	fromModel := evalRows(filepath.Join(out, "model"))
	if !strings.HasPrefix(fromModel["bm25"], "1.0000 1.0000") {
		t.Errorf("bm25 row %q: want MRR@10 and R@1 of 1", fromModel["bm25"])
	}
	if fromIndex := evalRows(indexDir); fromIndex["dense"] != fromModel["dense"] {
		t.Errorf("dense with the index's encoder: %s; with the checkpoint: %s", fromIndex["dense"], fromModel["dense"])
	}

	// search prints -k results, best first, from the indexed documents.
	if len(test) < 3 {
		t.Fatalf("test.jsonl holds %d pairs, too few for the search checks", len(test))
	}
	inTest := map[string]retrieve.Pair{}
	for _, p := range test {
		inTest[p.File+":"+strconv.Itoa(p.Line)] = p
	}
	search := func(k int, query ...string) []string {
		t.Helper()
		code, stdout, stderr := attnlab(t, append([]string{"search", "-index", indexDir, "-k", strconv.Itoa(k)}, query...)...)
		if code != 0 {
			t.Fatalf("search exited %d\n%s\n%s", code, stdout, stderr)
		}
		rows := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		prev := math.Inf(1)
		for i, row := range rows {
			m := searchRow.FindStringSubmatch(row)
			if m == nil {
				t.Errorf("search row %q: want rank, score, path:line, function, code", row)
				continue
			}
			score, _ := strconv.ParseFloat(m[2], 64)
			if m[1] != strconv.Itoa(i+1) || score > prev || score < -1.0001 || score > 1.0001 {
				t.Errorf("search row %d: %q: want rank %d and a score at most %.4f", i+1, row, i+1, prev)
			}
			prev = score
			p, ok := inTest[m[3]+":"+m[4]]
			if !ok || retrieve.FuncName(p) != m[5] || !strings.HasPrefix(m[6], "func ") || !strings.HasPrefix(p.Code, m[6]) {
				t.Errorf("search row %d: %q is not a document of the index", i+1, row)
			}
		}
		return rows
	}
	rows := search(3, "how many widgets the store holds")
	if len(rows) != 3 {
		t.Errorf("search -k 3 printed %d rows", len(rows))
	}
	if split := search(3, "how", "many widgets", "the store holds"); !slices.Equal(split, rows) {
		t.Errorf("the query in several arguments gives\n%s\nin one\n%s", strings.Join(split, "\n"), strings.Join(rows, "\n"))
	}
	if all := search(100, "removes every gadget"); len(all) != len(test) {
		t.Errorf("search -k 100 printed %d rows, want all %d documents", len(all), len(test))
	}
}

func TestRetrieverTrainIsDeterministic(t *testing.T) {
	data := retrieverData(t)
	dir := t.TempDir()
	read := func(run, file string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, run, file))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	trainRetriever(t, data, filepath.Join(dir, "a"))
	trainRetriever(t, data, filepath.Join(dir, "b"))
	trainRetriever(t, data, filepath.Join(dir, "c"), "-seed", "2")
	for _, f := range []string{"model/model.safetensors", "model/tokenizer.json", "index/" + dense.EmbeddingsFile} {
		if !bytes.Equal(read("a", f), read("b", f)) {
			t.Errorf("two runs with the same seed wrote different %s", f)
		}
	}
	if bytes.Equal(read("a", "model/model.safetensors"), read("c", "model/model.safetensors")) {
		t.Errorf("runs with seeds 1 and 2 wrote the same weights")
	}
}

func TestRetrieverTrainErrors(t *testing.T) {
	data := retrieverData(t)
	dir := t.TempDir()

	// A copy of the dataset whose train.jsonl has a truncated third line.
	bad := filepath.Join(dir, "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train.jsonl", "val.jsonl", "test.jsonl"} {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "train.jsonl" {
			lines := strings.SplitAfter(string(b), "\n")
			lines[2] = lines[2][:len(lines[2])/2] + "\n"
			b = []byte(strings.Join(lines, ""))
		}
		if err := os.WriteFile(filepath.Join(bad, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for i, c := range []struct {
		args  []string
		code  int
		want  string // in the first line of stderr
		noOut bool   // the output folder is not created
	}{
		{[]string{}, 2, "-data is required", true},
		{[]string{"-data", data, "-steps", "0"}, 2, "steps 0", true},
		{[]string{"-data", data, "-text", "bogus"}, 2, `text "bogus"`, true},
		{[]string{"-data", data, "-lr", "-1"}, 2, "lr -1", true},
		{[]string{"-data", data, "stray"}, 2, `unexpected argument "stray"`, true},
		{[]string{"-data", bad}, 1, filepath.Join(bad, "train.jsonl") + ":3:", true},
		{[]string{"-data", filepath.Join(dir, "nosuch")}, 1, filepath.Join(dir, "nosuch", "train.jsonl"), true},
		{[]string{"-data", data, "-index-data", filepath.Join(dir, "nosuch.jsonl")}, 1, "nosuch.jsonl", true},
		{[]string{"-data", data, "-batch", "1000"}, 1, "fewer than a batch of 1000", true},
		{[]string{"-data", data, "-heads", "3"}, 2, "num_attention_heads = 3", true},
	} {
		out := filepath.Join(dir, "out"+strconv.Itoa(i))
		args := append([]string{"retriever", "train", "-out", out}, tinyRetriever...)
		args = append(args, c.args...)
		code, _, stderr := attnlab(t, args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		wantLines := 1
		if c.code == 2 {
			wantLines = 2 // and the pointer to the help
		}
		if code != c.code || !strings.HasPrefix(lines[0], "attnlab retriever train: ") || !strings.Contains(lines[0], c.want) || len(lines) != wantLines {
			t.Errorf("train %v: exit %d, stderr %q; want exit %d and %d line(s) naming %q", c.args, code, stderr, c.code, wantLines, c.want)
		}
		if _, err := os.Stat(out); c.noOut && err == nil {
			t.Errorf("train %v: the failed run created its output folder", c.args)
		}
	}
}

func TestSearchErrors(t *testing.T) {
	data := retrieverData(t)
	dir := t.TempDir()
	trainRetriever(t, data, filepath.Join(dir, "run"))
	trainRetriever(t, data, filepath.Join(dir, "wide"), "-dim", "32")
	index := filepath.Join(dir, "run", "index")
	n := len(readPairs(t, filepath.Join(data, "test.jsonl")))

	// An index whose encoder is another model's, of another width.
	other := filepath.Join(dir, "other")
	copyDir(t, index, other)
	if err := os.RemoveAll(filepath.Join(other, dense.EncoderDir)); err != nil {
		t.Fatal(err)
	}
	copyDir(t, filepath.Join(dir, "wide", "model"), filepath.Join(other, dense.EncoderDir))

	for _, c := range []struct {
		args []string
		code int
		want string // in the first line of stderr
	}{
		{[]string{"query"}, 2, "-src DIR and -index DIR"},
		{[]string{"-index", index}, 2, "missing query"},
		{[]string{"-index", index, "-k", "0", "query"}, 2, "-k 0"},
		{[]string{"-index", filepath.Join(dir, "nosuch"), "query"}, 1, filepath.Join(dir, "nosuch")},
		{[]string{"-index", data, "query"}, 1, data},
		{[]string{"-index", other, "query"}, 1, fmt.Sprintf("embeddings of shape [%d 16], want [%d 32]", n, n)},
	} {
		code, stdout, stderr := attnlab(t, append([]string{"search"}, c.args...)...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		wantLines := 1
		if c.code == 2 {
			wantLines = 2
		}
		if code != c.code || !strings.HasPrefix(lines[0], "attnlab search: ") || !strings.Contains(lines[0], c.want) || len(lines) != wantLines || stdout != "" {
			t.Errorf("search %v: exit %d, stdout %q, stderr %q; want exit %d and %d line(s) naming %q", c.args, code, stdout, stderr, c.code, wantLines, c.want)
		}
	}
}

// TestSearchRefusesAnotherEncoder replaces the encoder of an index by a
// model of the same shape trained with another seed: its query embeddings
// do not live in the space of the stored code embeddings.
func TestSearchRefusesAnotherEncoder(t *testing.T) {
	data := retrieverData(t)
	dir := t.TempDir()
	trainRetriever(t, data, filepath.Join(dir, "run"))
	trainRetriever(t, data, filepath.Join(dir, "other"), "-seed", "2")
	index := filepath.Join(dir, "run", "index")
	if err := os.RemoveAll(filepath.Join(index, dense.EncoderDir)); err != nil {
		t.Fatal(err)
	}
	copyDir(t, filepath.Join(dir, "other", "model"), filepath.Join(index, dense.EncoderDir))

	code, stdout, stderr := attnlab(t, "search", "-index", index, "query")
	if code == 0 {
		t.Fatalf("search accepts an index whose encoder did not write its embeddings:\n%s", stdout)
	}
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, index) {
		t.Errorf("exit %d, stderr %q: want 1 and one line naming %s", code, stderr, index)
	}
}

// TestRetrieverTrainKeepsTheIndexWhole trains twice into one output folder:
// an interrupted second run leaves the first run's index as it was, a
// finished one replaces it whole.
func TestRetrieverTrainKeepsTheIndexWhole(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, out)
	index := filepath.Join(out, "index")
	before := readTree(t, index)

	// Without -force the finished run is refused, naming the folder.
	args := append([]string{"retriever", "train", "-data", data, "-out", out, "-force"}, tinyRetriever...)
	if code, _, stderr := attnlab(t, args[:len(args)-len(tinyRetriever)-1]...); code != 2 || !strings.Contains(stderr, out) || !strings.Contains(stderr, "-force") {
		t.Errorf("a second run into a finished one: exit %d, %q; want 2 naming the folder and -force", code, stderr)
	}
	// A run interrupted before its first step (the context is what an
	// interrupt cancels) saves nothing.
	code, stdout, stderr := attnlabCtx(t, interruptedContext(), append(args, "-seed", "2")...)
	if code != 130 || !strings.Contains(stdout, "nothing written") {
		t.Fatalf("interrupted run: exit %d, output:\n%s%s", code, stdout, stderr)
	}
	if after := readTree(t, index); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Errorf("the interrupted run changed the index: %d files before, %d after", len(before), len(after))
	}
	if _, err := dense.LoadIndex(index); err != nil {
		t.Errorf("the index does not load after an interrupted run: %v", err)
	}
	if code, stdout, stderr := attnlab(t, "search", "-index", index, "-k", "1", "query"); code != 0 || !searchRow.MatchString(strings.TrimSpace(stdout)) {
		t.Errorf("search after an interrupted run: exit %d\n%s%s", code, stdout, stderr)
	}

	// A finished second run with another seed replaces the index.
	trainRetriever(t, data, out, "-seed", "2", "-force")
	after := readTree(t, index)
	if maps.EqualFunc(before, after, bytes.Equal) {
		t.Errorf("a second run with another seed left the index as it was")
	}
	if _, err := dense.LoadIndex(index); err != nil {
		t.Errorf("the index does not load after a second run: %v", err)
	}
	if model, err := os.ReadFile(filepath.Join(out, "model", "model.safetensors")); err != nil || !bytes.Equal(model, after[filepath.Join(dense.EncoderDir, "model.safetensors")]) {
		t.Errorf("the encoder of the new index is not the new model (%v)", err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "curves.csv" && n != "index" && n != "model" {
			t.Errorf("the output folder holds %s after two runs", n)
		}
	}
}

// readTree returns the contents of the regular files under dir by their
// path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	for rel, b := range readTree(t, src) {
		path := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetrieverRerankThenEval trains a reranker from a tiny dual encoder and
// evaluates the reranked systems.
func TestRetrieverRerankThenEval(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, out)
	code, stdout, stderr := attnlab(t, "retriever", "rerank", "-data", data, "-out", out, "-quiet", "-steps", "4", "-warmup", "1",
		"-groups", "3", "-candidates", "3", "-max-code", "48", "-depth", "5")
	if code != 0 {
		t.Fatalf("retriever rerank exited %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"bm25 negatives:", "dense negatives:", "trained 4 steps", "hybrid+rerank "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("rerank output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"rerank-curves.csv", "reranker/config.json", "reranker/model.safetensors", "reranker/tokenizer.json",
		"reranker/rerank.json", "reranker/score.safetensors"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if rows := strings.Count(strings.TrimSpace(readFile(t, filepath.Join(out, "rerank-curves.csv"))), "\n"); rows != 4 {
		t.Errorf("rerank-curves.csv has %d rows, want 4", rows)
	}

	code, stdout, stderr = attnlab(t, "retriever", "eval", "-data", data, "-model", filepath.Join(out, "model"),
		"-reranker", filepath.Join(out, "reranker"), "-rerank-depth", "5", "-candidates", "6")
	if code != 0 {
		t.Fatalf("retriever eval exited %d\n%s\n%s", code, stdout, stderr)
	}
	// every system the models allow, fused and unfused, in one run
	for _, sys := range []string{"bm25", "dense", "hybrid", "bm25+rerank", "dense+rerank", "hybrid+rerank", "bm25+rerank+fused", "hybrid+rerank+fused"} {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(sys) + `\s+\d\.\d{4}`).MatchString(stdout) {
			t.Errorf("eval output lacks the row %s:\n%s", sys, stdout)
		}
	}

	code, stdout, stderr = attnlab(t, "retriever", "eval", "-data", data, "-systems", "bm25+rerank",
		"-reranker", filepath.Join(out, "reranker"), "-rerank-depth", "5", "-candidates", "6", "-json")
	var js struct {
		Rows []struct {
			System string  `json:"system"`
			MRR10  float64 `json:"mrr10"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); code != 0 || err != nil || len(js.Rows) != 1 || js.Rows[0].System != "bm25+rerank" {
		t.Errorf("eval -json exited %d (%v)\n%s\n%s", code, err, stdout, stderr)
	}

	// -markdown: a header, a rule and one row per system, each with its
	// MRR@10 over BM25's (1.00 for BM25 itself)
	code, stdout, stderr = attnlab(t, "retriever", "eval", "-data", data, "-systems", "bm25,hybrid+rerank",
		"-model", filepath.Join(out, "model"), "-reranker", filepath.Join(out, "reranker"), "-rerank-depth", "5", "-candidates", "6", "-markdown")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "| system | MRR@10 |") || !strings.HasPrefix(lines[2], "| bm25 | ") ||
		!strings.Contains(lines[2], "| 1.00 |") || !strings.HasPrefix(lines[3], "| hybrid+rerank | ") {
		t.Errorf("eval -markdown exited %d\n%s\n%s", code, stdout, stderr)
	}

	// bad input: a reranker folder that is a dual encoder's; +rerank with no
	// reranker (-model none: BM25 alone, not the shipped models)
	for _, args := range [][]string{
		{"-reranker", filepath.Join(out, "model")},
		{"-model", "none", "-systems", "bm25+rerank"},
		{"-reranker", filepath.Join(out, "reranker"), "-rerank-depth", "0"},
	} {
		code, stdout, stderr := attnlab(t, append([]string{"retriever", "eval", "-data", data}, args...)...)
		if code == 0 || stdout != "" && !strings.Contains(stdout, "queries") || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("eval %v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	code, _, stderr = attnlab(t, "retriever", "rerank", "-data", data, "-out", out, "-model", filepath.Join(out, "nosuch"), "-quiet", "-force")
	if code == 0 || !strings.Contains(stderr, "nosuch") {
		t.Errorf("rerank with a missing model: exit %d, %s", code, stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRetrieverTrainFromLM starts the dual encoder from a language model:
// its tokenizer and sizes, and its weights before the first step.
func TestRetrieverTrainFromLM(t *testing.T) {
	src, lm := tinyCorpus(t), filepath.Join(t.TempDir(), "lm")
	if code, stdout, stderr := attnlab(t, trainArgs(src, lm, "-steps", "2")...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout := trainRetriever(t, data, out, "-init", filepath.Join(lm, "checkpoint"))
	if !strings.Contains(stdout, "encoder: the language model") {
		t.Errorf("no word of the language model:\n%s", stdout)
	}
	m, err := dense.Load(filepath.Join(out, "model"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.Text != dense.TextRaw || m.Tok.VocabSize() != 300 || m.Dim() != 16 {
		t.Errorf("text %q, vocabulary %d, width %d: want the language model's (raw, 300, 16)", m.Settings.Text, m.Tok.VocabSize(), m.Dim())
	}
	// a dual encoder is fine-tuned further: its tokenizer, settings and
	// weights are the start, and the run moves them
	again := filepath.Join(t.TempDir(), "again")
	stdout = trainRetriever(t, data, again, "-init", filepath.Join(out, "model"), "-tau", "0.07")
	if !strings.Contains(stdout, "fine-tuning the dual encoder") {
		t.Errorf("no word of the dual encoder fine-tuned:\n%s", stdout)
	}
	m2, err := dense.Load(filepath.Join(again, "model"))
	if err != nil {
		t.Fatal(err)
	}
	if m2.Settings.Text != dense.TextRaw || m2.Tok.VocabSize() != 300 || m2.Dim() != 16 || m2.Settings.Tau != 0.07 {
		t.Errorf("text %q, vocabulary %d, width %d, τ %v: want the first run's (raw, 300, 16) and -tau's 0.07",
			m2.Settings.Text, m2.Tok.VocabSize(), m2.Dim(), m2.Settings.Tau)
	}
	w1, w2 := m.Enc.Params.Embed, m2.Enc.Params.Embed
	if slices.Equal(w1, w2) {
		t.Error("fine-tuning left the embedding as it was")
	}
	// the blocks of a dual encoder are kept whole
	code, _, stderr := attnlab(t, append([]string{"retriever", "train", "-data", data, "-out", filepath.Join(t.TempDir(), "x"), "-init", filepath.Join(out, "model"), "-init-layers", "1"}, tinyRetriever...)...)
	if code != 1 || !strings.Contains(stderr, "init-layers 1") {
		t.Errorf("-init-layers with a dual encoder: exit %d, %s", code, stderr)
	}
}

// TestRetrieverTrainResume: a finished run is refused without -force or
// -resume (the refusal names both), -resume with -force is a usage error,
// and -resume of a finished run takes no step and changes no weight. The
// exactness of an interrupted and resumed run is tested in package dense.
func TestRetrieverTrainResume(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, out)
	weights := filepath.Join(out, dense.ModelDir, "model.safetensors")
	before, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"retriever", "train", "-data", data, "-out", out}, tinyRetriever...)
	code, _, stderr := attnlab(t, args...)
	if code != 2 || !strings.Contains(stderr, "-resume") || !strings.Contains(stderr, "-force") {
		t.Errorf("a second run into a finished one: exit %d, stderr %q; want 2 and a refusal naming -resume and -force", code, stderr)
	}
	if code, _, _ := attnlab(t, append(args, "-resume", "-force")...); code != 2 {
		t.Errorf("-resume with -force: exit %d, want 2", code)
	}
	code, stdout, stderr := attnlab(t, append(args, "-resume")...)
	if code != 0 || strings.Contains(stdout, "trained") {
		t.Errorf("-resume of a finished run: exit %d, want 0 and no step taken\n%s%s", code, stdout, stderr)
	}
	if after, err := os.ReadFile(weights); err != nil || !bytes.Equal(before, after) {
		t.Errorf("-resume of a finished run changed the weights (%v)", err)
	}
}
