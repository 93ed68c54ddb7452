package conform

import (
	"path/filepath"

	"context"
	"errors"
	"fmt"
	"github.com/attnlab/attnlab/safetensors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// plain is an implementation of attnlab's semantics, to vary one thing of.
func plain(name string, edit func(e *emul)) *emul {
	e := &emul{caps: emulCaps(name), align: AlignPosition, gqa: GQAContiguous, empty: EmptyError}
	if edit != nil {
		edit(e)
	}
	return e
}

func runOn(t *testing.T, impl Implementation) *Report {
	t.Helper()
	rep, err := Run(context.Background(), impl, AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// status returns the status of check name in rep.
func status(rep *Report, name string) CheckResult {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return CheckResult{}
}

// TestVerdictOfKnownImplementations: implementations whose semantics are
// known get the card and the verdict they must, and a broken backward or
// forward is never conformant, whatever it declares.
func TestVerdictOfKnownImplementations(t *testing.T) {
	for _, c := range []struct {
		impl    *emul
		verdict string
		card    func(*Card) string // "" when the card is as expected
		checks  map[string]string  // check → status
	}{
		{plain("attnlab's rule", nil), Conformant, nil, map[string]string{"agrees-with-reference": Pass, "gqa-equals-mha": Pass}},
		// the interleaved mapping is reported, and the checks run under it
		{plain("interleaved", func(e *emul) { e.gqa = GQAInterleaved }), Conformant,
			func(c *Card) string { return want(c.GQA, GQAInterleaved) }, map[string]string{"gqa-equals-mha": Pass, "fd-elements": Pass}},
		{plain("interleaved, no row-sum term", func(e *emul) { e.gqa = GQAInterleaved; e.fault = "no-rowsum" }), NotConformant,
			nil, map[string]string{"ds-rowsum": Fail, "fd-elements": Fail}},
		{plain("no row-sum term", func(e *emul) { e.fault = "no-rowsum" }), NotConformant, nil, map[string]string{"ds-rowsum": Fail}},
		{plain("forward 1 % off", func(e *emul) { e.fault = "fwd-1pct" }), NotConformant, nil, map[string]string{"agrees-with-reference": Fail}},
		{plain("forward only, 1 % off", func(e *emul) { e.fault = "fwd-1pct"; e.caps.Gradients = false }), NotConformant, nil,
			map[string]string{"agrees-with-reference": Fail}},
		// a default scale of 1/D (scaled twice), no scale parameter: measured,
		// and corrected for in q
		{plain("scale 1/D", func(e *emul) { e.scale = func(D int) float64 { return 1 / float64(D) }; e.caps.Scale = false }), Conformant,
			func(c *Card) string {
				if c.Float32ErrorRatio == nil || *c.Float32ErrorRatio > 2 {
					return fmt.Sprintf("float32 ratio %v", c.Float32ErrorRatio)
				}
				return want(c.Scale, ScaleInvD) + want(c.GQA, GQAContiguous)
			}, map[string]string{"agrees-with-reference": Pass, "fd-elements": Pass, "gqa-equals-mha": Pass}},
		// a default no rule names: nothing that needs a scale can be asked
		{plain("scale 0.3", func(e *emul) { e.scale = func(int) float64 { return 0.3 }; e.caps.Scale = false }), Undecided,
			func(c *Card) string {
				return want(c.Scale, "other") + want(c.GQA, NA) + want(fmt.Sprint(c.Float32ErrorRatio == nil), "true") +
					want(fmt.Sprint(c.NotMeasured["gqa"] != ""), "true")
			}, map[string]string{"agrees-with-reference": Skip}},
		// float32 only: tolerances from float32's rounding
		{plain("float32 only", func(e *emul) { e.f32 = true; e.caps.DTypes = []string{"float32"} }), Conformant, nil,
			map[string]string{"ds-rowsum": Pass, "delta-identity": Pass, "shift-invariance": Pass}},
		{plain("float32 only, no row-sum term", func(e *emul) { e.f32 = true; e.caps.DTypes = []string{"float32"}; e.fault = "no-rowsum" }), NotConformant, nil,
			map[string]string{"ds-rowsum": Fail}},
		// no cache: the alignments at M ≠ N cannot be asked; an empty row
		// is probed at M = N
		{plain("no cache, zero rows", func(e *emul) { e.caps.KVCache = false; e.empty = EmptyZero }), NotConformant,
			func(c *Card) string {
				return want(c.CausalMLtN, NA) + want(c.CausalMGtN, NA) + want(c.CausalM1, NA) + want(c.EmptyRow, EmptyZero) +
					want(fmt.Sprint(strings.Contains(c.NotMeasured["causal_m_lt_n"], "no kv_cache")), "true")
			}, map[string]string{"empty-row": Fail}},
		{plain("no cache", func(e *emul) { e.caps.KVCache = false }), Conformant, nil, map[string]string{"chunked-equals-full": Skip}},
		// uniform empty rows: M > N is still the position rule
		{plain("uniform empty rows", func(e *emul) { e.empty = EmptyUniform }), NotConformant,
			func(c *Card) string { return want(c.CausalMGtN, AlignPosition) + want(c.EmptyRow, EmptyUniform) }, nil},
		// forward only: float32 and empty-row test the forward
		{plain("forward only", func(e *emul) { e.caps.Gradients = false }), Conformant, nil,
			map[string]string{"float32": Pass, "empty-row": Pass, "fd-elements": Skip}},
		// top-left by index, the mask off at M = 1: decode right, a chunk wrong
		{plain("top-left, off at decode", func(e *emul) { e.align = "top-left-decode-off"; e.caps.Masks = []string{MaskCausal, MaskBool} }), NotConformant,
			func(c *Card) string {
				return want(c.CausalMLtN, AlignTopLeft) + want(c.CausalM1, AlignPosition)
			}, nil},
		// an empty row handled in one place only
		{plain("empty first row zero", func(e *emul) {
			e.emptyAt = func(i int) string {
				if i == 0 {
					return EmptyZero
				}
				return EmptyError
			}
		}), NotConformant, func(c *Card) string {
			return want(c.EmptyRowAt["first"], EmptyZero) + want(c.EmptyRowAt["middle"], EmptyError) + want(c.EmptyRowAt["last"], EmptyError) + want(c.EmptyRow, EmptyError)
		}, nil},
		// W + 1 keys in a window of W
		{plain("wide window", func(e *emul) { e.wide = true }), NotConformant,
			func(c *Card) string { return want(c.WindowKeys, WindowWPlus) }, nil},
		// an additive −1e4 mask: right at ordinary scores, wrong where every
		// score is very negative
		{plain("additive mask", func(e *emul) { e.maskBias = -1e4; e.caps.Masks = []string{MaskCausal, MaskBool} }), NotConformant,
			func(c *Card) string {
				if c.ExtremeLogits == OK || c.ExtremeLogits == NA {
					return "extreme logits " + c.ExtremeLogits
				}
				return ""
			}, map[string]string{"agrees-with-reference": Pass}},
		// causal by slot, positions ignored: a paged cache's view differs
		{plain("slots", func(e *emul) { e.align = "slots" }), NotConformant,
			func(c *Card) string {
				return want(c.CausalMLtN, AlignBottomRight) + want(fmt.Sprint(strings.HasPrefix(c.CacheLayouts["out-of-order"], "o differs")), "true")
			}, nil},
	} {
		t.Run(c.impl.caps.Name, func(t *testing.T) {
			rep := runOn(t, c.impl)
			if rep.Verdict != c.verdict || rep.Conformant != (c.verdict == Conformant) {
				t.Errorf("verdict %q (conformant %v), want %q; why %q; not established %q", rep.Verdict, rep.Conformant, c.verdict, rep.Why, rep.NotEstablished)
			}
			if c.card != nil {
				if msg := c.card(rep.Card); msg != "" {
					t.Errorf("card: %s (%+v)", msg, *rep.Card)
				}
			}
			for name, st := range c.checks {
				if got := status(rep, name); got.Status != st {
					t.Errorf("%s: %s (%s), want %s", name, got.Status, got.Detail, st)
				}
			}
			if rep.Rule != Rule {
				t.Error("the report does not state its rule")
			}
		})
	}
}

func want(got, w string) string {
	if got != w {
		return fmt.Sprintf("%q, want %q; ", got, w)
	}
	return ""
}

// TestCapabilityRefusedIsAnAdapterFailure: declaring GQA and refusing
// Hkv ≠ Hq is the adapter's failure (exit 3), not "unsupported".
func TestCapabilityRefusedIsAnAdapterFailure(t *testing.T) {
	e := plain("gqa refused", func(e *emul) { e.refuse = func(r *Request) bool { return r.Hkv != r.Hq } })
	_, err := Run(context.Background(), e, AlignPosition)
	var ae *Error
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "declares gqa") {
		t.Errorf("%v, want an adapter failure naming gqa", err)
	}
}

// TestNeverConformantUnchecked tries capability declarations and
// semantics at random: a conformant verdict always rests on checks that
// ran, with none it should answer skipped, and a broken forward, or a
// broken backward it declares, is never conformant.
func TestNeverConformantUnchecked(t *testing.T) {
	n := 60
	if testing.Short() || raceEnabled {
		n = 12
	}
	r := rand.New(rand.NewPCG(7, 7))
	allMasks := []string{MaskCausal, MaskBool, MaskPositions, MaskValidity, MaskSegments, MaskWindow}
	for i := range n {
		e := plain(fmt.Sprint("random ", i), nil)
		c := &e.caps
		c.Gradients, c.LSE, c.GQA, c.KVCache, c.Scale = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
		c.DTypes = [][]string{{"float64"}, {"float32"}, {"float64", "float32"}}[r.IntN(3)]
		e.f32 = !c.HasDType("float64")
		c.Masks = nil
		for _, m := range allMasks {
			if r.IntN(2) == 0 {
				c.Masks = append(c.Masks, m)
			}
		}
		if len(c.Masks) == 0 {
			c.Masks = []string{MaskCausal}
		}
		e.gqa = []string{GQAContiguous, GQAInterleaved}[r.IntN(2)]
		if r.IntN(3) == 0 {
			e.scale = []func(int) float64{func(D int) float64 { return 1 / float64(D) }, func(int) float64 { return 1 }, func(int) float64 { return 0.3 }}[r.IntN(3)]
		}
		e.fault = []string{"", "", "no-rowsum", "fwd-1pct"}[r.IntN(4)]
		rep, err := Run(context.Background(), e, AlignPosition)
		if err != nil {
			t.Fatalf("%+v: %v", *c, err)
		}
		desc := fmt.Sprintf("%v masks %v, gqa %s, fault %q", rep.Capabilities.DTypes, c.Masks, e.gqa, e.fault)
		if rep.Verdict != Conformant {
			continue
		}
		ran := slices.ContainsFunc(rep.Checks, func(c CheckResult) bool { return c.Status == Pass })
		deciding := slices.ContainsFunc(rep.Checks, func(c CheckResult) bool { return c.Status == Skip && !c.Undeclared })
		if !ran || deciding || len(rep.NotEstablished) > 0 {
			t.Errorf("%s: conformant with ran=%v, a deciding check skipped=%v", desc, ran, deciding)
		}
		if e.fault == "fwd-1pct" || e.fault == "no-rowsum" && c.Gradients {
			t.Errorf("%s: conformant with the fault %s (gradients %v)", desc, e.fault, c.Gradients)
		}
	}
}

// TestDiff: two implementations that differ in one convention differ in
// that card row and in the answers, and the first differing request is
// written for reproduction; one compared with itself shows nothing.
func TestDiff(t *testing.T) {
	a, b := plain("window of W", nil), plain("window of W+1", func(e *emul) { e.wide = true })
	d, err := Diff(context.Background(), a, b, AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(d.Card, func(f FieldDiff) bool { return f.Name == "window_keys" && f.A == WindowW && f.B == WindowWPlus }) {
		t.Errorf("card diff %+v lacks window_keys W / W+1", d.Card)
	}
	for _, f := range d.Card {
		if f.Name != "window_keys" && !strings.HasPrefix(f.Name, "float32") {
			t.Errorf("card differs in %s too: %+v", f.Name, f)
		}
	}
	if d.Differ == 0 || d.First == nil || d.First.Request.Window == 0 || d.Replayed == 0 {
		t.Fatalf("answers: %d of %d differ, first %+v", d.Differ, d.Replayed, d.First)
	}
	dir := filepath.Join(t.TempDir(), "repro")
	if err := d.WriteRepro(dir); err != nil {
		t.Fatal(err)
	}
	req, err := safetensors.ReadFile(filepath.Join(dir, "request.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRequest(req)
	if err != nil || r.Window != d.First.Request.Window {
		t.Fatalf("the saved request: %+v, %v", r, err)
	}
	// replayed, the saved request shows the difference again
	ra, _ := a.Attention(r)
	rb, _ := b.Attention(r)
	if answersDiffer(r, ra, rb) == "" {
		t.Error("the saved request does not reproduce the difference")
	}
	var text strings.Builder
	d.WriteText(&text)
	if !strings.Contains(text.String(), "window_keys") || !strings.Contains(text.String(), "first: request") {
		t.Errorf("text:\n%s", text.String())
	}
	same, err := Diff(context.Background(), a, plain("again", nil), AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	if !same.Same() || same.Differ != 0 || same.WriteRepro(dir+"2") == nil {
		t.Errorf("an implementation against itself: %+v", same)
	}
	// a request outside what B declares is not sent to it
	noCache := plain("no cache", func(e *emul) { e.caps.KVCache = false })
	d, err = Diff(context.Background(), a, noCache, AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	if d.Skipped == 0 {
		t.Error("requests at M ≠ N were sent to an implementation without a cache")
	}
}

// TestRefusedWithinDeclaration: an implementation that declares a cache and
// the causal flag but refuses them together (a layer whose causal flag
// demands M = N) is never conformant: the card's causal fields say n/a and
// name the refusal, the checks that need a causal chunk are skipped as
// checks it should answer (not as undeclared), and the verdict is not
// established, even with a backward that drops the row-sum term, which only
// those checks could see.
func TestRefusedWithinDeclaration(t *testing.T) {
	for _, fault := range []string{"", "no-rowsum"} {
		e := plain("causal flag only at M = N", func(e *emul) {
			e.caps.Masks = []string{MaskCausal, MaskValidity}
			e.caps.LSE, e.caps.GQA = false, false
			e.refuse = func(r *Request) bool { return r.Causal && r.M != r.N }
			e.fault = fault
		})
		rep := runOn(t, e)
		if rep.Verdict == Conformant {
			t.Fatalf("fault %q: conformant, resting on %v; not covered %v", fault, rep.Checks, rep.NotCovered)
		}
		if fault == "" && rep.Verdict != Undecided {
			t.Errorf("verdict %q, want %q (why %v)", rep.Verdict, Undecided, rep.Why)
		}
		for _, f := range []string{"causal_m_lt_n", "causal_m_1"} {
			if !slices.Contains(rep.Card.Refused, f) {
				t.Errorf("fault %q: card.Refused = %v, missing %s", fault, rep.Card.Refused, f)
			}
		}
		if !strings.Contains(strings.Join(rep.NotEstablished, "\n"), "causal alignment at M < N") {
			t.Errorf("fault %q: not established %q does not name the refused causal alignment", fault, rep.NotEstablished)
		}
		for _, name := range []string{"fd-elements", "chunked-equals-full"} {
			if c := status(rep, name); c.Status != Skip || c.Undeclared || !strings.Contains(c.Detail, "declares and refused") {
				t.Errorf("fault %q: check %s = %+v, want skipped as declared and refused", fault, name, c)
			}
		}
	}
}
