package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/train"
)

// TestLMEval trains a tiny model, then measures it on a folder and on a
// list of files: the same files give the same numbers both ways, beside
// the compressors on the same bytes.
func TestLMEval(t *testing.T) {
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	if code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "2")...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
	ckpt := filepath.Join(out, "checkpoint")
	held := filepath.Join(out, "heldout.txt")
	list, err := os.ReadFile(held)
	if err != nil || len(strings.Fields(string(list))) == 0 {
		t.Fatalf("the run lists no held-out file: %v", err)
	}
	type result struct {
		BitsPerByte float64 `json:"bits_per_byte"`
		Bytes       int     `json:"bytes"`
		Tokens      int     `json:"tokens"`
		Files       int     `json:"files"`
		XZ          float64 `json:"xz_bits_per_byte"`
		XZPerFile   float64 `json:"xz_per_file_bits_per_byte"`
	}
	eval := func(args ...string) result {
		t.Helper()
		code, stdout, stderr := attnlab(t, append([]string{"lm-eval", "-model", ckpt, "-json", "-quiet"}, args...)...)
		var r result
		if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil {
			t.Fatalf("lm-eval %v: exit %d (%v)\n%s%s", args, code, err, stdout, stderr)
		}
		return r
	}
	byList := eval("-files", held, "-root", "/")
	if byList.Files != len(strings.Fields(string(list))) || byList.Bytes == 0 || byList.Tokens == 0 || !(byList.BitsPerByte > 0) {
		t.Errorf("lm-eval -files: %+v", byList)
	}
	if _, err := os.Stat("/usr/bin/xz"); err == nil && !(byList.XZ > 0 && byList.XZPerFile >= byList.XZ) {
		t.Errorf("xz: %g on the concatenation, %g per file: want both, per file no better", byList.XZ, byList.XZPerFile)
	}
	whole := eval("-src", src)
	if whole.Files != 8 || whole.BitsPerByte <= 0 {
		t.Errorf("lm-eval -src: %+v", whole)
	}
	// a smaller window reads with less context: a different measure of the same bytes
	if small := eval("-src", src, "-window", "8", "-stride", "4"); small.Bytes != whole.Bytes || small.BitsPerByte == whole.BitsPerByte {
		t.Errorf("window 8: %+v against %+v", small, whole)
	}

	// bad input: one line naming the problem
	missing := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(missing, []byte("a.go\n"), 0o644)
	// inputs read within a limit: a listed file beyond MaxTextFileBytes
	// (sparse: no room on disk) and a list that is /dev/zero
	huge := filepath.Join(t.TempDir(), "huge.go")
	if f, err := os.Create(huge); err != nil || f.Truncate(train.MaxTextFileBytes+1) != nil || f.Close() != nil {
		t.Fatal("cannot make a sparse file:", err)
	}
	hugeList := filepath.Join(t.TempDir(), "huge.txt")
	os.WriteFile(hugeList, []byte(huge+"\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lm-eval"}, 2, "-src DIR and -files LIST"},
		{[]string{"lm-eval", "-model", ckpt}, 2, "-src DIR and -files LIST"},
		{[]string{"lm-eval", "-model", ckpt, "-src", src, "-files", missing}, 2, "-src DIR and -files LIST"},
		{[]string{"lm-eval", "-model", ckpt, "-files", missing, "-root", src}, 1, "list.txt:1"},
		{[]string{"lm-eval", "-model", ckpt, "-files", hugeList}, 1, huge + ": larger than 268435456 bytes"},
		{[]string{"lm-eval", "-model", ckpt, "-files", "/dev/zero"}, 1, "/dev/zero: bufio.Scanner: token too long"},
		{[]string{"lm-eval", "-model", filepath.Join(out, "nosuch"), "-src", src}, 1, "nosuch"},
		{[]string{"lm-eval", "-model", ckpt, "-src", t.TempDir()}, 1, "no usable Go file"},
		{[]string{"lm-eval", "-model", ckpt, "-src", src, "-window", "100000"}, 2, "max_position_embeddings"},
		{[]string{"lm-eval", "-model", ckpt, "-src", src, "-batch", "1048576"}, 2, "batch 1048576 × window 256 needs"},
		{[]string{"lm-eval", "-model", ckpt, "-src", src, "-batch", "100000000"}, 2, "-batch 100000000"},
	} {
		code, _, stderr := attnlab(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
