package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

// oneLine fails unless the command exited code with a message that names
// want on its first line, in at most two lines (the error and a pointer to
// -h), without a panic or a runtime trace.
func oneLine(t *testing.T, args []string, code int, want string) {
	t.Helper()
	got, _, stderr := attnlab(t, args...)
	first, _, _ := strings.Cut(stderr, "\n")
	if got != code || !strings.Contains(first, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 ||
		strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
		t.Errorf("%v: exit %d, stderr %q; want %d and %q", args, got, stderr, code, want)
	}
}

// hugeCheckpoint writes a checkpoint folder whose config.json gives one
// size of 10⁹ (it made loading panic in makeslice, or end out of memory).
func hugeCheckpoint(t *testing.T, field string) string {
	dir := t.TempDir()
	cfg := map[string]any{"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": 300, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000,
		"attnlab_kind": "language-model"}
	cfg[field] = 1000000000
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), safetensors.New()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHugeConfigIsAnError: every command that loads a model refuses a
// config.json beyond the model's limits with exit 1 and one line naming
// the file and the field.
func TestHugeConfigIsAnError(t *testing.T) {
	src := tinyCorpus(t)
	for _, field := range []string{"hidden_size", "intermediate_size", "vocab_size", "num_hidden_layers", "max_position_embeddings"} {
		dir := hugeCheckpoint(t, field)
		want := filepath.Join(dir, "config.json") + ": model: config " + field
		oneLine(t, []string{"generate", "-model", dir, "-prompt", "x"}, 1, want)
		oneLine(t, []string{"lm-eval", "-model", dir, "-src", src, "-quiet"}, 1, want)
		in := filepath.Join(t.TempDir(), "in.safetensors")
		f := safetensors.New()
		f.SetI64("tokens", []int{1, 2}, []int64{1, 2})
		f.Metadata[oracle.CheckpointKey] = dir
		if err := safetensors.WriteFile(in, f); err != nil {
			t.Fatal(err)
		}
		oneLine(t, []string{"ref", "-op", "decoder", "-in", in, "-out", filepath.Join(t.TempDir(), "out.safetensors")}, 1, want)
	}
}

// TestFlagSizesAreBounded: sizes from flags that ended in out-of-memory
// traces are usage errors naming the flag, against a stated limit or the
// machine's memory, before any work.
func TestFlagSizesAreBounded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	src := tinyCorpus(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{trainArgs(src, out, "-batch", "100000000"), "batch 100000000: want at most 1048576"},
		{trainArgs(src, out, "-batch", "1048576", "-window", "256"), "batch 1048576 × window 256 needs"},
		{trainArgs(src, out, "-window", "100000000"), "window 100000000: want at most 16777216"},
		{trainArgs(src, out, "-dim", "100000000"), "dim 100000000: want at most 1048576"},
		{trainArgs(src, out, "-dim", "65536", "-ffn", "262144", "-heads", "4"), "a model of"},
		{[]string{"gradcheck", "-m", "100000", "-n", "100000"}, "-op attention at -b 2 -hq 4 -hkv 2 -m 100000 -n 100000 -d 8 -dv 8 needs"},
		{[]string{"gradcheck", "-op", "linear", "-dim", "100000"}, "-op linear at -b 2 -t 4 -dim 100000 needs"},
		{[]string{"gradcheck", "-m", "10000000"}, "-m 10000000: want in [1, 1048576]"},
		{[]string{"lm-eval", "-src", src, "-batch", "100000000"}, "-batch 100000000"},
		{[]string{"retriever", "train", "-data", src, "-batch", "100000000"}, "batch 100000000: want at most"},
		{[]string{"retriever", "train", "-data", src, "-batch", "1048576", "-hard-negatives", "64"}, "needs"},
		{[]string{"retriever", "rerank", "-data", src, "-groups", "100000000"}, "groups 100000000: want at most"},
		{[]string{"retriever", "eval", "-pairs", src, "-workers", "100000000"}, "-workers 100000000"},
		{[]string{"bench", "-memory-case", "100000000"}, "-memory-case 100000000"},
	} {
		oneLine(t, c.args, 2, c.want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused train wrote %s", out)
	}
}

// TestBadFlagValuesExitTwo: the flag errors that exited 1 (some after the
// work) are usage errors naming the flag.
func TestBadFlagValuesExitTwo(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	f := safetensors.New()
	f.SetF64("q", []int{1, 1, 1, 2}, []float64{1, 2})
	if err := safetensors.WriteFile(in, f); err != nil {
		t.Fatal(err)
	}
	src := tinyCorpus(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ref", "-op", "nosuch", "-in", in, "-out", filepath.Join(dir, "o")}, `-op "nosuch"`},
		{[]string{"ref", "-op", "attention", "-dtype", "float16", "-in", in, "-out", filepath.Join(dir, "o")}, `-dtype "float16"`},
		{[]string{"gradcheck", "-plot", filepath.Join(dir, "x.png")}, "without -sweep"},
		{[]string{"generate", "-prompt", "x", "-n", "100000"}, "-n 100000"},
		{[]string{"train", "-src", src, "-out", ""}, `-out ""`},
		{[]string{"retriever", "data", "-src", src, "-out", ""}, `-out ""`},
		{[]string{"retriever", "train", "-data", src, "-out", ""}, `-out ""`},
		{[]string{"retriever", "rerank", "-data", src, "-out", ""}, `-out ""`},
		{[]string{"retriever", "diagnose", "-data", src, "-mine-margin", "NaN"}, "-mine-margin NaN"},
		{[]string{"retriever", "train", "-data", src, "-mine-margin", "NaN"}, "mine-margin NaN"},
		{[]string{"retriever", "train", "-data", src, "-short-queries", "2"}, "short-queries 2: want a probability"},
	} {
		oneLine(t, c.args, 2, c.want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("refused commands wrote %d files", len(ents)-1)
	}
}

// TestOutputsCheckedBeforeWork: an output that cannot be written, or a
// model that cannot be loaded, is refused before the work, not after it.
func TestOutputsCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	missing, file := filepath.Join(dir, "none", "x.png"), filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		args []string
		want string
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "-plot", missing}, "the folder " + filepath.Dir(missing) + " does not exist"},
		{[]string{"lab", "-op", "rmsnorm", "-html", filepath.Join(file, "r")}, "not a directory"}, // a folder it would make under a file
		{[]string{"gradcheck", "-sweep", "-plot", missing}, "the folder " + filepath.Dir(missing) + " does not exist"},
		{[]string{"ref", "-op", "attention", "-in", missing + ".in", "-out", missing}, "the folder " + filepath.Dir(missing) + " does not exist"},
	} {
		cases = append(cases, c)
	}
	if _, err := os.Stat("/proc/self"); err == nil { // folders not even root can make
		src, none := tinyCorpus(t), "/proc/attnlab-none/out"
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"lab", "-op", "rmsnorm", "-html", none}, "cannot make the folder /proc/attnlab-none"},
			{trainArgs(src, none), "cannot make the folder /proc/attnlab-none"},
			{[]string{"retriever", "data", "-src", src, "-out", none}, "cannot make the folder /proc/attnlab-none"},
			{[]string{"retriever", "eval", "-pairs", filepath.Join(dir, "none.jsonl"), "-write-index", none}, "cannot make the folder /proc/attnlab-none"},
		} {
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		code, stdout, stderr := attnlab(t, c.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1, nothing done, %q", c.args, code, stdout, stderr, c.want)
		}
	}
	code, stdout, stderr := attnlab(t, "search", "-src", tinyCorpus(t), "-cache", "", "-reranker", filepath.Join(t.TempDir(), "nosuch"), "-quiet", "return", "twice")
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "attnlab search: -reranker: ") || strings.Contains(stderr, "indexed") {
		t.Errorf("search -reranker nosuch: exit %d, stdout %q, stderr %q; want 1 before indexing", code, stdout, stderr)
	}
}
