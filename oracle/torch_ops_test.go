package oracle_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/safetensors"
)

// torchF32Tol bounds max |a-b| / (1 + |b|) between attnlab -dtype float32
// and PyTorch in float64: a sanity check of the float32 path, not of the
// maths.
const torchF32Tol = 1e-4

// opSuites are the ops cross-checked by TestOpsAgreeWithPyTorch, with their
// case generators.
var opSuites = []struct {
	op  string
	gen func(r *rand.Rand) []opCase
}{
	{"rope", ropeCases},
	{"rmsnorm", rmsCases},
	{"swiglu", swigluCases},
	{"block", blockCases},
}

// worstErr is the largest error seen and where.
type worstErr struct {
	err           float64
	cas, tensor   string
	at            int
	attnlab, want float64
}

func (w *worstErr) add(e float64, cas, tensor string, at int, a, b float64) {
	if e >= w.err {
		*w = worstErr{e, cas, tensor, at, a, b}
	}
}

func (w worstErr) String() string {
	return fmt.Sprintf("%.3g in case %s, tensor %s, element %d (attnlab %v, torch %v)", w.err, w.cas, w.tensor, w.at, w.attnlab, w.want)
}

// tensorErr is the error of one output tensor: max |a-b|/(1+|b|), reached
// at element at, where attnlab has x and torch y.
type tensorErr struct {
	err, x, y float64
	at        int
}

// compareOutputs checks that the files a (attnlab) and b (torch) hold exactly
// the tensors of c.out with their shapes, a of dtype dt, and returns the
// error of every tensor of a against b.
func compareOutputs(t *testing.T, c opCase, a, b *safetensors.File, dt safetensors.DType) map[string]tensorErr {
	t.Helper()
	want := slices.Sorted(maps.Keys(c.out))
	if got := a.Names(); !slices.Equal(got, want) {
		t.Fatalf("attnlab wrote %v, want %v", got, want)
	}
	if got := b.Names(); !slices.Equal(got, want) {
		t.Fatalf("torch wrote %v, want %v", got, want)
	}
	res := map[string]tensorErr{}
	for _, name := range want {
		if d := a.Tensors[name].DType; d != dt {
			t.Errorf("%s: attnlab wrote dtype %s, want %s", name, d, dt)
		}
		x, xs, err := a.Float64(name)
		if err != nil {
			t.Fatalf("attnlab: %v", err)
		}
		y, ys, err := b.Float64(name)
		if err != nil {
			t.Fatalf("torch: %v", err)
		}
		if !slices.Equal(xs, c.out[name]) || !slices.Equal(ys, c.out[name]) {
			t.Fatalf("%s: shapes attnlab %v, torch %v, want %v", name, xs, ys, c.out[name])
		}
		e, at := relErr(x, y)
		res[name] = tensorErr{e, x[at], y[at], at}
	}
	return res
}

func TestOpsAgreeWithPyTorch(t *testing.T) {
	start := time.Now()
	if err := exec.Command(torchPython, "-c", "import torch").Run(); err != nil {
		t.Skipf("PyTorch cross-check skipped: %s cannot import torch (apt-get install python3-torch): %v", torchPython, err)
	}
	bin := buildAttnlab(t)
	script := filepath.Join(moduleRoot(t), "python", "torch_oracle.py")
	r := rand.New(rand.NewPCG(2025, 4))
	var summary []string
	total := 0
	for _, suite := range opSuites {
		t.Run(suite.op, func(t *testing.T) {
			opStart := time.Now()
			dir := t.TempDir()
			cases := suite.gen(r)
			if len(cases) < 6 {
				t.Fatalf("only %d cases", len(cases))
			}
			total += len(cases)
			// One Python process serves every case of the op.
			args := []string{script, suite.op}
			for _, c := range cases {
				in := filepath.Join(dir, c.name+".in.safetensors")
				writeInput(t, in, c.in)
				args = append(args, in, filepath.Join(dir, c.name+".torch.safetensors"))
			}
			pyStart := time.Now()
			if stderr, status := run(t, torchPython, args...); status != 0 {
				t.Errorf("torch_oracle.py %s: exit status %d: %s", suite.op, status, stderr)
			}
			pyTime := time.Since(pyStart)

			var worst, worst32 worstErr
			perTensor := map[string]float64{}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					in := filepath.Join(dir, c.name+".in.safetensors")
					b, err := safetensors.ReadFile(filepath.Join(dir, c.name+".torch.safetensors"))
					if errors.Is(err, os.ErrNotExist) {
						t.Fatal("torch_oracle.py wrote no output for this case (see its error above)")
					} else if err != nil {
						t.Fatal(err)
					}
					for _, dtype := range []string{"float64", "float32"} {
						out := filepath.Join(dir, c.name+"."+dtype+".attnlab.safetensors")
						if stderr, status := run(t, bin, "ref", "-op", suite.op, "-dtype", dtype, "-in", in, "-out", out); status != 0 {
							t.Fatalf("attnlab ref -dtype %s: exit status %d: %s", dtype, status, stderr)
						}
						a, err := safetensors.ReadFile(out)
						if err != nil {
							t.Fatal(err)
						}
						dt, tol, w := safetensors.F64, torchTol, &worst
						if dtype == "float32" {
							dt, tol, w = safetensors.F32, torchF32Tol, &worst32
						}
						for name, e := range compareOutputs(t, c, a, b, dt) {
							if e.err > tol {
								t.Errorf("-dtype %s: %s: max |a-b|/(1+|b|) = %.3g > %.0e at element %d: attnlab %v, torch %v",
									dtype, name, e.err, tol, e.at, e.x, e.y)
							}
							w.add(e.err, c.name, name, e.at, e.x, e.y)
							if dtype == "float64" {
								perTensor[name] = max(perTensor[name], e.err)
							}
						}
					}
				})
			}
			var per []string
			for _, name := range slices.Sorted(maps.Keys(perTensor)) {
				per = append(per, fmt.Sprintf("%s %.2g", name, perTensor[name]))
			}
			t.Logf("%d cases; worst per tensor (float64): %s", len(cases), strings.Join(per, ", "))
			t.Logf("worst float64: %v (tolerance %.0e)", worst, torchTol)
			t.Logf("worst -dtype float32: %v (tolerance %.0e)", worst32, torchF32Tol)
			t.Logf("time: %v, %v in the PyTorch process", time.Since(opStart).Round(time.Millisecond), pyTime.Round(time.Millisecond))
			summary = append(summary, fmt.Sprintf("%s %.2g (%d cases)", suite.op, worst.err, len(cases)))
			measured[suite.op] = measure{len(cases), worst.err}
		})
	}
	t.Logf("worst max |a-b|/(1+|b|) per op, float64: %s", strings.Join(summary, ", "))
	t.Logf("%d cases in %v", total, time.Since(start).Round(time.Millisecond))
}

func TestRefRejectsBadOpInput(t *testing.T) {
	bin := buildAttnlab(t)
	r := rand.New(rand.NewPCG(13, 17))
	rope := func() *safetensors.File {
		return ropeSpec{B: 2, H: 2, T: 3, D: 4, pos: []int64{0, 1, 2, 5, 6, 7}}.file(r, "rope").in
	}
	rms := func() *safetensors.File { return rmsSpec{shape: []int{3, 4}, xScale: 1}.file(r, "rms").in }
	swiglu := func() *safetensors.File { return swigluSpec{xShape: []int{3, 4}, F: 6, xScale: 1}.file(r, "swiglu").in }
	block := func() *safetensors.File {
		return blockSpec{B: 2, T: 3, Dim: 8, F: 6, Hq: 4, Hkv: 2}.file(r, "block").in
	}
	type edit = func(f *safetensors.File)
	tests := []struct {
		name, op string
		base     func() *safetensors.File
		edit     edit
		want     []string // stderr must mention each
	}{
		// rope
		{"rope/odd-head-dim", "rope", rope, func(f *safetensors.File) {
			f.SetF64("x", []int{2, 2, 3, 5}, normals(r, 60))
			delete(f.Tensors, "dy")
		}, []string{`"x"`, "odd"}},
		{"rope/x-3d", "rope", rope, func(f *safetensors.File) {
			f.SetF64("x", []int{2, 3, 4}, normals(r, 24))
		}, []string{`"x"`, "dimensions"}},
		{"rope/missing-x", "rope", rope, func(f *safetensors.File) { delete(f.Tensors, "x") }, []string{`"x"`, "missing"}},
		{"rope/negative-pos", "rope", rope, func(f *safetensors.File) {
			f.SetI64("pos", []int{2, 3}, []int64{0, 1, 2, 3, -4, 5})
		}, []string{`"pos"`, "negative"}},
		{"rope/pos-shape", "rope", rope, func(f *safetensors.File) {
			f.SetI64("pos", []int{2, 4}, make([]int64, 8))
		}, []string{`"pos"`, "shape"}},
		{"rope/pos-float", "rope", rope, func(f *safetensors.File) {
			f.SetF64("pos", []int{2, 3}, make([]float64, 6))
		}, []string{`"pos"`, "I64"}},
		{"rope/dy-shape", "rope", rope, func(f *safetensors.File) {
			f.SetF64("dy", []int{2, 2, 3, 2}, normals(r, 24))
		}, []string{`"dy"`, "shape"}},
		{"rope/unknown-pairing", "rope", rope, func(f *safetensors.File) { f.Metadata["pairing"] = "gptj" }, []string{`"pairing"`}},
		{"rope/unknown-scaling", "rope", rope, func(f *safetensors.File) {
			f.Metadata["scaling"], f.Metadata["factor"] = "yarn", "2"
		}, []string{`"scaling"`}},
		{"rope/factor-below-1", "rope", rope, func(f *safetensors.File) {
			f.Metadata["scaling"], f.Metadata["factor"] = "linear", "0.5"
		}, []string{`"factor"`}},
		{"rope/scaling-without-factor", "rope", rope, func(f *safetensors.File) { f.Metadata["scaling"] = "ntk" }, []string{`"factor"`, "missing"}},
		{"rope/factor-without-scaling", "rope", rope, func(f *safetensors.File) { f.Metadata["factor"] = "2" }, []string{`"factor"`}},
		{"rope/ntk-d2", "rope", rope, func(f *safetensors.File) {
			f.SetF64("x", []int{2, 2, 3, 2}, normals(r, 24))
			delete(f.Tensors, "dy")
			f.Metadata["scaling"], f.Metadata["factor"] = "ntk", "2"
		}, []string{`"scaling"`}},
		{"rope/base-zero", "rope", rope, func(f *safetensors.File) { f.Metadata["base"] = "0" }, []string{`"base"`}},
		{"rope/base-nan", "rope", rope, func(f *safetensors.File) { f.Metadata["base"] = "NaN" }, []string{`"base"`}},
		{"rope/unknown-key", "rope", rope, func(f *safetensors.File) { f.Metadata["theta"] = "10000" }, []string{`"theta"`, "unknown"}},
		{"rope/unknown-tensor", "rope", rope, func(f *safetensors.File) {
			f.SetF64("dY", []int{1}, []float64{1})
		}, []string{`"dY"`}},
		// rmsnorm
		{"rmsnorm/w-shape", "rmsnorm", rms, func(f *safetensors.File) {
			f.SetF64("w", []int{5}, normals(r, 5))
		}, []string{`"w"`, "shape"}},
		{"rmsnorm/missing-w", "rmsnorm", rms, func(f *safetensors.File) { delete(f.Tensors, "w") }, []string{`"w"`, "missing"}},
		{"rmsnorm/w-integer", "rmsnorm", rms, func(f *safetensors.File) {
			f.SetI64("w", []int{4}, []int64{1, 1, 1, 1})
		}, []string{`"w"`, "I64"}},
		{"rmsnorm/eps-negative", "rmsnorm", rms, func(f *safetensors.File) { f.Metadata["eps"] = "-1e-6" }, []string{`"eps"`}},
		{"rmsnorm/eps-nan", "rmsnorm", rms, func(f *safetensors.File) { f.Metadata["eps"] = "nan" }, []string{`"eps"`}},
		{"rmsnorm/eps-not-a-number", "rmsnorm", rms, func(f *safetensors.File) { f.Metadata["eps"] = "small" }, []string{`"eps"`}},
		{"rmsnorm/zero-row-eps0", "rmsnorm", rms, func(f *safetensors.File) {
			x := normals(r, 12)
			clear(x[4:8])
			f.SetF64("x", []int{3, 4}, x)
			f.Metadata["eps"] = "0"
		}, []string{`"x"`, "row 1"}},
		{"rmsnorm/dy-shape", "rmsnorm", rms, func(f *safetensors.File) {
			f.SetF64("dy", []int{4, 3}, normals(r, 12))
		}, []string{`"dy"`}},
		{"rmsnorm/x-empty", "rmsnorm", rms, func(f *safetensors.File) {
			f.SetF64("x", []int{0, 4}, nil)
		}, []string{`"x"`, "empty"}},
		// swiglu
		{"swiglu/gate-width", "swiglu", swiglu, func(f *safetensors.File) {
			f.SetF64("gate_proj", []int{6, 5}, normals(r, 30))
		}, []string{`"gate_proj"`}},
		{"swiglu/gate-1d", "swiglu", swiglu, func(f *safetensors.File) {
			f.SetF64("gate_proj", []int{24}, normals(r, 24))
		}, []string{`"gate_proj"`}},
		{"swiglu/up-shape", "swiglu", swiglu, func(f *safetensors.File) {
			f.SetF64("up_proj", []int{7, 4}, normals(r, 28))
		}, []string{`"up_proj"`}},
		{"swiglu/down-not-transposed", "swiglu", swiglu, func(f *safetensors.File) {
			f.SetF64("down_proj", []int{6, 4}, normals(r, 24))
		}, []string{`"down_proj"`}},
		{"swiglu/missing-down", "swiglu", swiglu, func(f *safetensors.File) { delete(f.Tensors, "down_proj") }, []string{`"down_proj"`, "missing"}},
		{"swiglu/hf-name", "swiglu", swiglu, func(f *safetensors.File) {
			f.Tensors["mlp.up_proj.weight"] = f.Tensors["up_proj"]
			delete(f.Tensors, "up_proj")
		}, []string{`"mlp.up_proj.weight"`}},
		{"swiglu/metadata", "swiglu", swiglu, func(f *safetensors.File) { f.Metadata["act"] = "gelu" }, []string{`"act"`}},
		// block
		{"block/missing-weight", "block", block, func(f *safetensors.File) {
			delete(f.Tensors, "self_attn.v_proj.weight")
		}, []string{`"self_attn.v_proj.weight"`, "missing"}},
		{"block/prefixed-name", "block", block, func(f *safetensors.File) {
			f.Tensors["model.layers.0.input_layernorm.weight"] = f.Tensors["input_layernorm.weight"]
			delete(f.Tensors, "input_layernorm.weight")
		}, []string{`"model.layers.0.input_layernorm.weight"`}},
		{"block/kv-heads-not-dividing", "block", block, func(f *safetensors.File) {
			f.Metadata["num_key_value_heads"] = "3"
		}, []string{`"num_key_value_heads"`, "divide"}},
		{"block/missing-heads", "block", block, func(f *safetensors.File) {
			delete(f.Metadata, "num_attention_heads")
		}, []string{`"num_attention_heads"`, "missing"}},
		{"block/heads-not-dividing-dim", "block", block, func(f *safetensors.File) {
			f.Metadata["num_attention_heads"], f.Metadata["num_key_value_heads"] = "3", "1"
		}, []string{`"num_attention_heads"`, "divide"}},
		{"block/odd-head-dim", "block", block, func(f *safetensors.File) { f.Metadata["head_dim"] = "3" }, []string{`"head_dim"`, "odd"}},
		{"block/odd-default-head-dim", "block", block, func(f *safetensors.File) {
			f.Metadata["num_attention_heads"], f.Metadata["num_key_value_heads"] = "8", "8"
		}, []string{`"head_dim"`, "odd"}},
		{"block/q-proj-shape", "block", block, func(f *safetensors.File) {
			f.SetF64("self_attn.q_proj.weight", []int{8, 7}, normals(r, 56))
		}, []string{`"self_attn.q_proj.weight"`}},
		{"block/k-proj-full-heads", "block", block, func(f *safetensors.File) {
			f.SetF64("self_attn.k_proj.weight", []int{8, 8}, normals(r, 64))
		}, []string{`"self_attn.k_proj.weight"`, "num_key_value_heads"}},
		{"block/o-proj-shape", "block", block, func(f *safetensors.File) {
			f.SetF64("self_attn.o_proj.weight", []int{8, 4}, normals(r, 32))
		}, []string{`"self_attn.o_proj.weight"`}},
		{"block/norm-shape", "block", block, func(f *safetensors.File) {
			f.SetF64("post_attention_layernorm.weight", []int{1, 8}, normals(r, 8))
		}, []string{`"post_attention_layernorm.weight"`}},
		{"block/up-differs-from-gate", "block", block, func(f *safetensors.File) {
			f.SetF64("mlp.up_proj.weight", []int{5, 8}, normals(r, 40))
		}, []string{`"mlp.up_proj.weight"`}},
		{"block/down-shape", "block", block, func(f *safetensors.File) {
			f.SetF64("mlp.down_proj.weight", []int{6, 8}, normals(r, 48))
		}, []string{`"mlp.down_proj.weight"`}},
		{"block/x-4d", "block", block, func(f *safetensors.File) {
			f.SetF64("x", []int{2, 3, 2, 4}, normals(r, 48))
		}, []string{`"x"`}},
		{"block/dy-shape", "block", block, func(f *safetensors.File) {
			f.SetF64("dy", []int{2, 2, 8}, normals(r, 32))
		}, []string{`"dy"`}},
		{"block/negative-pos", "block", block, func(f *safetensors.File) {
			f.SetI64("pos", []int{2, 3}, []int64{0, 1, 2, -1, 0, 1})
		}, []string{`"pos"`, "negative"}},
		{"block/valid-not-a-bit", "block", block, func(f *safetensors.File) {
			f.SetI64("valid", []int{2, 3}, []int64{1, 1, 1, 0, 2, 1})
		}, []string{`"valid"`}},
		{"block/seg-shape", "block", block, func(f *safetensors.File) {
			f.SetI64("seg", []int{3, 2}, make([]int64, 6))
		}, []string{`"seg"`, "shape"}},
		{"block/eps-negative", "block", block, func(f *safetensors.File) { f.Metadata["rms_norm_eps"] = "-1e-5" }, []string{`"rms_norm_eps"`}},
		{"block/theta-zero", "block", block, func(f *safetensors.File) { f.Metadata["rope_theta"] = "0" }, []string{`"rope_theta"`}},
		{"block/window-negative", "block", block, func(f *safetensors.File) { f.Metadata["window"] = "-2" }, []string{`"window"`}},
		{"block/causal-maybe", "block", block, func(f *safetensors.File) { f.Metadata["causal"] = "maybe" }, []string{`"causal"`}},
		{"block/unknown-key", "block", block, func(f *safetensors.File) { f.Metadata["hidden_act"] = "silu" }, []string{`"hidden_act"`, "unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := tc.base()
			tc.edit(f)
			in := filepath.Join(dir, "in.safetensors")
			writeInput(t, in, f)
			outDir := filepath.Join(dir, "out")
			if err := os.Mkdir(outDir, 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(outDir, "out.safetensors")
			stderr, status := run(t, bin, "ref", "-op", tc.op, "-in", in, "-out", out)
			checkRejected(t, "attnlab ref", stderr, status, out, tc.want...)
			t.Logf("stderr: %s", strings.TrimSpace(stderr))
		})
	}

	// Each base input is valid: the rejections above are the edits' doing.
	for _, op := range []struct {
		name string
		base func() *safetensors.File
	}{{"rope", rope}, {"rmsnorm", rms}, {"swiglu", swiglu}, {"block", block}} {
		dir := t.TempDir()
		in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
		writeInput(t, in, op.base())
		if stderr, status := run(t, bin, "ref", "-op", op.name, "-in", in, "-out", out); status != 0 {
			t.Errorf("%s: valid base input rejected: exit status %d: %s", op.name, status, stderr)
		}
	}
}
