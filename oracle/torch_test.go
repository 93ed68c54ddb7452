package oracle_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/safetensors"
)

// torchPython is the interpreter that has PyTorch (Debian's python3-torch).
const torchPython = "/usr/bin/python3"

// torchTol bounds max |a-b| / (1 + |b|) between attnlab and PyTorch, both
// in float64.
const torchTol = 1e-10

// moduleRoot returns the root of the attnlab module.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildAttnlab builds the attnlab command into a temporary directory and
// returns the path of the binary.
func buildAttnlab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "attnlab")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/attnlab/attnlab/cmd/attnlab")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build attnlab: %v\n%s", err, out)
	}
	touchSources(t, cmd.Dir)
	return bin
}

// touchSources reads every Go source file and Python script of the module.
// The go command caches test results by the files a test opens; the binary
// built above reads them in another process, so reading them here is what
// makes an edit anywhere in the module invalidate a cached pass.
func touchSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".go" || ext == ".py" || ext == ".s") {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("reading the module's sources: %v", err)
	}
}

// run runs name with args and returns its stderr and exit status; a command
// that cannot be started is fatal.
func run(t *testing.T, name string, args ...string) (stderr string, status int) {
	t.Helper()
	var eb bytes.Buffer
	if len(args) > 0 && args[0] == "ref" {
		// the cases reuse their output files: attnlab ref refuses to
		// replace one without -force
		args = append([]string{"ref", "-force"}, args[1:]...)
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = &eb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return eb.String(), 0
	case errors.As(err, &ee):
		return eb.String(), ee.ExitCode()
	}
	t.Fatalf("%s: %v", name, err)
	return "", 0
}

// checkRejected checks the contract for bad input (DESIGN §8): exit status 1,
// one line on stderr holding every string of want, and no output file.
func checkRejected(t *testing.T, who, stderr string, status int, out string, want ...string) {
	t.Helper()
	if status != 1 {
		t.Errorf("%s: exit status %d, want 1 (stderr %q)", who, status, stderr)
	}
	line := strings.TrimSuffix(stderr, "\n")
	if line == "" || strings.Contains(line, "\n") {
		t.Errorf("%s: stderr is not one line: %q", who, stderr)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("%s: stderr %q does not mention %q", who, line, w)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: output file %s exists after an error (stat: %v)", who, filepath.Base(out), err)
	}
	if ents, err := os.ReadDir(filepath.Dir(out)); err != nil || len(ents) != 0 {
		t.Errorf("%s: output directory not empty after an error: %v %v", who, ents, err)
	}
}

func writeInput(t *testing.T, path string, f *safetensors.File) {
	t.Helper()
	if err := safetensors.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
}

// emptyRowCase is a valid-looking input in which query row 2 of batch item 1
// belongs to a document (segment 7) that has no key: both oracles must
// reject it, naming batch and row.
func emptyRowCase(r *rand.Rand) *safetensors.File {
	c := attnCase{name: "empty-row", B: 2, Hq: 2, Hkv: 1, M: 4, N: 4, D: 3, Dv: 2, causal: true}
	c.qSeg = []int64{0, 0, 1, 1, 0, 0, 7, 1}
	c.kSeg = []int64{0, 0, 1, 1, 0, 0, 1, 1}
	return c.file(r)
}

func TestAttentionAgreesWithPyTorch(t *testing.T) {
	start := time.Now()
	if err := exec.Command(torchPython, "-c", "import torch").Run(); err != nil {
		t.Skipf("PyTorch cross-check skipped: %s cannot import torch (apt-get install python3-torch): %v", torchPython, err)
	}
	bin := buildAttnlab(t)
	script := filepath.Join(moduleRoot(t), "python", "torch_oracle.py")
	dir := t.TempDir()

	cases := torchCases()
	if len(cases) < 24 {
		t.Fatalf("only %d cases", len(cases))
	}
	r := rand.New(rand.NewPCG(7, 11))
	args := []string{script, "attention"}
	padRows := 0
	for _, c := range cases {
		n, err := c.check()
		if err != nil {
			t.Fatalf("case %s: generator bug: %v", c.name, err)
		}
		padRows += n
		in := filepath.Join(dir, c.name+".in.safetensors")
		writeInput(t, in, c.file(r))
		args = append(args, in, filepath.Join(dir, c.name+".torch.safetensors"))
	}
	if padRows == 0 {
		t.Fatal("no case has a padding query row")
	}

	// One Python process serves every case. It stops at the first input it
	// rejects, so the empty-row input goes last: every earlier output must be
	// written, and the error must name that input, its batch item and row.
	emptyDir := filepath.Join(dir, "empty-out")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	emptyIn := filepath.Join(dir, "empty-row.in.safetensors")
	writeInput(t, emptyIn, emptyRowCase(r))
	args = append(args, emptyIn, filepath.Join(emptyDir, "torch.safetensors"))
	pyStart := time.Now()
	pyStderr, pyStatus := run(t, torchPython, args...)
	pyTime := time.Since(pyStart)
	if pyStatus != 1 || !strings.Contains(pyStderr, emptyIn) {
		// The cases after a failing one have no output and fail below.
		t.Errorf("torch_oracle.py: exit status %d, want 1 for the last input only; stderr:\n%s", pyStatus, pyStderr)
	}

	type worst struct {
		err          float64
		cas, tensor  string
		at           int
		attnlab, ref float64
	}
	var all worst
	var plainWorst, variantsWorst float64 // for the README's table
	perTensor := map[string]float64{}
	names := []string{"o", "lse", "dq", "dk", "dv"}
	variants := 0
	for _, c := range cases {
		if c.softcap != 0 || c.sinks != nil || c.slopes != nil {
			variants++
		}
		t.Run(c.name, func(t *testing.T) {
			outA := filepath.Join(dir, c.name+".attnlab.safetensors")
			in := filepath.Join(dir, c.name+".in.safetensors")
			if stderr, status := run(t, bin, "ref", "-op", "attention", "-in", in, "-out", outA); status != 0 {
				t.Fatalf("attnlab ref: exit status %d: %s", status, stderr)
			}
			a, err := safetensors.ReadFile(outA)
			if err != nil {
				t.Fatal(err)
			}
			b, err := safetensors.ReadFile(filepath.Join(dir, c.name+".torch.safetensors"))
			if errors.Is(err, os.ErrNotExist) {
				t.Fatal("torch_oracle.py wrote no output for this case (see its error above)")
			} else if err != nil {
				t.Fatal(err)
			}
			shapes := map[string][]int{
				"o": {c.B, c.Hq, c.M, c.Dv}, "lse": {c.B, c.Hq, c.M},
				"dq": {c.B, c.Hq, c.M, c.D}, "dk": {c.B, c.Hkv, c.N, c.D}, "dv": {c.B, c.Hkv, c.N, c.Dv},
				"dsinks": {c.Hq},
			}
			names := names
			if c.sinks != nil {
				names = append(names[:len(names):len(names)], "dsinks")
			}
			for _, name := range names {
				x, xs, err := a.Float64(name)
				if err != nil {
					t.Fatalf("attnlab: %v", err)
				}
				y, ys, err := b.Float64(name)
				if err != nil {
					t.Fatalf("torch: %v", err)
				}
				if !slices.Equal(xs, shapes[name]) || !slices.Equal(ys, shapes[name]) {
					t.Fatalf("%s: shapes attnlab %v, torch %v, want %v", name, xs, ys, shapes[name])
				}
				e, at := relErr(x, y)
				if e > torchTol {
					t.Errorf("%s: max |a-b|/(1+|b|) = %.3g > %.0e at element %d: attnlab %v, torch %v",
						name, e, torchTol, at, x[at], y[at])
				}
				perTensor[name] = max(perTensor[name], e)
				if c.softcap != 0 || c.sinks != nil || c.slopes != nil {
					variantsWorst = max(variantsWorst, e)
				} else {
					plainWorst = max(plainWorst, e)
				}
				if e >= all.err {
					all = worst{e, c.name, name, at, x[at], y[at]}
				}
			}
		})
	}

	t.Run("empty-row-rejected", func(t *testing.T) {
		checkRejected(t, "torch_oracle.py", pyStderr, pyStatus,
			filepath.Join(emptyDir, "torch.safetensors"), "batch 1", "row 2")
		out := filepath.Join(emptyDir, "attnlab.safetensors")
		stderr, status := run(t, bin, "ref", "-op", "attention", "-in", emptyIn, "-out", out)
		checkRejected(t, "attnlab ref", stderr, status, out, "batch 1", "row 2")
	})

	var per []string
	for _, name := range append(names, "dsinks") {
		per = append(per, fmt.Sprintf("%s %.2g", name, perTensor[name]))
	}
	if variants == 0 {
		t.Error("no case has softcap, ALiBi or sinks")
	}
	measured["attention"] = measure{len(cases) - variants, plainWorst}
	measured["attention-variants"] = measure{variants, variantsWorst}
	t.Logf("%d cases (%d padding query rows, %d with softcap, ALiBi or sinks), tolerance %.0e on max |a-b|/(1+|b|)", len(cases), padRows, variants, torchTol)
	t.Logf("worst per tensor: %s", strings.Join(per, ", "))
	t.Logf("worst overall: %.3g in case %s, tensor %s, element %d (attnlab %v, torch %v)",
		all.err, all.cas, all.tensor, all.at, all.attnlab, all.ref)
	t.Logf("time: %v in all, %v in the PyTorch process", time.Since(start).Round(time.Millisecond), pyTime.Round(time.Millisecond))
}

// refInput returns a valid attention input: B=2, Hq=4, Hkv=2, M=3, N=5,
// D=4, Dv=3, causal.
func refInput(r *rand.Rand) *safetensors.File {
	c := attnCase{B: 2, Hq: 4, Hkv: 2, M: 3, N: 5, D: 4, Dv: 3, causal: true}
	return c.file(r)
}

// normals returns n standard normal numbers.
func normals(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

func TestRefRejectsBadInput(t *testing.T) {
	bin := buildAttnlab(t)
	r := rand.New(rand.NewPCG(3, 5))
	tests := []struct {
		name   string
		op     string                    // "" means attention
		edit   func(f *safetensors.File) // changes a valid input
		damage func(data []byte) []byte  // changes the encoded file
		want   []string                  // stderr must mention each
	}{
		{name: "k-head-dim", want: []string{`"k"`}, edit: func(f *safetensors.File) {
			f.SetF64("k", []int{2, 2, 5, 5}, normals(r, 2*2*5*5))
		}},
		{name: "heads-not-divisible", want: []string{`"k"`, "heads"}, edit: func(f *safetensors.File) {
			f.SetF64("q", []int{2, 3, 3, 4}, normals(r, 2*3*3*4))
			f.SetF64("do", []int{2, 3, 3, 3}, normals(r, 2*3*3*3))
		}},
		{name: "q_pos-shape", want: []string{`"q_pos"`, "shape"}, edit: func(f *safetensors.File) {
			f.SetI64("q_pos", []int{2, 4}, make([]int64, 8))
		}},
		{name: "truncated-file", want: []string{"in.safetensors", `"v"`}, damage: func(data []byte) []byte {
			return data[:len(data)-13]
		}},
		{name: "q-integer-dtype", want: []string{`"q"`, "I64"}, edit: func(f *safetensors.File) {
			f.SetI64("q", []int{2, 4, 3, 4}, make([]int64, 2*4*3*4))
		}},
		{name: "missing-v", want: []string{`"v"`, "missing"}, edit: func(f *safetensors.File) {
			delete(f.Tensors, "v")
		}},
		{name: "v-rows", want: []string{`"v"`}, edit: func(f *safetensors.File) {
			f.SetF64("v", []int{2, 2, 4, 3}, normals(r, 2*2*4*3))
		}},
		{name: "do-shape", want: []string{`"do"`}, edit: func(f *safetensors.File) {
			f.SetF64("do", []int{2, 4, 3, 2}, normals(r, 2*4*3*2))
		}},
		{name: "k_valid-not-a-bit", want: []string{`"k_valid"`}, edit: func(f *safetensors.File) {
			f.SetI64("k_valid", []int{2, 5}, []int64{1, 1, 1, 1, 1, 1, 2, 1, 1, 1})
		}},
		{name: "q_seg-without-k_seg", want: []string{"q_seg", "k_seg"}, edit: func(f *safetensors.File) {
			f.SetI64("q_seg", []int{2, 3}, make([]int64, 6))
		}},
		{name: "unknown-convention", want: []string{`"convention"`}, edit: func(f *safetensors.File) {
			f.Metadata["convention"] = "bottom-left"
		}},
		{name: "empty-row-all-keys-padding", want: []string{"batch 1", "row 0"}, edit: func(f *safetensors.File) {
			f.SetI64("k_valid", []int{2, 5}, []int64{1, 1, 1, 1, 1, 0, 0, 0, 0, 0})
		}},
		{name: "empty-row-bottom-right-more-queries-than-keys", want: []string{"batch 0", "row 0"}, edit: func(f *safetensors.File) {
			f.SetF64("k", []int{2, 2, 2, 4}, normals(r, 2*2*2*4))
			f.SetF64("v", []int{2, 2, 2, 3}, normals(r, 2*2*2*3))
			f.Metadata["convention"] = "bottom-right"
		}},
		{name: "empty-row-window", want: []string{"batch 0", "row 0"}, edit: func(f *safetensors.File) {
			f.SetI64("q_pos", []int{2, 3}, []int64{100, 101, 102, 100, 101, 102})
			f.Metadata["window"] = "3"
		}},
	}
	t.Run("unknown-op", func(t *testing.T) {
		// a usage error: exit 2, the flag named, the usage pointed to
		dir := t.TempDir()
		in := filepath.Join(dir, "in.safetensors")
		writeInput(t, in, refInput(r))
		out := filepath.Join(dir, "out.safetensors")
		stderr, status := run(t, bin, "ref", "-op", "attn", "-in", in, "-out", out)
		first, _, _ := strings.Cut(stderr, "\n")
		if status != 2 || !strings.Contains(first, `-op "attn": want one of attention,`) {
			t.Errorf("attnlab ref -op attn: exit %d, stderr %q", status, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a usage error wrote %s", out)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := refInput(r)
			if tc.edit != nil {
				tc.edit(f)
			}
			data, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				data = tc.damage(data)
			}
			in := filepath.Join(dir, "in.safetensors")
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			outDir := filepath.Join(dir, "out")
			if err := os.Mkdir(outDir, 0o755); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(outDir, "out.safetensors")
			op := tc.op
			if op == "" {
				op = "attention"
			}
			stderr, status := run(t, bin, "ref", "-op", op, "-in", in, "-out", out)
			checkRejected(t, "attnlab ref", stderr, status, out, tc.want...)
			t.Logf("stderr: %s", strings.TrimSpace(stderr))
		})
	}
}
