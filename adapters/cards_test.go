package adapters_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/attnlab/attnlab/conform"
)

// TestCards runs attnlab conform's measurement on every real
// implementation and checks its card: what each one does where kernels
// disagree (the findings of the README, measured here on every run).
func TestCards(t *testing.T) {
	for _, c := range []struct {
		name, command string
		torch         bool
		want          conform.Card // the fields compared; Notes and the ratio aside
		conformant    bool
	}{
		{"torch composite", pythonAdapter("torch_composite.py"), true,
			conform.Card{CausalMLtN: "position", CausalMGtN: "position", CausalM1: "position", EmptyRow: "error", EmptyRowAt: every("error"), PaddingRows: "zero",
				GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W", ExtremeLogits: "ok", CacheLayouts: layoutsOK}, true},
		{"torch composite, plain", pythonAdapter("torch_composite.py") + " --plain", true,
			conform.Card{CausalMLtN: "position", CausalMGtN: "position", CausalM1: "position", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "zero",
				GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "W", ExtremeLogits: "ok", CacheLayouts: layoutsOK}, false},
		{"torch sdpa", pythonAdapter("torch_sdpa.py"), true,
			conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "unsupported",
				GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}, false},
		{"torch mha", pythonAdapter("torch_mha.py"), true,
			conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "bottom-right", CausalM1: "position", EmptyRow: "nan", EmptyRowAt: every("nan"), PaddingRows: "unsupported",
				GQA: "unsupported", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}, false},
		{"ort attention, cache", nodeAdapter("attention"), false,
			conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "top-left", CausalM1: "position", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
				GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}, false},
		{"ort attention, no cache", nodeAdapter("attention --no-cache"), false,
			conform.Card{CausalMLtN: "top-left", CausalMGtN: "top-left", CausalM1: "top-left", EmptyRow: "zero", EmptyRowAt: every("zero"), PaddingRows: "unsupported",
				GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}, false},
		{"ort gqa", nodeAdapter("gqa"), false,
			conform.Card{CausalMLtN: "bottom-right", CausalMGtN: "n/a", CausalM1: "position", EmptyRow: "n/a", PaddingRows: "unsupported",
				GQA: "contiguous", Scale: "1/sqrt(D)", WindowKeys: "n/a", ExtremeLogits: "ok"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.torch {
				needTorch(t)
			} else {
				needORT(t)
			}
			a := start(t, c.command)
			rep, err := conform.Run(context.Background(), a, "position")
			if err != nil {
				t.Fatal(err)
			}
			got := *rep.Card
			got.Notes, got.Float32ErrorRatio, got.NotMeasured = nil, nil, nil
			if (got.EmptyRowBackwardConsistent == nil) != (c.want.EmptyRowBackwardConsistent == nil) ||
				got.EmptyRowBackwardConsistent != nil && *got.EmptyRowBackwardConsistent != *c.want.EmptyRowBackwardConsistent {
				t.Errorf("empty row backward consistent: %v, want %v", got.EmptyRowBackwardConsistent, c.want.EmptyRowBackwardConsistent)
			}
			got.EmptyRowBackwardConsistent, c.want.EmptyRowBackwardConsistent = nil, nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("card\n%+v\nwant\n%+v", got, c.want)
			}
			if len(got.EmptyRowAt) == 0 {
				got.EmptyRowAt = nil
			}
			if rep.Conformant != c.conformant {
				t.Errorf("conformant %v, want %v: %v", rep.Conformant, c.conformant, rep.Why)
			}
			t.Logf("%s: %d calls in %.2f s; float32 error ratio %v; not conformant because %v", rep.Implementation, rep.Calls, rep.Seconds, ratio(rep.Card), rep.Why)
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
