package adapters_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

// ggmlMissing is why adapters/ggml's conform adapter cannot run (it is not
// built into adapters.GGMLDir), or "".
var ggmlMissing = sync.OnceValue(func() string {
	_, why := adapters.GGMLProgram("ggml-conform")
	return why
})

func needGGML(t testing.TB) {
	t.Helper()
	if why := ggmlMissing(); why != "" {
		t.Skip("ggml adapter skipped: " + why)
	}
}

// ggmlAdapter is the command line of adapters/ggml's conform adapter.
func ggmlAdapter(args string) string {
	file, _ := adapters.GGMLProgram("ggml-conform")
	return file + " " + args
}

// The ggml rows of the cards: the one flag of llama.cpp's -fa changes what
// a row with no visible key (or a padding row, which the adapter gives no
// visible key) returns, from 0 to NaN; everything else agrees. The window
// is llama.cpp's llama_kv_cache mask (is_masked_swa: q_pos − k_pos ≥ W is
// masked), W keys.
func init() {
	ggmlCard := func(empty string) conform.Card {
		c := conform.Card{CausalMLtN: "position", CausalMGtN: "position", CausalM1: "position", EmptyRow: empty, EmptyRowAt: every(empty), PaddingRows: empty,
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W", ExtremeLogits: "ok", CacheLayouts: layoutsOK}
		// ggml takes sinks and softcap (ALiBi only as slopes from one
		// max_bias): with a sink an empty row is 0 on both paths, as
		// docs/design.md §3.1 defines it; no backward, so no dσ
		c.Sinks, c.Softcap, c.Alibi = conform.Supported, conform.Supported, conform.NotDeclared
		c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance = conform.EmptyZero, conform.NA, conform.SoftcapBeforeMask, conform.NA
		return c
	}
	cardCases = append(cardCases,
		cardCase{"ggml flash attn", "ggml-flash-attn", false, ggmlCard("zero"), false},
		cardCase{"ggml softmax", "ggml-softmax", false, ggmlCard("nan"), false},
		// ollama's own Go KV cache builds the mask: causal by positions,
		// and a window of W that shows W + 1 keys; it takes no boolean
		// mask, validity or segments, so no empty row can be asked
		cardCase{"ggml ollama mask", "ggml-ollama-mask", false, ollamaCard(), false})
}

func ollamaCard() conform.Card {
	c := conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "n/a", CausalM1: "position", EmptyRow: "n/a", PaddingRows: "unsupported",
		GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W+1", ExtremeLogits: "ok"}
	c.Sinks, c.Softcap, c.Alibi = conform.Supported, conform.Supported, conform.NotDeclared
	c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance = conform.NA, conform.NA, conform.SoftcapBeforeMask, conform.NA
	return c
}

// variantChecks are the statuses of the variants' checks for adapters that
// declare some variants but not all (the others are not covered): without
// lse and gradients most of them cannot run, and the soft_max path's NaN
// padding rows fail the softcap mask check's visibility probe.
var variantChecks = map[string]map[string]string{
	"ggml flash attn":  {"variants/agrees-with-reference": "pass", "variants/softcap-mask": "pass"},
	"ggml softmax":     {"variants/agrees-with-reference": "pass", "variants/softcap-mask": "fail"},
	"ggml ollama mask": {"variants/agrees-with-reference": "pass"},
}

// TestGGML compares the ggml adapter's answers, on both paths and with K/V
// in F32 and F16, with attnlab's reference: llama.cpp's mask from
// positions, cache validity, sequences and a window; a boolean mask; GQA
// (whose mapping it states); Dv ≠ D. F16 K/V (and flash_attn_ext's F16 Q
// for F16 K) round to 2⁻¹¹ relative.
func TestGGML(t *testing.T) {
	needGGML(t)
	for _, args := range []string{"-flash=true", "-flash=false", "-flash=true -kv f16", "-flash=false -kv f16"} {
		t.Run(args, func(t *testing.T) {
			a := start(t, ggmlAdapter(args))
			checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32"}, GQA: true,
				Masks: []string{"causal", "bool", "positions", "validity", "segments", "window"}, KVCache: true, Scale: true, Sinks: true, Softcap: true})
			if !strings.Contains(a.Caps.Version, "ollama") {
				t.Errorf("version %q does not name ollama's module", a.Caps.Version)
			}
			tol := tolerance("float32")
			if strings.Contains(args, "f16") {
				tol = 4e-3
			}
			const f = "float32"
			for _, c := range []struct {
				name string
				s    shape
				set  func(r *conform.Request)
				bool bool
			}{
				{"causal M==N", shape{2, 2, 2, 5, 5, 4, 3}, func(r *conform.Request) { r.Causal = true }, false},
				{"causal M<N cache", shape{2, 2, 2, 3, 7, 8, 8}, func(r *conform.Request) { r.Causal = true }, false},
				{"not causal, scale", shape{1, 2, 2, 3, 6, 4, 4}, func(r *conform.Request) { r.Scale = 0.3 }, false},
				{"positions, validity, segments, window", shape{2, 2, 1, 4, 6, 4, 4}, func(r *conform.Request) {
					r.Causal, r.Window = true, 3
					r.QPos, r.KPos = []int64{2, 3, 4, 5, 1, 2, 3, 4}, []int64{0, 1, 2, 3, 4, 5, 0, 0, 0, 1, 2, 3}
					r.QValid, r.KValid = []int64{1, 1, 1, 1, 1, 1, 1, 1}, []int64{1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}
					r.QSeg, r.KSeg = []int64{0, 0, 1, 1, 0, 0, 0, 0}, []int64{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}
				}, false},
				{"bool mask M<N cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) {
					r.Causal, r.Window, r.KValid = true, 5, []int64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
				}, true},
				{"GQA 6/2 Dv≠D", shape{1, 6, 2, 3, 5, 8, 6}, func(r *conform.Request) { r.Causal = true }, false},
				{"sinks, softcap, GQA", shape{2, 4, 2, 3, 6, 8, 8}, func(r *conform.Request) {
					r.Causal, r.Softcap, r.Sinks = true, 0.7, []float64{0.5, -1, 2, 0}
				}, false},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := newRequest(uint64(60+len(c.name)), c.s, f, false)
					if c.set != nil {
						c.set(r)
					}
					if rows := emptyRows(r); len(rows) > 0 {
						t.Fatalf("the case has rows with no visible key: %v", rows)
					}
					want := reference(t, r)
					send := r
					if c.bool {
						send = asBool(r)
					}
					got := call(t, a, send)
					closeTo(t, "o", got.O, want.O, tol)
				})
			}
			t.Run("GQA causal M==N", func(t *testing.T) {
				r := newRequest(50, shape{2, 6, 2, 4, 4, 4, 4}, f, false)
				r.Causal = true
				got := call(t, a, r)
				headMapping(t, r, got.O, bottomRight(r))
				closeTo(t, "o", got.O, reference(t, r).O, tol)
			})
			if !strings.Contains(args, "f16") { // these compare at float32's tolerance
				observeEmptyRow(t, a, f, false)
				t.Run("error response", func(t *testing.T) { errorPath(t, a, f) })
			}
		})
	}
}
