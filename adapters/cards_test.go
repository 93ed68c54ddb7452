package adapters_test

import (
	"cmp"
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

// cardCase is a shipped adapter, how to start it, and the card it must
// measure.
type cardCase struct {
	name string
	exec string       // the shipped adapter's name, started as attnlab conform -exec NAME starts it
	want conform.Card // the fields compared; Notes, NotMeasured and the ratio aside
	// conformant is the verdict wanted
	conformant bool
}

// variants is c with the rows of an implementation of sinks, softcap and
// ALiBi as docs/design.md §3.1 defines them.
func variants(c conform.Card) conform.Card {
	c.Sinks, c.Softcap, c.Alibi = conform.Supported, conform.Supported, conform.Supported
	c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance = conform.EmptyZero, conform.SinkGradReturned, conform.SoftcapBeforeMask, conform.AlibiPositions
	return c
}

// noVariants is c with the rows of an implementation that declares none of
// them.
func noVariants(c conform.Card) conform.Card {
	c.Sinks, c.Softcap, c.Alibi = conform.NotDeclared, conform.NotDeclared, conform.NotDeclared
	c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance = conform.NA, conform.NA, conform.NA, conform.NA
	return c
}

var cardCases = []cardCase{
	{"torch composite", "torch-composite",
		variants(conform.Card{CausalMLtN: "position", CausalMGtN: "position", CausalM1: "position", EmptyRow: "error", EmptyRowAt: every("error"), PaddingRows: "zero",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W", ExtremeLogits: "ok", CacheLayouts: layoutsOK}), true},
	{"torch composite, plain", "torch-composite-plain",
		variants(conform.Card{CausalMLtN: "position", CausalMGtN: "position", CausalM1: "position", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "zero",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W", ExtremeLogits: "ok", CacheLayouts: layoutsOK}), false},
	{"torch sdpa", "torch-sdpa",
		noVariants(conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"torch mha", "torch-mha",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "bottom-right", CausalM1: "position", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort attention, cache", "ort-attention",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort attention, no cache", "ort-attention-no-cache",
		noVariants(conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort gqa", "ort-gqa",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "n/a", CausalM1: "position", EmptyRow: "n/a", PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// masked_fill(-1e8) then softmax: a fully masked row is the mean of V,
	// and its backward is that function's derivative
	{"torchtext sdp", "torchtext-sdp",
		noVariants(conform.Card{CausalMLtN: "n/a", CausalMGtN: "n/a", CausalM1: "n/a", EmptyRow: "uniform", EmptyRowAt: every("uniform"), EmptyRowBackwardConsistent: new(true),
			PaddingRows: "unsupported", GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// the causal flag panics at M ≠ N (refused: n/a); the logits are
	// divided by √D twice (docs/findings/gomlx-mha-double-scale.md); the
	// checks run under that scale and pass. It declares a cache and the
	// causal flag and refuses them together (its causal flag demands
	// M = N), so the checks that need a causal chunk cannot run: not
	// established, not conformant
	{"gomlx mha", "gomlx-mha",
		noVariants(conform.Card{CausalMLtN: "n/a", CausalMGtN: "n/a", CausalM1: "n/a", EmptyRow: "n/a", PaddingRows: "zero",
			GQA: "unsupported", Scale: "1/D", WindowKeys: "n/a", ExtremeLogits: "ok",
			Refused: []string{"causal_m_lt_n", "causal_m_gt_n", "causal_m_1"}}), false},
	// MaskedSoftmax gives a row with no visible key zeros, and a zero
	// gradient that is the derivative of that
	{"gomlx masked softmax", "gomlx-masked-softmax",
		noVariants(conform.Card{CausalMLtN: "n/a", CausalMGtN: "n/a", CausalM1: "n/a", EmptyRow: "zero", EmptyRowAt: every("zero"), EmptyRowBackwardConsistent: new(true),
			PaddingRows: "zero", GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// the causal mask by the query's index in the chunk, and off for a
	// single query (docs/findings/spago-causal-chunk.md)
	{"spago", "spago",
		noVariants(conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "n/a", PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// com.microsoft MultiHeadAttention: with past inputs the causal chunk is
	// bottom-right; without them and N > M, the last query row sees every
	// key while the others are top-left (docs/findings/ort-mha-unidirectional-last-row.md).
	// A fully masked row adds mask_filter_value (-10000) to every score:
	// the row is the unmasked attention ("other").
	{"ort mha, cache", "ort-mha",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "other", EmptyRowAt: every("other"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort mha, no cache", "ort-mha-no-cache",
		noVariants(conform.Card{CausalMLtN: "other", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "other", EmptyRowAt: every("other"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// the Attention op in earlier versions: a fully masked row is uniform
	// in 1.24.3 and 1.27.0, zero in 1.30.0 (docs/findings/ort-attention-version-drift.md)
	{"ort attention 1.24, cache", "ort-attention-1.24",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "uniform", EmptyRowAt: every("uniform"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort attention 1.27, cache", "ort-attention-1.27",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "uniform", EmptyRowAt: every("uniform"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// onnxruntime-web, the WASM build of the same CPU kernels: the native
	// 1.30 cards
	{"ort web attention, cache", "ort-web-attention",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort web attention, no cache", "ort-web-attention-no-cache",
		noVariants(conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort web gqa", "ort-web-gqa",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "n/a", CausalM1: "position", EmptyRow: "n/a", PaddingRows: "unsupported",
			GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort web mha, cache", "ort-web-mha",
		noVariants(conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "other", EmptyRowAt: every("other"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	{"ort web mha, no cache", "ort-web-mha-no-cache",
		noVariants(conform.Card{CausalMLtN: "other", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "other", EmptyRowAt: every("other"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
	// TF.js MultiHeadAttention: Keras's top-left causal mask at every M,
	// including one query after a cache; a fully masked row adds -1e9 to
	// every score and is uniform
	{"tfjs mha", "tfjs-mha",
		noVariants(conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "uniform", EmptyRowAt: every("uniform"), PaddingRows: "unsupported",
			GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}), false},
}

// cardMissing is why c's adapter cannot run here, or "".
func cardMissing(c cardCase) string {
	s, ok := adapters.Lookup(c.exec)
	if !ok {
		panic("adapters_test: no shipped adapter " + c.exec)
	}
	return s.Missing()
}

// runCard measures c's card, skipping when its runtime is missing. The
// report is measured once per test binary: TestCards and
// TestConformCards read the same run.
func runCard(t *testing.T, c cardCase) *conform.Report {
	t.Helper()
	if why := cardMissing(c); why != "" {
		t.Skipf("%s skipped: %s", c.name, why)
	}
	if rep, ok := cardReports.Load(c.exec); ok {
		return rep.(*conform.Report)
	}
	a := start(t, c.exec)
	rep, err := conform.Run(context.Background(), a, "position")
	if err != nil {
		t.Fatal(err)
	}
	cardReports.Store(c.exec, rep)
	return rep
}

var cardReports sync.Map // shipped adapter's name → *conform.Report

// TestCards runs attnlab conform's measurement on every real
// implementation and checks its card: what each one does where kernels
// disagree (the findings of docs/conform.md, measured here on every run).
func TestCards(t *testing.T) {
	for _, c := range cardCases {
		t.Run(c.name, func(t *testing.T) {
			rep := runCard(t, c)
			got := *rep.Card
			got.Notes, got.Float32ErrorRatio, got.NotMeasured = nil, nil, nil
			if len(got.EmptyRowAt) == 0 {
				got.EmptyRowAt = nil
			}
			if (got.EmptyRowBackwardConsistent == nil) != (c.want.EmptyRowBackwardConsistent == nil) ||
				got.EmptyRowBackwardConsistent != nil && *got.EmptyRowBackwardConsistent != *c.want.EmptyRowBackwardConsistent {
				t.Errorf("empty row backward consistent: %v, want %v", got.EmptyRowBackwardConsistent, c.want.EmptyRowBackwardConsistent)
			}
			got.EmptyRowBackwardConsistent, c.want.EmptyRowBackwardConsistent = nil, nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("card\n%+v\nwant\n%+v", got, c.want)
			}
			if rep.Conformant != c.conformant {
				t.Errorf("conformant %v, want %v: %v", rep.Conformant, c.conformant, rep.Why)
			}
			// the variants' checks ran through the protocol and passed where
			// declared, and are not covered where not
			declared := c.want.Sinks == conform.Supported
			ran := 0
			for _, ch := range rep.Checks {
				if !strings.HasPrefix(ch.Name, conform.VariantPrefix) {
					continue
				}
				if want, ok := variantChecks[c.name]; ok { // some variants declared, not all
					got := map[bool]string{true: "not covered", false: "skip"}[ch.Undeclared]
					if ch.Status != conform.Skip {
						got = ch.Status
					}
					if w := cmp.Or(want[ch.Name], "not covered"); got != w {
						t.Errorf("%s: %s %s, want %s", ch.Name, got, ch.Detail, w)
					}
					continue
				}
				switch {
				case declared && ch.Status == conform.Pass:
					ran++
				case declared && ch.Name == conform.VariantPrefix+"accumulates" && ch.Undeclared:
				case declared:
					t.Errorf("%s: %s %s, want pass", ch.Name, ch.Status, ch.Detail)
				case ch.Status != conform.Skip || !ch.Undeclared:
					t.Errorf("%s: %s %s, want not covered (no variant declared)", ch.Name, ch.Status, ch.Detail)
				}
			}
			if _, partial := variantChecks[c.name]; declared && !partial && ran < 10 {
				t.Errorf("%d checks of the variants passed through the protocol, want every one", ran)
			}
			t.Logf("%s: %d calls in %.2f s; float32 error ratio %v; verdict %s because %v", rep.Implementation, rep.Calls, rep.Seconds, ratio(rep.Card), rep.Verdict, rep.Why)
		})
	}
}

func ratio(c *conform.Card) any {
	if c.Float32ErrorRatio == nil {
		return nil
	}
	return *c.Float32ErrorRatio
}

// every is an empty row that gives v in every place.
func every(v string) map[string]string {
	return map[string]string{"first": v, "middle": v, "last": v, "leading": v}
}

var layoutsOK = map[string]string{"static": "ok", "left-padded": "ok", "out-of-order": "ok"}
