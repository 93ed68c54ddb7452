package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/lab"
)

// attnlab runs the command in-process and returns its exit status and output.
func attnlab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return attnlabCtx(t, context.Background(), args...)
}

// attnlabCtx is attnlab with a context: cancelled, it is an interrupt.
func attnlabCtx(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	progressOut = &stderr
	defer func() { progressOut = os.Stderr }()
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// interruptedContext is the context of a command that got Ctrl-C.
func interruptedContext() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(interrupted{os.Interrupt})
	return ctx
}

// The command's tests run the lab on a few operations: the whole lab runs
// once in go test ./..., in package lab's tests.
const someOps = "attention,rmsnorm"

func TestLabPassesAndWritesThePlot(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "sweep.png")
	code, out, errOut := attnlab(t, "lab", "-op", someOps, "-plot", plot)
	if code != 0 {
		t.Fatalf("lab exited %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"mask-dropped", "passes finite differences", "OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(\d+)/(\d+) checks pass.*; (\d+)/(\d+) faults caught.*; (\d+) operations`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[3] != m[4] || m[5] != "2" {
		t.Errorf("summary is not all-pass, all-caught over 2 operations: %q", m)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

func TestMaskPrintsTheSeedTable(t *testing.T) {
	code, out, _ := attnlab(t, "mask", "-past", "3", "-new", "2")
	want := `2 new after 3 cached; causal=true, convention=position; 1 = may read
       old0 old1 old2 new3 new4
new3      1    1    1    1    0
new4      1    1    1    1    1
`
	if code != 0 || out != want {
		t.Errorf("exit %d, got\n%s\nwant\n%s", code, out, want)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"mask", "-pad", "middle:2"},
		{"mask", "-segments", "0,1"},
		{"mask", "-convention", "diagonal"},
		{"gradcheck", "-hq", "3", "-hkv", "2"},
		{"ref", "-op", "attention"},
		{"lab", "extra"},
		{"lab", "-op", "nosuch"},
		{"faults", "-op", "attention,nosuch"},
		{"gradcheck", "-op", "attention", "-fault", "nosuch"},
	} {
		code, _, errOut := attnlab(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
		if errOut == "" {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}

func TestGradcheckCommand(t *testing.T) {
	code, out, errOut := attnlab(t, "gradcheck", "-hq", "2", "-hkv", "1", "-m", "2", "-n", "4", "-d", "3", "-dv", "2", "-precise")
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = attnlab(t, "gradcheck", "-dtype", "float32", "-m", "2", "-n", "4")
	if code != 0 {
		t.Fatalf("float32: exit %d\n%s", code, out)
	}
}

func TestRefRejectsBadInputWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	os.WriteFile(in, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"q\":"), 0o644) // header claims 16 bytes, has 5
	out := filepath.Join(dir, "out.safetensors")
	code, _, errOut := attnlab(t, "ref", "-op", "attention", "-in", in, "-out", out)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("exit %d, stderr %q: want 1 and one line", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written despite the error")
	}
}

func TestLabJSON(t *testing.T) {
	code, out, errOut := attnlab(t, "lab", "-op", someOps, "-json", "-plot", "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		OK  bool `json:"ok"`
		Ops []struct {
			Op     string `json:"op"`
			Faults []struct {
				CaughtBy []string `json:"caught_by"`
			} `json:"faults"`
		} `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("lab -json is not JSON: %v", err)
	}
	if !r.OK || len(r.Ops) == 0 || len(r.Ops[0].Faults) == 0 {
		t.Errorf("lab -json: ok=%v, %d ops", r.OK, len(r.Ops))
	}
}

func TestFaultsTable(t *testing.T) {
	code, out, _ := attnlab(t, "faults", "-op", someOps)
	if code != 0 || !strings.Contains(out, "mask-dropped") || !strings.Contains(out, "=== attention") || !strings.Contains(out, "=== rmsnorm") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestGradcheckOps(t *testing.T) {
	for _, op := range []string{"rope", "rmsnorm", "swiglu", "layer", "attention-layer", "block"} {
		code, out, errOut := attnlab(t, "gradcheck", "-op", op, "-precise", "-rel", "1e-8")
		if code != 0 || !strings.Contains(out, "OK") {
			t.Errorf("%s: exit %d\n%s%s", op, code, out, errOut)
		}
	}
	if code, _, _ := attnlab(t, "gradcheck", "-op", "nosuch"); code != 2 {
		t.Errorf("unknown op: exit %d, want 2", code)
	}
	if code, _, _ := attnlab(t, "gradcheck", "-op", "rope", "-d", "5"); code != 2 {
		t.Errorf("odd RoPE dimension: exit %d, want 2", code)
	}
}

// TestGradcheckPassesAtDefaults runs every op at default flags for several
// seeds: the tolerance estimated from the finite differences' own error must
// pass the correct gradients without help.
func TestGradcheckPassesAtDefaults(t *testing.T) {
	for _, op := range lab.Names() {
		for _, seed := range []string{"1", "2", "3"} {
			code, out, errOut := attnlab(t, "gradcheck", "-op", op, "-seed", seed)
			if code != 0 || !strings.Contains(out, "OK") {
				t.Errorf("gradcheck -op %s -seed %s: exit %d\n%s%s", op, seed, code, out, errOut)
			}
		}
	}
}

// TestGradcheckFailsOnEveryFault runs every registered fault that breaks
// the backward (all but the ones the registry marks invisible to finite
// differences) at default flags: the estimated tolerance must not let one
// through.
func TestGradcheckFailsOnEveryFault(t *testing.T) {
	n := 0
	for _, info := range lab.Catalog() {
		for _, f := range info.Faults {
			if f.FDBlind {
				continue
			}
			n++
			code, out, errOut := attnlab(t, "gradcheck", "-op", info.Op, "-fault", f.Name)
			if code != 1 || !strings.Contains(out, "gradcheck: ") {
				t.Errorf("gradcheck -op %s -fault %s: exit %d, want 1 and the failing element\n%s%s", info.Op, f.Name, code, out, errOut)
			}
		}
	}
	if n == 0 {
		t.Fatal("no fault to run")
	}
}

// TestGradcheckRejectsBadNumbers: tolerances and steps that are negative,
// NaN or infinite, and a shape that leaves a query row with nothing to see,
// are usage errors on one line, never a panic or a report.
func TestGradcheckRejectsBadNumbers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-rel", "-1"}, []string{"-rel -1"}},
		{[]string{"-rel", "NaN"}, []string{"-rel NaN"}},
		{[]string{"-eps", "NaN"}, []string{"-eps NaN"}},
		{[]string{"-eps", "Inf"}, []string{"-eps +Inf"}},
		{[]string{"-eps", "-1e-6"}, []string{"-eps -1e-06"}},
		{[]string{"-m", "9", "-n", "3"}, []string{"-m 9 -n 3", "query row 0", "sees no key"}},
	} {
		code, out, errOut := attnlab(t, append([]string{"gradcheck"}, tc.args...)...)
		first, _, _ := strings.Cut(errOut, "\n")
		if code != 2 || out != "" || strings.Contains(errOut, "panic") || !strings.HasPrefix(first, "attnlab gradcheck: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a usage error", tc.args, code, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(first, w) {
				t.Errorf("%v: %q does not name %q", tc.args, first, w)
			}
		}
	}
}

// tinyCorpus writes a few Go packages into a temporary folder.
func tinyCorpus(t *testing.T) string {
	dir := t.TempDir()
	for i, pkg := range []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"} {
		os.MkdirAll(filepath.Join(dir, pkg), 0o755)
		src := fmt.Sprintf("package %s\n\n// Sum%d adds.\nfunc Sum%d(a, b int) int {\n\treturn a + b + %d\n}\n", pkg, i, i, i)
		for j := range 20 {
			src += fmt.Sprintf("\nfunc f%d(x int) int {\n\tif x > %d {\n\t\treturn x - 1\n\t}\n\treturn x * 2\n}\n", j, j)
		}
		os.WriteFile(filepath.Join(dir, pkg, pkg+".go"), []byte(src), 0o644)
	}
	return dir
}

// TestTrainResumeAndGenerate runs a tiny training end to end, interrupts it
// by running only part of the steps, resumes, and generates from the result.
func TestTrainResumeAndGenerate(t *testing.T) {
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	common := []string{"-src", src, "-out", out, "-vocab", "300", "-dim", "16", "-layers", "1", "-heads", "2", "-kv-heads", "1",
		"-ffn", "32", "-window", "32", "-batch", "2", "-eval-every", "2", "-save-every", "2", "-quiet", "-val-frac", "0.3"}
	code, stdout, stderr := attnlab(t, append([]string{"train", "-steps", "4"}, common...)...)
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, f := range []string{"curves.csv", "loss.png", "checkpoint/config.json", "checkpoint/model.safetensors", "checkpoint/tokenizer.json", "checkpoint/optimizer.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(stdout, "bits/byte") {
		t.Errorf("no bits per byte in:\n%s", stdout)
	}
	// A run of 4 steps resumed at its end with -steps 4 does nothing more; the
	// exactness of resume is tested in package train.
	code, stdout, stderr = attnlab(t, append([]string{"train", "-steps", "4", "-resume"}, common...)...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = attnlab(t, "generate", "-model", filepath.Join(out, "checkpoint"), "-prompt", "func f(", "-n", "5", "-temp", "0")
	if code != 0 || !strings.HasPrefix(stdout, "func f(") {
		t.Errorf("generate: exit %d, %q %s", code, stdout, stderr)
	}
	// Bad input: an empty corpus, a window beyond the positions, a resume
	// with another model.
	for _, args := range [][]string{
		{"train", "-src", t.TempDir(), "-out", filepath.Join(t.TempDir(), "x"), "-quiet"},
		append(append([]string{"train", "-resume", "-steps", "4"}, common...), "-dim", "32"),
	} {
		if code, _, stderr := attnlab(t, args...); code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestBenchQuick(t *testing.T) {
	code, out, errOut := attnlab(t, "bench", "-max-n", "256", "-seconds", "0.01", "-torch=false", "-memory=false", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct{ Rows []struct{ Group string } }
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Rows) < 10 {
		t.Errorf("bench -json: %v, %d rows", err, len(r.Rows))
	}
}
