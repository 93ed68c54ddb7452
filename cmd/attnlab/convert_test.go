package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/safetensors"
)

// tinyCheckpoint saves a small random language model with a tokenizer file
// and returns its folder.
func tinyCheckpoint(t *testing.T) string {
	t.Helper()
	m, err := model.New[float32](model.Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 1, NumAttentionHeads: 2,
		NumKeyValueHeads: 1, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 11, MaxPositionEmbeddings: 16, TieWordEmbeddings: true})
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, map[string][]byte{"tokenizer.json": []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConvertCommand: a BF16 copy loads with the weights rounded to BF16;
// an existing output needs -force; the output may not be the input or lie
// inside it.
func TestConvertCommand(t *testing.T) {
	in := tinyCheckpoint(t)
	out := filepath.Join(t.TempDir(), "bf16")
	code, stdout, stderr := attnlab(t, "convert", "-in", in, "-out", out, "-dtype", "bfloat16")
	if code != 0 || stderr != "" || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "3 files, ") || !strings.Contains(stdout, " tensors to BF16, ") {
		t.Fatalf("convert: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// The loaded weights are the originals rounded to bfloat16.
	orig, err := safetensors.ReadFile(filepath.Join(in, model.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	m, p, err := model.Load[float32](out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tensor := range m.Tensors(p) {
		v, shape, err := orig.Float32(tensor.Name)
		if err != nil {
			t.Fatal(err)
		}
		rounded := safetensors.New()
		rounded.SetBF16("x", shape, v)
		want, _, _ := rounded.Float32("x")
		for i := range want {
			if tensor.Data[i] != want[i] {
				t.Fatalf("%s[%d] = %v, want %v (%v rounded to bfloat16)", tensor.Name, i, tensor.Data[i], want[i], v[i])
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "tokenizer.json")); err != nil || string(b) != "{}" {
		t.Errorf("tokenizer.json: %q, %v", b, err)
	}

	// An existing output is refused, and left as it was; -force replaces it.
	before := readTree(t, out)
	code, stdout, stderr = attnlab(t, "convert", "-in", in, "-out", out, "-dtype", "float16")
	if code != 2 || stdout != "" || !strings.Contains(stderr, out) || !strings.Contains(stderr, "-force") {
		t.Errorf("existing output: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !sameTree(before, readTree(t, out)) {
		t.Error("a refused conversion changed the output")
	}
	if code, stdout, stderr := attnlab(t, "convert", "-in", in, "-out", out, "-dtype", "F16", "-force"); code != 0 || !strings.Contains(stdout, "to F16") {
		t.Errorf("-force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if f, err := safetensors.ReadFile(filepath.Join(out, model.WeightsFile)); err != nil || f.Tensors["model.norm.weight"].DType != safetensors.F16 {
		t.Errorf("after -force: %v", err)
	}

	// The output may not be the input, lie inside it or hold it.
	original := readTree(t, in)
	for _, bad := range []string{in, filepath.Join(in, "bf16"), filepath.Dir(in)} {
		code, stdout, stderr := attnlab(t, "convert", "-in", in, "-out", bad, "-dtype", "bfloat16", "-force")
		if code != 2 || stdout != "" || !strings.Contains(stderr, "input") {
			t.Errorf("-out %s: exit %d, stdout %q, stderr %q", bad, code, stdout, stderr)
		}
	}
	if !sameTree(original, readTree(t, in)) {
		t.Error("a refused conversion changed the input")
	}
}

// TestConvertErrors: a missing input is one line naming it; flags are
// checked before any work; -h prints the usage.
func TestConvertErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-checkpoint")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := attnlab(t, "convert", "-in", missing, "-out", out, "-dtype", "bfloat16")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "attnlab convert: ") || !strings.Contains(stderr, missing) {
		t.Errorf("missing input: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a failed conversion created its output")
	}
	in := tinyCheckpoint(t)
	for _, args := range [][]string{
		{"-out", out, "-dtype", "bfloat16"},
		{"-in", in, "-dtype", "bfloat16"},
		{"-in", in, "-out", out},
		{"-in", in, "-out", out, "-dtype", "i64"},
		{"-in", in, "-out", out, "-dtype", "bfloat16", "extra"},
	} {
		code, stdout, stderr := attnlab(t, append([]string{"convert"}, args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, `run "attnlab convert -h"`) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a usage error created the output")
	}
	code, stdout, _ = attnlab(t, "convert", "-h")
	for _, want := range []string{"usage: attnlab convert -in DIR -out DIR -dtype float32|float64|bfloat16|float16 [-force]", "Example: attnlab convert ", "-dtype", "-force"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("convert -h: exit %d, output lacks %q:\n%s", code, want, stdout)
		}
	}
}
