package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOldSpellings: every spelling a command once took still works, as
// the flag or value it is now, with one line on stderr naming the new one.
func TestOldSpellings(t *testing.T) {
	in := tinyCheckpoint(t)
	data := retrieverData(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		args []string
		code int
		note string // the deprecation note
		want string // in stderr or stdout: the old spelling took effect
	}{
		{[]string{"convert", "-in", in, "-out", filepath.Join(t.TempDir(), "o"), "-dtype", "bf16"}, 0,
			"-dtype bf16 is deprecated: use -dtype bfloat16", "tensors to BF16"},
		{[]string{"gradcheck", "-op", "rmsnorm", "-dtype", "f32"}, 0,
			"-dtype f32 is deprecated: use -dtype float32", "analytic float32"},
		{[]string{"ref", "-op", "rope", "-dtype", "f16", "-in", missing, "-out", missing + ".out"}, 2,
			"-dtype f16 is deprecated: use -dtype float16", `-dtype "f16": want float64 or float32`},
		{[]string{"train", "-ckpt-every", "0"}, 2,
			"-ckpt-every is deprecated: use -save-every", "save-every 0: want >= 1"},
		{[]string{"search", "-index", missing, "-depth", "0", "q"}, 2,
			"-depth is deprecated: use -rerank-depth", "-rerank-depth 0: want >= 1"},
		{[]string{"retriever", "rerank", "-data", data, "-out", filepath.Join(t.TempDir(), "r"), "-depth", "0"}, 2,
			"-depth is deprecated: use -rerank-depth", "rerank-depth 0"},
		{[]string{"corpus", "stats", "-dir", missing}, 1,
			"-dir is deprecated: use -corpus", "missing: no such file"},
		{[]string{"retriever", "eval", "-data", filepath.Join(data, "test.jsonl"), "-model", "none", "-systems", "bm25", "-quiet"}, 0,
			"-data FILE is deprecated: use -pairs FILE (-data is a folder)", "bm25"},
	} {
		code, stdout, stderr := attnlab(t, c.args...)
		if code != c.code || strings.Count(stderr, c.note) != 1 || !strings.Contains(stdout+stderr, c.want) {
			t.Errorf("%q: exit %d (want %d), want the note %q once and %q:\nstdout %s\nstderr %s", c.args, code, c.code, c.note, c.want, stdout, stderr)
		}
	}
	// the new spellings print no note
	code, _, stderr := attnlab(t, "convert", "-in", in, "-out", filepath.Join(t.TempDir(), "o"), "-dtype", "bfloat16")
	if code != 0 || stderr != "" {
		t.Errorf("-dtype bfloat16: exit %d, stderr %q", code, stderr)
	}
	// -data is the folder of retriever data in retriever eval too: its test split
	code, stdout, stderr := attnlab(t, "retriever", "eval", "-data", data, "-model", "none", "-systems", "bm25", "-quiet")
	if code != 0 || strings.Contains(stderr, "deprecated") || !strings.HasPrefix(stdout, filepath.Join(data, "test.jsonl")+": ") {
		t.Errorf("-data DIR: exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
	if code, _, stderr := attnlab(t, "retriever", "eval", "-data", data, "-pairs", filepath.Join(data, "val.jsonl")); code != 2 || !strings.Contains(stderr, "choose one") {
		t.Errorf("-data and -pairs: exit %d, stderr %q", code, stderr)
	}
}

// TestOldSpellingCountsAsGiven: a flag given under its old name is given
// (a -preset does not override it).
func TestOldSpellingCountsAsGiven(t *testing.T) {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	every := fs.Int("save-every", 100, "")
	oldName(fs, "ckpt-every", "save-every")
	defer func() { progressOut = os.Stderr }()
	progressOut = new(strings.Builder)
	if err := fs.Parse([]string{"-ckpt-every", "7"}); err != nil {
		t.Fatal(err)
	}
	if given := givenFlags(fs); *every != 7 || !given["save-every"] {
		t.Errorf("-ckpt-every 7: -save-every %d, given %v", *every, given)
	}
}
