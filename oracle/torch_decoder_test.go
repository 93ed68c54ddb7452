package oracle_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/safetensors"
)

// decoderTol bounds max |a-b| / (1 + |b|) between attnlab and PyTorch, both
// in float64, for the logits, the loss and every gradient of a whole model.
const decoderTol = 1e-9

// decoderF32Tol bounds the same error for attnlab -dtype float32 against
// PyTorch in float64: a sanity check of the float32 path.
const decoderF32Tol = 1e-4

// layerIndex matches the layer part of a per-layer parameter name.
var layerIndex = regexp.MustCompile(`\.layers\.\d+\.`)

// tensorKind groups the decoder outputs for the report: the gradients of
// every layer's q_proj are one kind, "grad.model.layers.*.self_attn.q_proj.weight".
func tensorKind(name string) string {
	return layerIndex.ReplaceAllString(name, ".layers.*.")
}

// saveDecoderModels writes every model of decoderModels under dir, in a
// directory named after it, and returns those directories.
func saveDecoderModels(t *testing.T, dir string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, dm := range decoderModels {
		d := filepath.Join(dir, dm.name)
		if err := dm.save(d); err != nil {
			t.Fatalf("save %s: %v", dm.name, err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// readOutput reads an output file; a file that is not there is fatal with a
// pointer to the process that should have written it.
func readOutput(t *testing.T, path, who string) *safetensors.File {
	t.Helper()
	f, err := safetensors.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s wrote no output for this case (see its error above)", who)
	} else if err != nil {
		t.Fatal(err)
	}
	return f
}

// scalarCount returns the I64 scalar count of an output file.
func scalarCount(t *testing.T, f *safetensors.File, who string) int64 {
	t.Helper()
	x, shape, err := f.Int64("count")
	if err != nil || len(shape) != 0 || len(x) != 1 {
		t.Fatalf("%s: count: %v, shape %v, want an I64 scalar (shape [])", who, err, shape)
	}
	return x[0]
}

func TestDecoderAgreesWithPyTorch(t *testing.T) {
	start := time.Now()
	if err := exec.Command(torchPython, "-c", "import torch").Run(); err != nil {
		t.Skipf("PyTorch cross-check skipped: %s cannot import torch (apt-get install python3-torch): %v", torchPython, err)
	}
	bin := buildAttnlab(t)
	script := filepath.Join(moduleRoot(t), "python", "torch_oracle.py")
	// Reading the script here makes it an input of the test for go test's
	// cache: an edited script is run again, not answered from the cache.
	if src, err := os.ReadFile(script); err != nil || !strings.Contains(string(src), "def op_decoder(") {
		t.Fatalf("%s: no op_decoder (%v)", script, err)
	}

	// Checkpoints in dir/ckpt, inputs and outputs in dir/io. Every other
	// case names its checkpoint relative to the input file ("../ckpt/gqa"),
	// which both oracles must resolve against the input's directory, not
	// the working directory.
	dir := t.TempDir()
	ioDir := filepath.Join(dir, "io")
	if err := os.Mkdir(ioDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ckpts := saveDecoderModels(t, filepath.Join(dir, "ckpt"))

	r := rand.New(rand.NewPCG(2026, 8))
	cases := decoderCases(r)
	file := func(c decoderCase) string { return strings.ReplaceAll(c.name, "/", ".") }
	args := []string{script, "decoder"}
	counted := 0
	for i, c := range cases {
		ck := ckpts[c.model]
		if i%2 == 1 {
			ck = filepath.Join("..", "ckpt", decoderModels[c.model].name)
		}
		in := filepath.Join(ioDir, file(c)+".in.safetensors")
		writeInput(t, in, c.file(ck))
		args = append(args, in, filepath.Join(ioDir, file(c)+".torch.safetensors"))
		if c.count() > 0 {
			counted++
		}
	}
	if counted < len(cases)-2 {
		t.Fatalf("only %d of %d cases count a target", counted, len(cases))
	}

	// One Python process serves every case; it stops at the first input it
	// rejects, so a bad one (a real token outside the vocabulary) goes last.
	badDir := filepath.Join(dir, "bad-out")
	if err := os.Mkdir(badDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := cases[0]
	bad.tokens = slices.Clone(bad.tokens)
	bad.tokens[3] = int64(decoderModels[bad.model].cfg.VocabSize)
	badIn := filepath.Join(ioDir, "bad-token.in.safetensors")
	writeInput(t, badIn, bad.file(ckpts[bad.model]))
	args = append(args, badIn, filepath.Join(badDir, "torch.safetensors"))
	pyStart := time.Now()
	pyStderr, pyStatus := run(t, torchPython, args...)
	pyTime := time.Since(pyStart)
	if pyStatus != 1 || !strings.Contains(pyStderr, badIn) {
		t.Errorf("torch_oracle.py: exit status %d, want 1 for the last input only; stderr:\n%s", pyStatus, pyStderr)
	}

	var worst, worst32 worstErr
	perKind := map[string]float64{}
	var maxGrad float64
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(ioDir, file(c)+".in.safetensors")
			want := c.outputs()
			names := slices.Sorted(maps.Keys(want))
			b := readOutput(t, filepath.Join(ioDir, file(c)+".torch.safetensors"), "torch_oracle.py")
			if got := b.Names(); !slices.Equal(got, names) {
				t.Fatalf("torch wrote %v, want %v", got, names)
			}
			wantCount := int64(c.count())
			if n := scalarCount(t, b, "torch"); n != wantCount {
				t.Errorf("torch: count %d, want %d", n, wantCount)
			}
			ref := map[string][]float64{}
			for _, name := range names {
				if name == "count" {
					continue
				}
				y, ys, err := b.Float64(name)
				if err != nil {
					t.Fatalf("torch: %v", err)
				}
				if !slices.Equal(ys, want[name]) {
					t.Fatalf("torch: %s: shape %v, want %v", name, ys, want[name])
				}
				ref[name] = y
				if strings.HasPrefix(name, "grad.") {
					nonzero := slices.ContainsFunc(y, func(v float64) bool { return v != 0 })
					switch {
					case wantCount == 0 && nonzero:
						t.Errorf("torch: %s is not zero with no counted target", name)
					case wantCount > 0 && !nonzero:
						t.Errorf("torch: %s is all zeros: the case does not exercise it", name)
					}
					for _, v := range y {
						maxGrad = max(maxGrad, math.Abs(v))
					}
				}
			}
			if wantCount == 0 && ref["loss"][0] != 0 {
				t.Errorf("torch: loss %v with no counted target, want 0", ref["loss"][0])
			}

			for _, dtype := range []string{"float64", "float32"} {
				out := filepath.Join(ioDir, file(c)+"."+dtype+".attnlab.safetensors")
				if stderr, status := run(t, bin, "ref", "-op", "decoder", "-dtype", dtype, "-in", in, "-out", out); status != 0 {
					t.Fatalf("attnlab ref -dtype %s: exit status %d: %s", dtype, status, stderr)
				}
				a, err := safetensors.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if got := a.Names(); !slices.Equal(got, names) {
					t.Fatalf("-dtype %s: attnlab wrote %v, want %v", dtype, got, names)
				}
				if n := scalarCount(t, a, "attnlab"); n != wantCount {
					t.Errorf("-dtype %s: attnlab: count %d, want %d", dtype, n, wantCount)
				}
				dt, tol, w := safetensors.F64, decoderTol, &worst
				if dtype == "float32" {
					dt, tol, w = safetensors.F32, decoderF32Tol, &worst32
				}
				for _, name := range names {
					if name == "count" {
						continue
					}
					if d := a.Tensors[name].DType; d != dt {
						t.Errorf("-dtype %s: %s: dtype %s, want %s", dtype, name, d, dt)
					}
					x, xs, err := a.Float64(name)
					if err != nil {
						t.Fatalf("attnlab: %v", err)
					}
					if !slices.Equal(xs, want[name]) {
						t.Fatalf("-dtype %s: attnlab: %s: shape %v, want %v", dtype, name, xs, want[name])
					}
					y := ref[name]
					e, at := relErr(x, y)
					if e > tol {
						t.Errorf("-dtype %s: %s: max |a-b|/(1+|b|) = %.3g > %.0e at element %d: attnlab %v, torch %v",
							dtype, name, e, tol, at, x[at], y[at])
					}
					w.add(e, c.name, name, at, x[at], y[at])
					if dtype == "float64" {
						perKind[tensorKind(name)] = max(perKind[tensorKind(name)], e)
					}
				}
			}
		})
	}

	t.Run("bad-token-rejected", func(t *testing.T) {
		checkRejected(t, "torch_oracle.py", pyStderr, pyStatus, filepath.Join(badDir, "torch.safetensors"), `"tokens"`, "[0, 3]")
		out := filepath.Join(badDir, "attnlab.safetensors")
		stderr, status := run(t, bin, "ref", "-op", "decoder", "-in", badIn, "-out", out)
		checkRejected(t, "attnlab ref", stderr, status, out, `"tokens"`, "[0, 3]")
	})

	var per []string
	for _, k := range slices.Sorted(maps.Keys(perKind)) {
		per = append(per, fmt.Sprintf("%s %.2g", k, perKind[k]))
	}
	var models []string
	for _, dm := range decoderModels {
		c := dm.cfg
		dtype := "F64"
		if dm.f32 {
			dtype = "F32"
		}
		models = append(models, fmt.Sprintf("%s (L=%d, Dim=%d, Hq=%d, Hkv=%d, hd=%d, F=%d, V=%d, tied=%v, %s)",
			dm.name, c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.Head(), c.IntermediateSize,
			c.VocabSize, c.TieWordEmbeddings, dtype))
	}
	t.Logf("models: %s", strings.Join(models, "; "))
	measured["decoder"] = measure{len(cases), worst.err}
	t.Logf("%d cases (%d count targets), largest |gradient| %.3g", len(cases), counted, maxGrad)
	t.Logf("worst max |a-b|/(1+|b|) per tensor kind (float64): %s", strings.Join(per, ", "))
	t.Logf("worst float64: %v (tolerance %.0e)", worst, decoderTol)
	t.Logf("worst -dtype float32: %v (tolerance %.0e)", worst32, decoderF32Tol)
	t.Logf("time: %v in all, %v in the PyTorch process", time.Since(start).Round(time.Millisecond), pyTime.Round(time.Millisecond))
}

func TestRefRejectsBadDecoderInput(t *testing.T) {
	bin := buildAttnlab(t)
	shared := t.TempDir()
	dm := decoderModels[0]
	ckpt := filepath.Join(shared, "ckpt", "gqa")
	if err := os.Mkdir(filepath.Dir(ckpt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dm.save(ckpt); err != nil {
		t.Fatal(err)
	}
	V, maxPos := dm.cfg.VocabSize, dm.cfg.MaxPositionEmbeddings
	r := rand.New(rand.NewPCG(19, 23))
	base := func() *safetensors.File {
		return decoderCase{name: "base", B: 2, T: 4, tokens: randTokens(r, 8, V)}.file(ckpt)
	}
	// variant returns a copy of the checkpoint whose config.json is changed
	// by edit, or that lacks model.safetensors when edit is nil.
	variant := func(t *testing.T, edit func(cfg *model.Config)) string {
		d := filepath.Join(t.TempDir(), "ckpt")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := dm.cfg
		if edit != nil {
			edit(&cfg)
			data, err := os.ReadFile(filepath.Join(ckpt, model.WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, model.WeightsFile), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		data, err := cfg.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, model.ConfigFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	i64 := func(f *safetensors.File, name string, shape []int, x ...int64) { f.SetI64(name, shape, x) }
	tests := []struct {
		name string
		edit func(t *testing.T, f *safetensors.File)
		want []string // stderr must mention each
	}{
		// the checkpoint
		{"checkpoint-missing", func(t *testing.T, f *safetensors.File) { delete(f.Metadata, "checkpoint") },
			[]string{`"checkpoint"`, "missing"}},
		{"checkpoint-empty", func(t *testing.T, f *safetensors.File) { f.Metadata["checkpoint"] = "" },
			[]string{`"checkpoint"`}},
		{"checkpoint-no-such-dir", func(t *testing.T, f *safetensors.File) { f.Metadata["checkpoint"] = "nowhere" },
			[]string{`"checkpoint"`, "nowhere"}},
		{"checkpoint-is-a-file", func(t *testing.T, f *safetensors.File) {
			f.Metadata["checkpoint"] = filepath.Join(ckpt, model.WeightsFile)
		}, []string{`"checkpoint"`, "not a directory"}},
		{"checkpoint-without-weights", func(t *testing.T, f *safetensors.File) {
			f.Metadata["checkpoint"] = variant(t, nil)
		}, []string{`"checkpoint"`, model.WeightsFile}},
		{"checkpoint-config-vocab-mismatch", func(t *testing.T, f *safetensors.File) {
			f.Metadata["checkpoint"] = variant(t, func(c *model.Config) { c.VocabSize++ })
		}, []string{`"checkpoint"`, `"model.embed_tokens.weight"`}},
		{"checkpoint-config-tied-extra-head", func(t *testing.T, f *safetensors.File) {
			f.Metadata["checkpoint"] = variant(t, func(c *model.Config) { c.TieWordEmbeddings = true })
		}, []string{`"checkpoint"`, `"lm_head.weight"`}},
		{"checkpoint-config-kv-heads", func(t *testing.T, f *safetensors.File) {
			f.Metadata["checkpoint"] = variant(t, func(c *model.Config) { c.NumKeyValueHeads = 3 })
		}, []string{`"checkpoint"`, "num_key_value_heads"}},
		// tokens
		{"tokens-missing", func(t *testing.T, f *safetensors.File) { delete(f.Tensors, "tokens") },
			[]string{`"tokens"`, "missing"}},
		{"tokens-float", func(t *testing.T, f *safetensors.File) { f.SetF64("tokens", []int{2, 4}, make([]float64, 8)) },
			[]string{`"tokens"`, "I64"}},
		{"tokens-1d", func(t *testing.T, f *safetensors.File) { i64(f, "tokens", []int{8}, 1, 2, 3, 4, 5, 6, 7, 8) },
			[]string{`"tokens"`, "dimensions"}},
		{"tokens-empty", func(t *testing.T, f *safetensors.File) { i64(f, "tokens", []int{2, 0}) },
			[]string{`"tokens"`, "empty"}},
		{"token-outside-vocabulary", func(t *testing.T, f *safetensors.File) {
			i64(f, "tokens", []int{2, 4}, 1, 2, 3, 4, 5, 6, int64(V), 8)
		}, []string{`"tokens"`, "[1, 2]", fmt.Sprint(V), "vocab"}},
		{"token-negative", func(t *testing.T, f *safetensors.File) { i64(f, "tokens", []int{2, 4}, 1, -2, 3, 4, 5, 6, 7, 8) },
			[]string{`"tokens"`, "[0, 1]"}},
		{"positions-beyond-max", func(t *testing.T, f *safetensors.File) {
			i64(f, "tokens", []int{1, maxPos + 1}, randTokens(r, maxPos+1, V)...)
		}, []string{`"tokens"`, "max_position_embeddings", fmt.Sprint(maxPos)}},
		// targets
		{"targets-shape", func(t *testing.T, f *safetensors.File) { i64(f, "targets", []int{2, 3}, 1, 2, 3, 4, 5, 6) },
			[]string{`"targets"`, "shape"}},
		{"targets-float", func(t *testing.T, f *safetensors.File) { f.SetF64("targets", []int{2, 4}, make([]float64, 8)) },
			[]string{`"targets"`, "I64"}},
		{"target-outside-vocabulary", func(t *testing.T, f *safetensors.File) {
			i64(f, "targets", []int{2, 4}, -100, 1, 2, int64(V), 1, 2, 3, -100)
		}, []string{`"targets"`, "[0, 3]", "vocab"}},
		{"target-negative", func(t *testing.T, f *safetensors.File) { i64(f, "targets", []int{2, 4}, 1, 2, 3, -100, 1, -1, 3, -100) },
			[]string{`"targets"`, "[1, 1]"}},
		{"target-on-padding", func(t *testing.T, f *safetensors.File) {
			i64(f, "valid", []int{2, 4}, 0, 1, 1, 1, 1, 1, 1, 1)
			i64(f, "targets", []int{2, 4}, 5, 1, 2, -100, 1, 2, 3, -100)
		}, []string{`"targets"`, "[0, 0]", "padding"}},
		// valid, seg, pos
		{"valid-not-a-bit", func(t *testing.T, f *safetensors.File) { i64(f, "valid", []int{2, 4}, 1, 1, 1, 1, 0, 2, 1, 1) },
			[]string{`"valid"`, "[1, 1]"}},
		{"seg-shape", func(t *testing.T, f *safetensors.File) { i64(f, "seg", []int{4, 2}, 0, 0, 0, 0, 0, 0, 0, 0) },
			[]string{`"seg"`, "shape"}},
		{"pos-beyond-max", func(t *testing.T, f *safetensors.File) {
			i64(f, "pos", []int{2, 4}, 0, 1, 2, 3, 10, 11, 12, int64(maxPos))
		}, []string{`"pos"`, "[1, 3]", "max_position_embeddings"}},
		{"pos-negative", func(t *testing.T, f *safetensors.File) { i64(f, "pos", []int{2, 4}, 0, 1, 2, 3, -1, 0, 1, 2) },
			[]string{`"pos"`, "[1, 0]"}},
		{"pos-shape", func(t *testing.T, f *safetensors.File) { i64(f, "pos", []int{2, 5}, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4) },
			[]string{`"pos"`, "shape"}},
		// names
		{"unknown-tensor", func(t *testing.T, f *safetensors.File) { i64(f, "labels", []int{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8) },
			[]string{`"labels"`, "decoder"}},
		{"unknown-metadata", func(t *testing.T, f *safetensors.File) { f.Metadata["model"] = ckpt },
			[]string{`"model"`, "unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := base()
			tc.edit(t, f)
			in := filepath.Join(dir, "in.safetensors")
			writeInput(t, in, f)
			outDir := filepath.Join(dir, "out")
			if err := os.Mkdir(outDir, 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(outDir, "out.safetensors")
			stderr, status := run(t, bin, "ref", "-op", "decoder", "-in", in, "-out", out)
			checkRejected(t, "attnlab ref", stderr, status, out, tc.want...)
			t.Logf("stderr: %s", strings.TrimSpace(stderr))
		})
	}

	// Valid inputs are accepted: the base input, its checkpoint given
	// absolute and relative to the input file (so the rejections above are
	// the edits' doing), and rows longer than max_position_embeddings whose
	// positions, counted over real tokens and restarting per document, stay
	// below it.
	dir := filepath.Join(shared, "in")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	long := func() *decoderCase {
		return &decoderCase{B: 1, T: maxPos + 2, tokens: randTokens(r, maxPos+2, V)}
	}
	leftPad, packed := long(), long()
	leftPad.valid = make([]int64, leftPad.T)
	for i := range leftPad.valid {
		leftPad.valid[i] = int64(min(i/2, 1)) // two padding tokens first
	}
	packed.seg = make([]int64, packed.T)
	for i := range packed.seg {
		packed.seg[i] = int64(i / (packed.T / 2)) // two documents
	}
	for _, v := range []struct {
		name string
		f    *safetensors.File
	}{
		{"base, absolute checkpoint", base()},
		{"base, relative checkpoint", base()},
		{"left padding, T = max_position_embeddings + 2", leftPad.file(ckpt)},
		{"two documents, T = max_position_embeddings + 2", packed.file(ckpt)},
	} {
		if strings.Contains(v.name, "relative") {
			v.f.Metadata["checkpoint"] = filepath.Join("..", "ckpt", "gqa")
		}
		in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
		writeInput(t, in, v.f)
		if stderr, status := run(t, bin, "ref", "-op", "decoder", "-in", in, "-out", out); status != 0 {
			t.Errorf("%s: valid input rejected: exit status %d: %s", v.name, status, stderr)
		}
	}
}
