// Tests of the adapters that are Go modules of their own (adapters/gomlx,
// adapters/spago): each is started by name, as attnlab conform -exec NAME
// starts it (built from its module with go build), and skipped with the
// reason when Go or the module cache cannot build it.

package adapters_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

// startShipped starts the shipped adapter name, skipping when it cannot
// run here.
func startShipped(t *testing.T, name string) *conform.Adapter {
	t.Helper()
	s, ok := adapters.Lookup(name)
	if !ok {
		t.Fatalf("no shipped adapter %q", name)
	}
	if why := s.Missing(); why != "" {
		t.Skipf("%s skipped: %s", name, why)
	}
	return start(t, name)
}

// withScale is r with an explicit scale, for the reference.
func withScale(r *conform.Request, scale float64) *conform.Request {
	x := *r
	x.Scale = scale
	return &x
}

// differs reports whether got and want differ beyond the dtype's
// tolerance somewhere.
func differs(r *conform.Request, got, want []float64) bool {
	for i := range got {
		if math.Abs(got[i]-want[i]) > 100*tolerance(r.DType)*max(1, math.Abs(want[i])) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------- GoMLX

func TestGoMLXMultiHeadAttention(t *testing.T) {
	a := startShipped(t, "gomlx-mha")
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"causal", "validity"}, KVCache: true})
	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			for _, c := range []struct {
				name string
				s    shape
				set  func(r *conform.Request)
			}{
				{"causal M==N", shape{2, 2, 2, 5, 5, 4, 4}, func(r *conform.Request) { r.Causal = true }},
				{"M<N no mask", shape{1, 3, 3, 2, 6, 4, 4}, nil},
				{"Dv > D", shape{1, 2, 2, 3, 5, 3, 7}, nil},
				{"Dv < D, causal", shape{1, 2, 2, 4, 4, 4, 2}, func(r *conform.Request) { r.Causal = true }},
				{"padding", shape{2, 2, 2, 4, 6, 4, 4}, func(r *conform.Request) {
					r.QValid, r.KValid = []int64{0, 1, 1, 1, 1, 1, 1, 0}, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
				}},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := newRequest(uint64(40+len(c.name)), c.s, dtype, true)
					if c.set != nil {
						c.set(r)
					}
					got := call(t, a, r)
					// the layer's logits are q·k / D (its scale applied twice)
					compare(t, r, got, reference(t, withScale(r, 1/float64(r.D))))
					if !differs(r, got.O, reference(t, withScale(r, 1/math.Sqrt(float64(r.D)))).O) {
						t.Errorf("the answer equals the one at scale 1/√D: the double scaling is gone, update the card and the finding")
					}
				})
			}
			// UseCausalMask wants M == N: GoMLX panics, the adapter answers
			// an error response and serves the next request
			r := newRequest(50, shape{1, 2, 2, 3, 7, 4, 4}, dtype, false)
			r.Causal = true
			resp, err := a.Attention(r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resp.Err, "UseCausalMask") || strings.Contains(resp.Err, "\n") {
				t.Errorf("causal M=3, N=7: error %q, want GoMLX's UseCausalMask refusal, one line", resp.Err)
			}
			t.Logf("causal M=3, N=7: error response %q", resp.Err)
			good := newRequest(51, shape{1, 2, 2, 3, 3, 4, 4}, dtype, false)
			good.Causal = true
			closeTo(t, "o after an error response", call(t, a, good).O, reference(t, withScale(good, 1/float64(good.D))).O, tolerance(dtype))
		})
	}
}

func TestGoMLXMaskedSoftmax(t *testing.T) {
	a := startShipped(t, "gomlx-masked-softmax")
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"bool", "validity"}, KVCache: true, Scale: true})
	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			// attnlab's position rule with a cache, a window and padding,
			// as a boolean mask, at the default scale and an explicit one
			r := newRequest(52, shape{2, 2, 2, 3, 7, 4, 5}, dtype, true)
			r.Causal, r.Window, r.KValid = true, 4, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
			compare(t, r, call(t, a, asBool(r)), reference(t, r))
			compare(t, r, call(t, a, withScale(asBool(r), 0.3)), reference(t, withScale(r, 0.3)))
			// padding queries through q_valid: zero rows
			p := newRequest(53, shape{1, 2, 2, 4, 4, 4, 4}, dtype, true)
			p.Causal, p.QValid = true, []int64{0, 1, 1, 1}
			b := asBool(p)
			b.QValid = p.QValid
			compare(t, p, call(t, a, b), reference(t, p))

			// a valid row that sees no key: MaskedSoftmax gives zeros, and
			// the gradient through it is zero (no NaN)
			e := newRequest(54, shape{1, 2, 2, 3, 5, 4, 4}, dtype, true)
			e.Mask = make([]bool, e.M*e.N)
			for i := range e.M {
				for j := range e.N {
					e.Mask[i*e.N+j] = i != 1 && j <= i+2
				}
			}
			got := call(t, a, e)
			if d := describe(rowValues(e, got.O, 0, 1)); d != "zero" {
				t.Errorf("the row with no visible key: o %s, want zero", d)
			}
			for h := range e.Hq {
				if d := describe(got.DQ[(h*e.M+1)*e.D:][:e.D]); d != "zero" {
					t.Errorf("head %d: dq of the row with no visible key %s, want zero", h, d)
				}
			}
			want := maskedForward(e, func(b, i, j int) bool { return e.Mask[i*e.N+j] }, contiguous(e))
			for _, i := range []int{0, 2} {
				closeTo(t, "o beside the empty row", rowValues(e, got.O, 0, i), rowValues(e, want, 0, i), tolerance(dtype))
			}
		})
	}
}

// ---------------------------------------------------------------- spaGO

func TestSpago(t *testing.T) {
	a := startShipped(t, "spago")
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"causal"}, KVCache: true, Scale: true})
	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			r := newRequest(60, shape{2, 2, 2, 5, 5, 4, 3}, dtype, true)
			r.Causal = true
			compare(t, r, call(t, a, r), reference(t, r))
			r = newRequest(61, shape{1, 3, 3, 2, 6, 4, 4}, dtype, true)
			r.Scale = 0.4
			compare(t, r, call(t, a, r), reference(t, r))

			// a chunk of 3 after a cache of 4: the mask follows the
			// query's index in the chunk (top-left), not its position
			c := newRequest(62, shape{1, 2, 2, 3, 7, 4, 4}, dtype, false)
			c.Causal = true
			got := call(t, a, c).O
			if !agrees(c, got, maskedForward(c, topLeft(c), contiguous(c))) {
				t.Errorf("causal M=3, N=7: %s, want top-left", alignment(c, got))
			}
			if agrees(c, got, maskedForward(c, bottomRight(c), contiguous(c))) {
				t.Errorf("causal M=3, N=7 follows positions: update the card and docs/findings/spago-causal-chunk.md")
			}
			// one query after a cache: no mask at all, every key (the
			// position rule's answer)
			d := newRequest(63, shape{1, 2, 2, 1, 5, 4, 4}, dtype, false)
			d.Causal = true
			compare(t, d, call(t, a, d), reference(t, d))
		})
	}
	t.Run("error response", func(t *testing.T) { errorPath(t, a, "float64") })
}

// TestGoAdaptersOutsideCheckout: from a folder that is not a checkout of
// attnlab, the adapters that are Go modules cannot be built; -list and
// -exec say what to do instead of failing later.
func TestGoAdaptersOutsideCheckout(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{"gomlx-mha", "gomlx-masked-softmax", "spago"} {
		s, _ := adapters.Lookup(name)
		why := s.Missing()
		if _, err := exec.LookPath("go"); err != nil {
			if !strings.Contains(why, "install Go") {
				t.Errorf("%s without go: %q, want what to install", name, why)
			}
			continue
		}
		module := strings.Fields(s.Command())[2]
		if !strings.Contains(why, module+", the Go module") || !strings.Contains(why, "go -C "+module+" build") {
			t.Errorf("%s outside a checkout: %q, want where to run it and how to build it", name, why)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := adapters.Start(ctx, name, time.Minute)
		cancel()
		var ce *conform.Error
		if !errors.As(err, &ce) || ce.Request != "start" || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: start: %v, want an adapter failure at start saying %q", name, err, why)
		}
	}
}

// TestGoAdapterModuleCacheMissing: with a module cache that lacks the
// adapter's dependencies (and no proxy to fetch them), the adapter is
// missing and says what to run.
func TestGoAdapterModuleCacheMissing(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	t.Setenv("GOMODCACHE", filepath.Join(t.TempDir(), "mod"))
	t.Setenv("GOFLAGS", "-modcacherw")
	s, _ := adapters.Lookup("spago")
	why := s.Missing()
	if !strings.Contains(why, "module cache lacks") || !strings.Contains(why, "mod download") {
		t.Errorf("spago with an empty module cache: %q, want what to download", why)
	}
}

// TestFindingsReproduce runs each Go reproduction of docs/findings and
// compares what it prints with the output its write-up quotes: the
// reproductions exit 1 while the bug is there, and a write-up that no longer
// matches its program fails here.
func TestFindingsReproduce(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	for _, c := range []struct{ doc, module, program string }{
		{"gomlx-mha-double-scale.md", "gomlx", "./double-scale"},
		{"gomlx-mha-matrix-mask.md", "gomlx", "./matrix-mask"},
		{"gomlx-simplego-unused-variable.md", "gomlx", "./unused-variable"},
		{"spago-causal-chunk.md", "spago", "./causal-chunk"},
	} {
		t.Run(c.doc, func(t *testing.T) {
			dir := filepath.Join("..", "docs", "findings", c.module)
			env := append(os.Environ(), "GOPROXY=off", "GOFLAGS="+os.Getenv("GOFLAGS")+" -mod=readonly -buildvcs=false", "CGO_ENABLED=0")
			list := exec.Command(goTool, "list", "-deps", c.program)
			list.Dir, list.Env = dir, env
			if out, err := list.CombinedOutput(); err != nil {
				t.Skipf("the module cache lacks what docs/findings/%s needs (%s): run go -C docs/findings/%s mod download", c.module, lastLine(out), c.module)
			}
			doc, err := os.ReadFile(filepath.Join("..", "docs", "findings", c.doc))
			if err != nil {
				t.Fatal(err)
			}
			command := "$ go -C docs/findings/" + c.module + " run " + c.program + "\n"
			_, quoted, ok := strings.Cut(string(doc), "```text\n"+command)
			quoted, _, ok2 := strings.Cut(quoted, "```")
			if !ok || !ok2 {
				t.Fatalf("%s quotes no output of %q", c.doc, strings.TrimSpace(command))
			}
			build := exec.Command(goTool, "build", "-o", filepath.Join(t.TempDir(), "repro"), c.program)
			build.Dir, build.Env = dir, env
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", c.program, err, out)
			}
			run := exec.Command(build.Args[3])
			out, err := run.Output()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("%s: %v, want exit status 1 (the bug reproduced)", c.program, err)
			}
			if string(out) != quoted {
				t.Errorf("%s prints\n%s\n%s quotes\n%s", c.program, out, c.doc, quoted)
			}
		})
	}
}

// lastLine is the last line of a command's output.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
