// Tests of the Node adapters beyond ONNX Runtime's Attention and
// GroupQueryAttention on onnxruntime-node 1.30 (adapters_test.go): the
// com.microsoft MultiHeadAttention op, the same ops on onnxruntime-node
// 1.24.3 and 1.27.0 and on onnxruntime-web (WASM), and TF.js's
// MultiHeadAttention layer. Each skips with the reason when its npm package
// is not installed in adapters/node.
package adapters_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/conform"
)

// npm packages of the Node adapters, as adapters/node/package.json names
// them.
const (
	ortNode    = "onnxruntime-node"
	ortNode124 = "onnxruntime-node-1.24"
	ortNode127 = "onnxruntime-node-1.27"
	ortWeb     = "onnxruntime-web"
	tfjs       = "@tensorflow/tfjs"
)

// ortRuntimes are the ONNX Runtime builds the adapter runs on: its flag
// and the npm package it needs.
var ortRuntimes = []struct{ flag, npm string }{
	{"", ortNode}, {"--ort 1.24", ortNode124}, {"--ort 1.27", ortNode127}, {"--wasm", ortWeb},
}

// ortCase is a request configuration with the attnlab semantics an ONNX
// Runtime op is expected to follow exactly.
type ortCase struct {
	name string
	s    shape
	set  func(r *conform.Request)
	bool bool // send the configuration as a boolean mask
}

// runORTCases compares the adapter's answers with the reference on cases.
func runORTCases(t *testing.T, a *conform.Adapter, seed uint64, cases []ortCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRequest(seed+uint64(len(c.name)), c.s, "float32", false)
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
}

// mhaCases are the configurations MultiHeadAttention answers as attnlab
// does, with past inputs or without: causal only at M = N, Dv ≠ D (padded
// by the adapter when there is a past), an explicit scale, and masks as
// the op's 3-D key_padding_mask.
var mhaCases = []ortCase{
	{"causal M==N Dv<D", shape{2, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }, false},
	{"not causal M<N Dv>D", shape{2, 2, 2, 3, 7, 4, 5}, nil, false},
	{"scale", shape{1, 2, 2, 3, 6, 4, 4}, func(r *conform.Request) { r.Scale = 0.3 }, false},
	{"decode M=1", shape{2, 3, 3, 1, 6, 4, 4}, func(r *conform.Request) { r.Causal = true }, false},
	{"bool mask M==N", shape{1, 2, 2, 4, 4, 4, 4}, func(r *conform.Request) { r.Causal, r.Window = true, 2 }, true},
	{"bool mask M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) {
		r.Causal, r.Window, r.KValid = true, 5, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
	}, true},
}

func TestORTMultiHeadAttention(t *testing.T) {
	needORT(t)
	for _, args := range []string{"", "--no-cache"} {
		t.Run("mha "+args, func(t *testing.T) {
			a := start(t, nodeAdapter("mha "+args))
			checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32"}, Masks: []string{"causal", "bool"}, KVCache: true, Scale: true})
			runORTCases(t, a, 80, mhaCases)
			t.Run("GQA refused", func(t *testing.T) {
				r := newRequest(81, shape{1, 4, 2, 3, 3, 4, 4}, "float32", false)
				resp, err := a.Attention(r)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Err == "" || !strings.Contains(resp.Err, "K/V heads") {
					t.Errorf("Hq=4, Hkv=2: %q, want an error response naming the heads (gqa is not declared)", resp.Err)
				}
			})
			observeCausal(t, a, "float32")
			observeEmptyRow(t, a, "float32", false)
			t.Run("error response", func(t *testing.T) { errorPath(t, a, "float32") })
		})
	}
}

// TestORTMHAUnidirectionalLastRow pins down the finding of
// docs/findings/ort-mha-unidirectional-last-row.md: with unidirectional = 1,
// no past inputs and more keys than queries, rows 0…M−2 are top-left and
// the last row sees every key, natively and in WASM; with past inputs the
// chunk is bottom-right. When it fails, ONNX Runtime has changed: update
// the finding.
func TestORTMHAUnidirectionalLastRow(t *testing.T) {
	for _, rt := range []struct{ flag, npm string }{{"", ortNode}, {"--wasm", ortWeb}} {
		t.Run("runtime "+rt.flag, func(t *testing.T) {
			needNPM(t, rt.npm)
			lastRowEscapes := func(r *conform.Request) func(b, i, j int) bool {
				return func(b, i, j int) bool { return i == r.M-1 || j <= i }
			}
			// one process per argument list, for the runtime's subtests
			adapter := map[string]*conform.Adapter{"--no-cache": start(t, nodeAdapter("mha --no-cache "+rt.flag)), "": start(t, nodeAdapter("mha "+rt.flag))}
			for _, c := range []struct {
				args string
				s    shape
				want func(r *conform.Request) func(b, i, j int) bool
				name string
			}{
				{"--no-cache", shape{1, 1, 1, 3, 7, 4, 4}, lastRowEscapes, "rows 0…M−2 top-left, the last row every key"},
				{"--no-cache", shape{2, 2, 2, 4, 9, 8, 8}, lastRowEscapes, "rows 0…M−2 top-left, the last row every key"},
				{"", shape{1, 1, 1, 3, 7, 4, 4}, bottomRight, "bottom-right"},
			} {
				t.Run(fmt.Sprintf("%s M=%d N=%d", c.args, c.s.M, c.s.N), func(t *testing.T) {
					a := adapter[c.args]
					r := newRequest(82, c.s, "float32", false)
					r.Causal = true
					got := call(t, a, r)
					if !agrees(r, got.O, maskedForward(r, c.want(r), contiguous(r))) {
						t.Errorf("unidirectional, M=%d, N=%d: not %s (%s)", r.M, r.N, c.name, alignment(r, got.O))
					}
					if c.args != "" && agrees(r, got.O, maskedForward(r, topLeft(r), contiguous(r))) {
						t.Errorf("the answer is top-left as well: the probe cannot tell the last row apart")
					}
				})
			}
		})
	}
}

// TestORTRuntimes runs the Attention op on every ONNX Runtime build the
// adapter takes (onnxruntime-node 1.30.0, 1.27.0, 1.24.3, onnxruntime-web
// 1.30.0) and MultiHeadAttention on the earlier versions, against the
// reference where their semantics are attnlab's; the cards (cards_test.go)
// record where they differ. GroupQueryAttention and MultiHeadAttention in
// WASM are compared with the native build's answers request by request in
// TestDriftTable.
func TestORTRuntimes(t *testing.T) {
	attentionCases := []ortCase{
		{"causal M==N", shape{2, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }, false},
		{"not causal M<N cache", shape{2, 2, 2, 3, 7, 4, 5}, nil, false},
		{"scale", shape{1, 2, 2, 3, 6, 4, 4}, func(r *conform.Request) { r.Scale = 0.3 }, false},
		{"bool mask M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) {
			r.Causal, r.Window, r.KValid = true, 5, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
		}, true},
		{"GQA bool mask M<N cache", shape{1, 4, 2, 2, 5, 4, 4}, func(r *conform.Request) { r.Causal = true }, true},
	}
	for _, rt := range ortRuntimes {
		t.Run("runtime "+rt.flag, func(t *testing.T) {
			needNPM(t, rt.npm)
			a := start(t, nodeAdapter("attention "+rt.flag))
			runORTCases(t, a, 90, attentionCases)
			label := "onnxruntime-node " + versionOf(rt.npm) + " CPU"
			if rt.npm == ortWeb {
				label = "onnxruntime-web " + versionOf(rt.npm) + " WASM"
			}
			if !strings.HasSuffix(a.Caps.Name, ", "+label) || a.Caps.Version != "onnxruntime "+versionOf(rt.npm) {
				t.Errorf("hello %q (%s), want it to name %s", a.Caps.Name, a.Caps.Version, label)
			}
			t.Logf("%s (%s)", a.Caps.Name, a.Caps.Version)
			observeEmptyRow(t, a, "float32", false)
			if rt.flag != "--ort 1.24" && rt.flag != "--ort 1.27" {
				return
			}
			// the op's schema in these versions has no causal attribute
			if a, err := conform.Start(t.Context(), nodeAdapter("gqa "+rt.flag), 2*time.Minute); err == nil {
				a.Close()
				t.Errorf("gqa %s started; want the usage error saying why not", rt.flag)
			} else if !strings.Contains(err.Error(), "causal attribute") {
				t.Errorf("gqa %s: %v, want the reason", rt.flag, err)
			}
			t.Run("mha", func(t *testing.T) { runORTCases(t, start(t, nodeAdapter("mha "+rt.flag)), 92, mhaCases) })
		})
	}
}

// versionOf is the version of an npm package of ortRuntimes.
func versionOf(npm string) string {
	switch npm {
	case ortNode124:
		return "1.24.3"
	case ortNode127:
		return "1.27.0"
	}
	return "1.30.0"
}

// TestTFJSMultiHeadAttention compares the TF.js layer with the reference
// where its semantics are attnlab's (a boolean mask, causal at M = N, no
// mask with M ≠ N), and the adapter's two ways of calling it: the layer's
// attention with the heads split (the default), and call() with identity
// projections (--projections), which must give the same bits.
func TestTFJSMultiHeadAttention(t *testing.T) {
	needNPM(t, tfjs)
	split := start(t, nodeScript("tfjs_mha.js", ""))
	whole := start(t, nodeScript("tfjs_mha.js", "--projections"))
	checkCaps(t, split, conform.Capabilities{DTypes: []string{"float32"}, Masks: []string{"causal", "bool"}, KVCache: true})
	for _, c := range []ortCase{
		{"causal M==N Dv<D", shape{2, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }, false},
		{"not causal M<N Dv>D", shape{2, 3, 3, 3, 7, 4, 5}, nil, false},
		{"not causal M>N", shape{1, 2, 2, 6, 3, 4, 4}, nil, false},
		{"bool mask M==N", shape{1, 2, 2, 4, 4, 4, 4}, func(r *conform.Request) { r.Causal, r.Window = true, 2 }, true},
		{"bool mask M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) {
			r.Causal, r.Window, r.KValid = true, 5, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
		}, true},
		{"causal M<N (top-left)", shape{1, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) { r.Causal = true }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRequest(100+uint64(len(c.name)), c.s, "float32", false)
			if c.set != nil {
				c.set(r)
			}
			send := r
			if c.bool {
				send = asBool(r)
			}
			got := call(t, split, send)
			if r.Causal && r.M != r.N && !c.bool {
				// Keras's causal mask is tril(ones(T, S)): top-left
				if !agrees(r, got.O, maskedForward(r, topLeft(r), contiguous(r))) {
					t.Errorf("causal M=%d, N=%d: %s, want top-left", r.M, r.N, alignment(r, got.O))
				}
			} else {
				compare(t, r, got, reference(t, r))
			}
			if w := call(t, whole, send); !slices.Equal(w.O, got.O) {
				t.Errorf("call() with identity projections differs from the split heads by %.3g", maxAbsDiff(w.O, got.O))
			}
		})
	}
	t.Run("scale refused", func(t *testing.T) {
		r := newRequest(110, shape{1, 1, 1, 2, 2, 4, 4}, "float32", false)
		r.Scale = 0.3
		if resp, err := split.Attention(r); err != nil || !strings.Contains(resp.Err, "scale") {
			t.Errorf("an explicit scale: %v %q, want an error response naming the scale", err, resp.Err)
		}
	})
	observeEmptyRow(t, split, "float32", false)
	t.Run("error response", func(t *testing.T) { errorPath(t, split, "float32") })
}

func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		m = max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// TestNodeFindingsReproduce runs the reproduction script of each finding
// in Node (docs/findings/*.js) from the repository's root and compares what
// it prints with the output its write-up quotes; each exits 1 while the
// behaviour it reports holds. It fails when the runtime changes what the
// write-up says.
func TestNodeFindingsReproduce(t *testing.T) {
	for _, c := range []struct {
		doc, script string
		npm         []string
	}{
		{"ort-gqa-present-outputs.md", "ort-gqa-present-outputs.js", []string{ortNode}},
		{"ort-mha-unidirectional-last-row.md", "ort-mha-unidirectional-last-row.js", []string{ortNode}},
		{"ort-attention-version-drift.md", "ort-attention-version-drift.js", []string{ortNode, ortNode127, ortNode124}},
		{"tfjs-mha-no-gradient.md", "tfjs-mha-no-gradient.js", []string{tfjs}},
	} {
		t.Run(c.doc, func(t *testing.T) {
			for _, npm := range c.npm {
				needNPM(t, npm)
			}
			doc, err := os.ReadFile(filepath.Join("..", "docs", "findings", c.doc))
			if err != nil {
				t.Fatal(err)
			}
			command := "$ node docs/findings/" + c.script + "\n"
			_, quoted, ok := strings.Cut(string(doc), "```text\n"+command)
			quoted, _, ok2 := strings.Cut(quoted, "```")
			if !ok || !ok2 {
				t.Fatalf("%s quotes no output of %q", c.doc, strings.TrimSpace(command))
			}
			run := exec.Command("node", filepath.Join("docs", "findings", c.script))
			run.Dir = ".."
			out, err := run.Output()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("%s: %v, want exit status 1 (the behaviour reproduced)", c.script, err)
			}
			if string(out) != quoted {
				t.Errorf("%s prints\n%s\n%s quotes\n%s", c.script, out, c.doc, quoted)
			}
		})
	}
}
