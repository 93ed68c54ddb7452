// Tests of the conformance adapters for real implementations: each adapter
// is started through conform.Start, exactly as attnlab conform starts it,
// its hello and declared capabilities are checked, and a handful of
// requests are compared with attnlab's reference on the semantics the
// adapter claims. A test skips with the reason when its runtime is missing
// (/usr/bin/python3 with torch; node with adapters/node/node_modules).
//
// What the real implementations do where their conventions differ from
// attnlab's (the causal diagonal when M ≠ N, a fully masked row, the GQA
// head mapping) is measured and written to the test log (go test -v), not
// asserted: finding it is attnlab conform's job.
package adapters_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

const python = "/usr/bin/python3"

// torchMissing is why the PyTorch adapters cannot run, or "".
var torchMissing = sync.OnceValue(func() string {
	if _, err := os.Stat(python); err != nil {
		return python + " is not installed"
	}
	out, err := exec.Command(python, "-c", "import torch").CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Sprintf("%s cannot import torch (%s); install Debian's python3-torch", python, lines[len(lines)-1])
	}
	return ""
})

// npmMissing is why the Node adapters needing the npm package pkg (as
// adapters/node/package.json names it) cannot run, or "" (asked once per
// package).
func npmMissing(pkg string) string {
	npmMu.Lock()
	defer npmMu.Unlock()
	why, ok := npmAsked[pkg]
	if !ok {
		why = npmLoads(pkg)
		npmAsked[pkg] = why
	}
	return why
}

var (
	npmMu    sync.Mutex
	npmAsked = map[string]string{}
)

func npmLoads(pkg string) string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
		return "adapters/node/node_modules/" + pkg + " is missing: run (cd adapters/node && npm install --ignore-scripts)"
	}
	cmd := exec.Command("node", "-e", fmt.Sprintf("require(%q)", pkg))
	cmd.Dir = "node"
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := err.Error()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "Error") {
				msg = line
				break
			}
		}
		return pkg + " does not load: " + msg
	}
	return ""
}

// ortMissing is why the ONNX Runtime adapter cannot run, or "".
func ortMissing() string { return npmMissing("onnxruntime-node") }

func needTorch(t testing.TB) {
	t.Helper()
	if why := torchMissing(); why != "" {
		t.Skip("PyTorch adapters skipped: " + why)
	}
}

func needORT(t testing.TB) {
	t.Helper()
	needNPM(t, "onnxruntime-node")
}

// needNPM skips a test of a Node adapter whose npm package pkg is not
// installed in adapters/node.
func needNPM(t testing.TB, pkg string) {
	t.Helper()
	if why := npmMissing(pkg); why != "" {
		t.Skipf("Node adapter (%s) skipped: %s", pkg, why)
	}
}

func pythonAdapter(script string) string {
	abs, err := filepath.Abs(filepath.Join("python", script))
	if err != nil {
		panic(err)
	}
	return python + " " + abs
}

func nodeAdapter(op string) string { return nodeScript("ort_attention.js", op) }

// nodeScript is the command running adapters/node/script with args.
func nodeScript(script, args string) string {
	abs, err := filepath.Abs(filepath.Join("node", script))
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace("node " + abs + " " + args)
}

// start starts an adapter for the test, a command line or a shipped
// adapter's name, and closes it at the end, checking that it exits 0 when
// its input is closed.
func start(t testing.TB, command string) *conform.Adapter {
	t.Helper()
	a, err := adapters.Start(context.Background(), command, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("%s: exit: %v", command, err)
		}
	})
	return a
}

// checkCaps compares the declared capabilities with the expected ones
// (Name and Version only have to be set).
func checkCaps(t *testing.T, a *conform.Adapter, want conform.Capabilities) {
	t.Helper()
	got := a.Caps
	t.Logf("%s (%s): %+v", got.Name, got.Version, got)
	if got.Name == "" || got.Version == "" {
		t.Errorf("capabilities: name %q, version %q: want both", got.Name, got.Version)
	}
	got.Name, got.Version = "", ""
	slices.Sort(got.DTypes)
	slices.Sort(got.Masks)
	slices.Sort(want.DTypes)
	slices.Sort(want.Masks)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("capabilities\n got %+v\nwant %+v", got, want)
	}
}

// shape is the size of a request.
type shape struct{ B, Hq, Hkv, M, N, D, Dv int }

// newRequest draws q, k, v (and do when grads) uniformly in [-1, 1).
func newRequest(seed uint64, s shape, dtype string, grads bool) *conform.Request {
	rng := rand.New(rand.NewPCG(seed, 17))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = 2*rng.Float64() - 1
			if dtype == "float32" {
				x[i] = float64(float32(x[i])) // what goes on the wire
			}
		}
		return x
	}
	r := &conform.Request{B: s.B, Hq: s.Hq, Hkv: s.Hkv, M: s.M, N: s.N, D: s.D, Dv: s.Dv, DType: dtype,
		Q: fill(s.B * s.Hq * s.M * s.D), K: fill(s.B * s.Hkv * s.N * s.D), V: fill(s.B * s.Hkv * s.N * s.Dv)}
	if grads {
		r.DO = fill(s.B * s.Hq * s.M * s.Dv)
	}
	return r
}

// call sends r and fails the test on an adapter failure or an error
// response.
func call(t *testing.T, a *conform.Adapter, r *conform.Request) *conform.Response {
	t.Helper()
	resp, err := a.Attention(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Err != "" {
		t.Fatalf("%s refused the request: %s", a.Caps.Name, resp.Err)
	}
	return resp
}

// reference is attnlab's reference answer to r.
func reference(t *testing.T, r *conform.Request) *conform.Response {
	t.Helper()
	resp, err := conform.Reference().Attention(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Err != "" {
		t.Fatalf("the reference refused the request: %s", resp.Err)
	}
	return resp
}

// tolerance of a comparison in the request's dtype.
func tolerance(dtype string) float64 {
	if dtype == "float32" {
		return 2e-5
	}
	return 1e-11
}

// closeTo fails unless got and want agree to tol relative to the largest
// magnitude of want (at least 1). NaNs agree only with NaNs, infinities
// only with the same infinity.
func closeTo(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", name, len(got), len(want))
		return
	}
	big := 1.0
	for _, w := range want {
		if !math.IsNaN(w) && !math.IsInf(w, 0) {
			big = max(big, math.Abs(w))
		}
	}
	worst, at := 0.0, -1
	for i := range got {
		g, w := got[i], want[i]
		switch {
		case math.IsNaN(w) || math.IsNaN(g) || math.IsInf(w, 0) || math.IsInf(g, 0):
			if !(math.IsNaN(w) && math.IsNaN(g)) && g != w {
				t.Errorf("%s[%d] = %v, want %v", name, i, g, w)
				return
			}
		case math.Abs(g-w) > worst:
			worst, at = math.Abs(g-w), i
		}
	}
	if worst > tol*big {
		t.Errorf("%s: |got - want| = %.3g at [%d] (got %v, want %v), tolerance %.3g", name, worst, at, got[at], want[at], tol*big)
	}
}

// compare checks every tensor the adapter answered that the reference has.
func compare(t *testing.T, r *conform.Request, got, want *conform.Response) {
	t.Helper()
	tol := tolerance(r.DType)
	closeTo(t, "o", got.O, want.O, tol)
	if got.LSE != nil {
		closeTo(t, "lse", got.LSE, want.LSE, tol)
	}
	if r.DO != nil && got.DQ != nil {
		closeTo(t, "dq", got.DQ, want.DQ, 10*tol)
		closeTo(t, "dk", got.DK, want.DK, 10*tol)
		closeTo(t, "dv", got.DV, want.DV, 10*tol)
	}
}

// maskedForward is a plain float64 forward of r under an arbitrary mask
// vis(b, i, j) and head mapping kvHead(h): a row that sees no key is NaN.
// It is what the causal-alignment and head-mapping observations compare
// with, where attnlab's reference (which refuses empty rows) cannot serve.
func maskedForward(r *conform.Request, vis func(b, i, j int) bool, kvHead func(h int) int) []float64 {
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
	}
	o := make([]float64, r.B*r.Hq*r.M*r.Dv)
	s := make([]float64, r.N)
	for b := range r.B {
		for h := range r.Hq {
			g := kvHead(h)
			for i := range r.M {
				q := r.Q[((b*r.Hq+h)*r.M+i)*r.D:][:r.D]
				mx := math.Inf(-1)
				for j := range r.N {
					s[j] = math.Inf(-1)
					if vis(b, i, j) {
						k := r.K[((b*r.Hkv+g)*r.N+j)*r.D:][:r.D]
						dot := 0.0
						for d := range r.D {
							dot += q[d] * k[d]
						}
						s[j] = dot * scale
						mx = max(mx, s[j])
					}
				}
				out := o[((b*r.Hq+h)*r.M+i)*r.Dv:][:r.Dv]
				if math.IsInf(mx, -1) {
					for d := range out {
						out[d] = math.NaN()
					}
					continue
				}
				sum := 0.0
				for j := range r.N {
					s[j] = math.Exp(s[j] - mx) // exp(-inf) = 0
					sum += s[j]
				}
				for j := range r.N {
					v := r.V[((b*r.Hkv+g)*r.N+j)*r.Dv:][:r.Dv]
					for d := range out {
						out[d] += s[j] / sum * v[d]
					}
				}
			}
		}
	}
	return o
}

func contiguous(r *conform.Request) func(int) int {
	return func(h int) int { return h / (r.Hq / r.Hkv) }
}

func interleaved(r *conform.Request) func(int) int {
	return func(h int) int { return h % r.Hkv }
}

// The causal alignments a causal flag can have when M ≠ N. With attnlab's
// default positions (q_pos[i] = N-M+i, k_pos[j] = j) the position rule is
// the bottom-right one.
func bottomRight(r *conform.Request) func(b, i, j int) bool {
	return func(b, i, j int) bool { return j <= i+r.N-r.M }
}

func topLeft(r *conform.Request) func(b, i, j int) bool {
	return func(b, i, j int) bool { return j <= i }
}

func all(b, i, j int) bool { return true }

// agrees reports whether got equals want to the dtype's tolerance, NaN
// where want is NaN.
func agrees(r *conform.Request, got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	tol := 100 * tolerance(r.DType)
	for i := range got {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) {
			return false
		}
		if !math.IsNaN(want[i]) && !(math.Abs(got[i]-want[i]) <= tol*max(1, math.Abs(want[i]))) {
			return false
		}
	}
	return true
}

// alignment names the causal alignment of the answer to a causal request.
func alignment(r *conform.Request, o []float64) string {
	var names []string
	if agrees(r, o, maskedForward(r, bottomRight(r), contiguous(r))) {
		names = append(names, "position/bottom-right")
	}
	if agrees(r, o, maskedForward(r, topLeft(r), contiguous(r))) {
		names = append(names, "top-left")
	}
	if len(names) == 0 {
		return "other"
	}
	return strings.Join(names, " = ")
}

// nanRows lists the (batch, row) pairs of o [B,Hq,M,Dv] that hold a NaN.
func nanRows(r *conform.Request, o []float64) []string {
	var rows []string
	for b := range r.B {
		for i := range r.M {
			for h := range r.Hq {
				if slices.ContainsFunc(o[((b*r.Hq+h)*r.M+i)*r.Dv:][:r.Dv], math.IsNaN) {
					rows = append(rows, fmt.Sprintf("(%d,%d)", b, i))
					break
				}
			}
		}
	}
	return rows
}

// rowValues returns the values of o [B,Hq,M,Dv] for query row (b, i), all heads.
func rowValues(r *conform.Request, o []float64, b, i int) []float64 {
	var x []float64
	for h := range r.Hq {
		x = append(x, o[((b*r.Hq+h)*r.M+i)*r.Dv:][:r.Dv]...)
	}
	return x
}

// describe says what a row's values are: nan, zero, or finite values.
func describe(x []float64) string {
	switch {
	case slices.ContainsFunc(x, math.IsNaN):
		return "NaN"
	case !slices.ContainsFunc(x, func(v float64) bool { return v != 0 }):
		return "zero"
	case slices.ContainsFunc(x, func(v float64) bool { return math.IsInf(v, 0) }):
		return "infinite"
	}
	return fmt.Sprintf("finite %.4g…", x[0])
}

// boolMask is attnlab's visibility of r's configuration as a "bool" mask.
func boolMask(r *conform.Request) []bool {
	c := r.Config()
	m := make([]bool, r.B*r.M*r.N)
	for b := range r.B {
		for i := range r.M {
			for j := range r.N {
				m[(b*r.M+i)*r.N+j] = c.Visible(b, i, j)
			}
		}
	}
	return m
}

// asBool turns r's mask rule (causal, positions, validity, segments,
// window) into the equivalent "bool" mask request.
func asBool(r *conform.Request) *conform.Request {
	x := *r
	x.Mask = boolMask(r)
	x.Causal, x.Window = false, 0
	x.QPos, x.KPos, x.QValid, x.KValid, x.QSeg, x.KSeg = nil, nil, nil, nil, nil, nil
	return &x
}

// emptyRows lists the valid query rows of r that see no key, which the
// reference refuses.
func emptyRows(r *conform.Request) []string {
	c := r.Config()
	var rows []string
	for b := range r.B {
		for i := range r.M {
			if !c.QueryValid(b, i) {
				continue
			}
			seen := false
			for j := range r.N {
				seen = seen || c.Visible(b, i, j)
			}
			if !seen {
				rows = append(rows, fmt.Sprintf("(%d,%d)", b, i))
			}
		}
	}
	return rows
}

// ---------------------------------------------------------------- PyTorch composite

func TestTorchComposite(t *testing.T) {
	needTorch(t)
	a := start(t, pythonAdapter("torch_composite.py"))
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true, LSE: true, GQA: true,
		Masks: []string{"causal", "bool", "positions", "validity", "segments", "window"}, KVCache: true, Scale: true,
		Sinks: true, Softcap: true, Alibi: true})

	// the variants of docs/design.md §3.1 on top of a case's mask
	variants := func(set func(r *conform.Request)) func(r *conform.Request) {
		return func(r *conform.Request) {
			if set != nil {
				set(r)
			}
			r.Softcap, r.Sinks, r.Alibi = 1.5, make([]float64, r.Hq), make([]float64, r.Hq)
			for h := range r.Hq {
				r.Sinks[h], r.Alibi[h] = 0.4-0.3*float64(h), 0.5/float64(h+1)
			}
		}
	}
	padded := func(r *conform.Request) {
		r.Causal = true
		// item 0: two pads, then a cache of 1 token and 3 new ones in
		// two documents; item 1: no padding, one document.
		r.KValid = []int64{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
		r.KPos = []int64{0, 0, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5}
		r.KSeg = []int64{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}
		r.QValid = []int64{1, 1, 1, 1, 1, 1, 1, 1}
		r.QPos = []int64{0, 1, 2, 3, 2, 3, 4, 5}
		r.QSeg = []int64{0, 0, 1, 1, 0, 0, 0, 0}
	}
	for _, dtype := range []string{"float64", "float32"} {
		for _, c := range []struct {
			name string
			s    shape
			set  func(r *conform.Request)
		}{
			{"causal M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) { r.Causal = true }},
			{"causal M==N", shape{1, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }},
			{"not causal M<N", shape{1, 2, 2, 2, 6, 3, 5}, nil},
			{"GQA 6:2 causal", shape{2, 6, 2, 3, 5, 4, 4}, func(r *conform.Request) { r.Causal = true }},
			{"scale and window", shape{1, 2, 1, 4, 6, 4, 2}, func(r *conform.Request) { r.Causal, r.Scale, r.Window = true, 0.3, 3 }},
			{"left padding, positions, segments", shape{2, 2, 1, 4, 6, 3, 3}, padded},
			{"sinks, softcap, ALiBi: GQA 6:2 causal M<N", shape{2, 6, 2, 3, 5, 4, 4}, variants(func(r *conform.Request) { r.Causal = true })},
			{"sinks, softcap, ALiBi: left padding, positions, segments", shape{2, 2, 1, 4, 6, 3, 3}, variants(padded)},
			{"sinks, softcap, ALiBi: window, empty row", shape{1, 2, 1, 3, 4, 3, 2}, variants(func(r *conform.Request) {
				r.Causal, r.Window, r.QPos = true, 2, []int64{1, 6, 3} // row 1 sees no key: O = 0
			})},
			{"padding query rows", shape{2, 2, 2, 3, 5, 4, 4}, func(r *conform.Request) {
				r.Causal = true
				r.QValid = []int64{0, 1, 1, 1, 1, 0}
			}},
		} {
			t.Run(dtype+"/"+c.name, func(t *testing.T) {
				r := newRequest(uint64(len(c.name)), c.s, dtype, true)
				r.WantLSE = true
				if c.set != nil {
					c.set(r)
				}
				got, want := call(t, a, r), reference(t, r)
				if got.LSE == nil || got.DQ == nil {
					t.Fatal("no lse or no gradients in the answer")
				}
				compare(t, r, got, want)
				if r.Sinks != nil {
					closeTo(t, "dsinks", got.DSinks, want.DSinks, 10*tolerance(dtype))
				}
				// The same semantics as an explicit boolean mask.
				if r.QValid == nil && r.QPos == nil {
					b := asBool(r)
					closeTo(t, "o (bool mask)", call(t, a, b).O, want.O, tolerance(dtype))
				}
			})
		}
	}

	t.Run("empty valid row", func(t *testing.T) {
		// Causal with M > N and default positions: query i sits at
		// position N-M+i, so the first M-N rows see no key at all.
		r := newRequest(3, shape{1, 2, 2, 5, 3, 4, 4}, "float64", true)
		r.Causal, r.WantLSE = true, true
		if ref, err := conform.Reference().Attention(r); err != nil || ref.Err == "" {
			t.Fatalf("the reference answers a request with empty rows: %v", err)
		}
		// by default the composite refuses it, as attnlab does
		if resp, err := a.Attention(r); err != nil || !strings.Contains(resp.Err, "sees no key") {
			t.Fatalf("an empty valid row: %+v, %v; want an error response naming the row", resp, err)
		}
		// with --plain it is the textbook composite: NaN rows
		plain := start(t, pythonAdapter("torch_composite.py")+" --plain")
		empty := emptyRows(r)
		got := call(t, plain, r)
		if nan := nanRows(r, got.O); !slices.Equal(nan, empty) {
			t.Errorf("NaN rows %v, want the empty rows %v", nan, empty)
		}
		if want := maskedForward(r, bottomRight(r), contiguous(r)); !agrees(r, got.O, want) {
			t.Errorf("the rows that see keys differ from the plain forward")
		}
		t.Logf("a valid row that sees no key (rows %v, M=5 > N=3 causal): o = %s, lse = %v; backward: dq of the row = %s, dk = %s, dv = %s",
			empty, describe(rowValues(r, got.O, 0, 0)), got.LSE[0], describe(got.DQ[:r.D]), describe(got.DK), describe(got.DV))
	})
}

// errorPath sends a request the implementation raises on (Hq = 3 query
// heads on Hkv = 2 K/V heads, which no implementation can group), checks
// that the answer is an error response, and that the adapter still answers
// the next request correctly.
func errorPath(t *testing.T, a *conform.Adapter, dtype string) {
	t.Helper()
	bad := newRequest(5, shape{1, 3, 2, 2, 4, 4, 4}, dtype, false)
	resp, err := a.Attention(bad)
	if err != nil {
		t.Fatalf("a request the implementation raises on: %v", err)
	}
	if resp.Err == "" || strings.Contains(resp.Err, "\n") {
		t.Fatalf("Hq=3, Hkv=2: error %q, want an error response of one line", resp.Err)
	}
	t.Logf("Hq=3, Hkv=2: error response %q", resp.Err)
	good := newRequest(6, shape{1, 2, 2, 3, 3, 4, 4}, dtype, false)
	good.Causal = true
	closeTo(t, "o after an error response", call(t, a, good).O, reference(t, good).O, tolerance(dtype))
}

// observeCausal logs where the causal diagonal of a causal-flag adapter
// sits for M < N (a chunk after a cache) and M > N.
func observeCausal(t *testing.T, a *conform.Adapter, dtype string) {
	t.Helper()
	for _, s := range []shape{{1, 2, 2, 3, 7, 4, 4}, {1, 2, 2, 5, 3, 4, 4}} {
		r := newRequest(7, s, dtype, false)
		r.Causal = true
		resp, err := a.Attention(r)
		if err != nil {
			t.Fatal(err)
		}
		rel := "M < N"
		if s.M > s.N {
			rel = "M > N"
		}
		if resp.Err != "" {
			t.Logf("causal %s (M=%d, N=%d, past=%d): error response %q", rel, s.M, s.N, s.N-s.M, resp.Err)
			continue
		}
		t.Logf("causal %s (M=%d, N=%d, past=%d): the diagonal is %s; NaN rows %v", rel, s.M, s.N, s.N-s.M,
			alignment(r, resp.O), nanRows(r, resp.O))
	}
}

// observeEmptyRow sends a boolean mask in which query row 1 of batch item
// 0 sees no key and logs what the adapter answers there; the other rows
// must match the plain forward.
func observeEmptyRow(t *testing.T, a *conform.Adapter, dtype string, grads bool) {
	t.Helper()
	r := newRequest(8, shape{1, 2, 2, 3, 5, 4, 4}, dtype, grads)
	r.Mask = make([]bool, r.M*r.N)
	for i := range r.M {
		for j := range r.N {
			r.Mask[i*r.N+j] = i != 1 && j <= i+2
		}
	}
	resp, err := a.Attention(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Err != "" {
		t.Logf("a valid row that sees no key: error response %q", resp.Err)
		return
	}
	want := maskedForward(r, func(b, i, j int) bool { return r.Mask[i*r.N+j] }, contiguous(r))
	for _, i := range []int{0, 2} {
		closeTo(t, fmt.Sprintf("o row %d (beside the empty row)", i), rowValues(r, resp.O, 0, i), rowValues(r, want, 0, i), tolerance(dtype))
	}
	msg := fmt.Sprintf("a valid row that sees no key (%s): o = %s", dtype, describe(rowValues(r, resp.O, 0, 1)))
	if resp.DQ != nil {
		msg += fmt.Sprintf("; backward: dq of the row = %s, dq of the other rows = %s, dk = %s, dv = %s",
			describe(resp.DQ[r.D:2*r.D]), describe(resp.DQ[:r.D]), describe(resp.DK), describe(resp.DV))
	}
	t.Log(msg)
}

// ---------------------------------------------------------------- PyTorch SDPA (1.13)

func TestTorchSDPA(t *testing.T) {
	needTorch(t)
	a := start(t, pythonAdapter("torch_sdpa.py"))
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"causal", "bool"}, KVCache: true})

	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			// Causal flag only where M == N: the alignments agree there.
			r := newRequest(10, shape{2, 2, 2, 5, 5, 4, 3}, dtype, true)
			r.Causal = true
			compare(t, r, call(t, a, r), reference(t, r))
			// No mask, a chunk against a longer K/V.
			r = newRequest(11, shape{1, 3, 3, 2, 6, 4, 4}, dtype, true)
			compare(t, r, call(t, a, r), reference(t, r))
			// attnlab's position rule with a cache, as a boolean mask.
			r = newRequest(12, shape{2, 2, 2, 3, 7, 4, 5}, dtype, true)
			r.Causal, r.Window, r.KValid = true, 4, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
			compare(t, r, call(t, a, asBool(r)), reference(t, r))

			observeCausal(t, a, dtype)
			observeEmptyRow(t, a, dtype, true)
		})
	}
	t.Run("GQA", func(t *testing.T) {
		r := newRequest(13, shape{1, 4, 2, 3, 3, 4, 4}, "float64", false)
		resp, err := a.Attention(r)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Err == "" {
			t.Errorf("Hq=4, Hkv=2 answered though gqa is not declared: declare it")
		}
		t.Logf("GQA Hq=4, Hkv=2: error response %q", resp.Err)
	})
	t.Run("error response", func(t *testing.T) { errorPath(t, a, "float64") })
}

// ---------------------------------------------------------------- torch.nn.MultiheadAttention

func TestTorchMHA(t *testing.T) {
	needTorch(t)
	a := start(t, pythonAdapter("torch_mha.py"))
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"causal", "bool"}, KVCache: true})

	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			for _, c := range []struct {
				name string
				s    shape
				set  func(r *conform.Request)
			}{
				// The adapter builds its causal mask from past = N - M.
				{"causal M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) { r.Causal = true }},
				{"causal M==N", shape{1, 3, 3, 4, 4, 2, 2}, func(r *conform.Request) { r.Causal = true }},
				{"Dv > D", shape{1, 2, 2, 3, 5, 3, 7}, func(r *conform.Request) { r.Causal = true }},
				{"Dv < D", shape{1, 2, 2, 3, 5, 4, 2}, nil},
				{"key padding", shape{2, 2, 2, 3, 6, 4, 4}, func(r *conform.Request) {
					r.Causal, r.KValid = true, []int64{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
				}},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := newRequest(uint64(20+len(c.name)), c.s, dtype, true)
					if c.set != nil {
						c.set(r)
					}
					want := reference(t, r)
					compare(t, r, call(t, a, r), want)
					compare(t, r, call(t, a, asBool(r)), want)
				})
			}
			// Causal with M > N: the first M-N rows see no key.
			r := newRequest(30, shape{1, 2, 2, 5, 3, 4, 4}, dtype, false)
			r.Causal = true
			got := call(t, a, r)
			if nan, empty := nanRows(r, got.O), emptyRows(r); !slices.Equal(nan, empty) {
				t.Errorf("causal M > N: NaN rows %v, want the empty rows %v", nan, empty)
			}
			if !agrees(r, got.O, maskedForward(r, bottomRight(r), contiguous(r))) {
				t.Errorf("causal M > N: the rows that see keys differ from the position rule")
			}
			observeEmptyRow(t, a, dtype, true)
		})
	}
	t.Run("query padding", func(t *testing.T) {
		// q_valid cannot be expressed: row 0 is computed like any other.
		r := newRequest(31, shape{1, 2, 2, 3, 5, 4, 4}, "float64", true)
		r.Causal, r.QValid = true, []int64{0, 1, 1}
		got := call(t, a, r)
		plain := *r
		plain.QValid = nil
		closeTo(t, "o with q_valid", got.O, reference(t, &plain).O, 1e-11)
		t.Logf("a padding query row (q_valid = 0): o = %s, dq of the row = %s (attnlab: zero and no gradient)",
			describe(rowValues(r, got.O, 0, 0)), describe(got.DQ[:r.D]))
	})
	t.Run("error response", func(t *testing.T) { errorPath(t, a, "float64") })
}

// ---------------------------------------------------------------- ONNX Runtime

// headMapping compares the answer to a GQA request with both head
// mappings, logs which one it is and fails when it is neither.
func headMapping(t *testing.T, r *conform.Request, o []float64, vis func(b, i, j int) bool) {
	t.Helper()
	var found []string
	if agrees(r, o, maskedForward(r, vis, contiguous(r))) {
		found = append(found, "contiguous (h / (Hq/Hkv), as attnlab)")
	}
	if agrees(r, o, maskedForward(r, vis, interleaved(r))) {
		found = append(found, "interleaved (h mod Hkv)")
	}
	if len(found) == 0 {
		t.Errorf("GQA Hq=%d, Hkv=%d: the answer matches neither head mapping", r.Hq, r.Hkv)
		return
	}
	t.Logf("GQA Hq=%d, Hkv=%d: head mapping %s", r.Hq, r.Hkv, strings.Join(found, " = "))
}

func TestORTAttention(t *testing.T) {
	needORT(t)
	for _, args := range []string{"--opset 24", "--opset 23", "--no-cache"} {
		t.Run(args, func(t *testing.T) {
			a := start(t, nodeAdapter("attention "+args))
			checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32"}, GQA: true,
				Masks: []string{"causal", "bool"}, KVCache: true, Scale: true})
			const f = "float32"
			for _, c := range []struct {
				name string
				s    shape
				set  func(r *conform.Request)
				bool bool // send the configuration as a boolean mask
			}{
				{"causal M==N", shape{2, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }, false},
				{"not causal M<N cache", shape{2, 2, 2, 3, 7, 4, 5}, nil, false},
				{"scale", shape{1, 2, 2, 3, 6, 4, 4}, func(r *conform.Request) { r.Scale = 0.3 }, false},
				{"bool mask M==N", shape{1, 2, 2, 4, 4, 4, 4}, func(r *conform.Request) { r.Causal, r.Window = true, 2 }, true},
				{"bool mask M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) {
					r.Causal, r.Window, r.KValid = true, 5, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
				}, true},
				{"GQA bool mask M<N cache", shape{1, 4, 2, 2, 5, 4, 4}, func(r *conform.Request) { r.Causal = true }, true},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := newRequest(uint64(40+len(c.name)), c.s, f, false)
					if c.set != nil {
						c.set(r)
					}
					want := reference(t, r)
					send := r
					if c.bool {
						send = asBool(r)
					}
					compare(t, r, call(t, a, send), want)
				})
			}
			t.Run("GQA causal M==N", func(t *testing.T) {
				r := newRequest(50, shape{2, 6, 2, 4, 4, 4, 4}, f, false)
				r.Causal = true
				got := call(t, a, r)
				headMapping(t, r, got.O, bottomRight(r))
				compare(t, r, got, reference(t, r))
			})
			observeCausal(t, a, f)
			observeEmptyRow(t, a, f, false)
			t.Run("error response", func(t *testing.T) { errorPath(t, a, f) })
		})
	}
}

func TestORTGroupQueryAttention(t *testing.T) {
	needORT(t)
	a := start(t, nodeAdapter("gqa"))
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32"}, GQA: true, Masks: []string{"causal"}, KVCache: true, Scale: true})
	const f = "float32"
	for _, c := range []struct {
		name string
		s    shape
		set  func(r *conform.Request)
	}{
		// Causal only where M == N; D = 8 needs no padding, D = 4 and
		// Dv != D are padded by the adapter.
		{"causal M==N D=8", shape{2, 4, 2, 5, 5, 8, 8}, func(r *conform.Request) { r.Causal = true }},
		{"causal M==N D=4", shape{2, 2, 2, 4, 4, 4, 4}, func(r *conform.Request) { r.Causal = true }},
		{"causal M==N Dv!=D", shape{1, 2, 1, 3, 3, 4, 6}, func(r *conform.Request) { r.Causal = true }},
		{"causal M==N scale", shape{1, 2, 2, 3, 3, 8, 8}, func(r *conform.Request) { r.Causal, r.Scale = true, 0.3 }},
		// Not causal, a chunk after a cache (every key visible), one batch
		// item and two (run one at a time).
		{"not causal M<N cache", shape{1, 4, 2, 3, 7, 8, 8}, nil},
		{"not causal M<N cache B=2", shape{2, 2, 1, 2, 6, 4, 4}, nil},
		{"decode step M=1 B=2", shape{2, 2, 2, 1, 6, 8, 8}, func(r *conform.Request) { r.Causal = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRequest(uint64(60+len(c.name)), c.s, f, false)
			if c.set != nil {
				c.set(r)
			}
			compare(t, r, call(t, a, r), reference(t, r))
		})
	}
	t.Run("GQA causal M==N", func(t *testing.T) {
		r := newRequest(70, shape{1, 6, 2, 4, 4, 8, 8}, f, false)
		r.Causal = true
		headMapping(t, r, call(t, a, r).O, bottomRight(r))
	})
	observeCausal(t, a, f)
	t.Run("causal M<N cache B=2", func(t *testing.T) {
		r := newRequest(71, shape{2, 4, 2, 3, 7, 8, 8}, f, false)
		r.Causal = true
		t.Logf("causal M < N, B=2 (one item at a time): the diagonal is %s", alignment(r, call(t, a, r).O))
	})
	t.Run("error response", func(t *testing.T) { errorPath(t, a, f) })
}

// ---------------------------------------------------------------- calls per second

// BenchmarkTorchCompositeCalls measures round trips through the protocol
// to the PyTorch composite adapter: one small float64 request with do
// (B=1, Hq=Hkv=2, M=3, N=5, D=Dv=4, causal), forward and backward, per
// call. A finite-difference check makes thousands of such calls.
//
//	go test ./adapters/ -run '^$' -bench TorchCompositeCalls -benchtime 2000x
func BenchmarkTorchCompositeCalls(b *testing.B) {
	needTorch(b)
	a := start(b, pythonAdapter("torch_composite.py"))
	r := newRequest(1, shape{1, 2, 2, 3, 5, 4, 4}, "float64", true)
	r.Causal = true
	for b.Loop() {
		resp, err := a.Attention(r)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Err != "" || resp.DQ == nil {
			b.Fatalf("error response %q, or no gradients", resp.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
