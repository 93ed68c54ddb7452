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
	t.Parallel() // after the fast tests, beside the other slow ones
	for _, c := range []struct {
		impl    *emul
		verdict string
		card    func(*Card) string // "" when the card is as expected
		checks  map[string]string  // check → status
	}{
		{plain("attnlab's rule", nil), Conformant, nil,
			map[string]string{"agrees-with-reference": Pass, "gqa-equals-mha": Pass, "accumulates": Skip, "conventions": Skip}},
		// the interleaved mapping is reported, and the checks run under it
		{plain("interleaved", func(e *emul) { e.gqa = GQAInterleaved }), Conformant,
			func(c *Card) string { return want(c.GQA, GQAInterleaved) }, map[string]string{"gqa-equals-mha": Pass, "fd-elements": Pass}},
		{plain("interleaved, no row-sum term", func(e *emul) { e.gqa = GQAInterleaved; e.fault = "no-rowsum" }), NotConformant,
			nil, map[string]string{"ds-rowsum": Fail, "fd-elements": Fail}},
		{plain("no row-sum term", func(e *emul) { e.fault = "no-rowsum" }), NotConformant,
			func(c *Card) string {
				return want(fmt.Sprint(strings.HasPrefix(c.CacheLayouts["static"], "dq differs")), "true") +
					want(fmt.Sprint(strings.Contains(c.ExtremeLogits, ": dq off by")), "true")
			}, map[string]string{"ds-rowsum": Fail, "agrees-with-reference": Fail}},
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
		// the causal flag ignored: every query reads every key, which no
		// alignment is
		{plain("causal flag ignored", func(e *emul) { e.align = "none"; e.caps.Masks = []string{MaskCausal, MaskBool} }), NotConformant,
			func(c *Card) string {
				return want(c.CausalMLtN, AlignOther) + want(c.CausalMGtN, AlignOther) + want(c.CausalM1, AlignPosition)
			}, nil},
		// positions and no causal flag: the rule is in the positions
		{plain("positions, no causal flag", func(e *emul) { e.caps.Masks = []string{MaskPositions, MaskValidity, MaskSegments, MaskWindow} }), Conformant,
			func(c *Card) string {
				return want(c.CausalMLtN, AlignPosition) + want(c.CausalMGtN, AlignPosition) + want(c.CausalM1, AlignPosition) +
					want(c.WindowKeys, WindowW) + want(c.ExtremeLogits, OK)
			}, map[string]string{"chunked-equals-full": Pass}},
		// a boolean mask and a window, no causal flag: a causal window
		// cannot be asked, the checks go through the boolean mask
		{plain("bool and window", func(e *emul) { e.caps.Masks = []string{MaskBool, MaskWindow} }), Conformant,
			func(c *Card) string {
				return want(c.CausalMLtN, NA) + want(c.WindowKeys, NA) + want(c.NotMeasured["window_keys"], "no causal flag and no positions: a causal window cannot be asked") +
					want(c.NotMeasured["causal_m_lt_n"], "no causal flag and no positions: the causal alignment cannot be asked") + want(c.EmptyRow, EmptyError)
			}, map[string]string{"agrees-with-reference": Pass, "chunked-equals-full": Pass}},
		// positions without validity: no cache layouts, no padding rows
		{plain("no validity", func(e *emul) { e.caps.Masks = []string{MaskCausal, MaskPositions} }), Conformant,
			func(c *Card) string {
				return want(fmt.Sprint(c.CacheLayouts), "map[]") + want(c.NotMeasured["cache_layouts"], "needs kv_cache with positions and validity masks") +
					want(c.PaddingRows, "unsupported")
			}, nil},
		// an explicit scale is taken, and the default is 1/D: the probes
		// pass 1/√D and compare at it
		{plain("takes a scale, default 1/D", func(e *emul) { e.scale = func(D int) float64 { return 1 / float64(D) } }), Conformant,
			func(c *Card) string {
				return want(c.Scale, ScaleInvD) + want(c.GQA, GQAContiguous) + want(c.ExtremeLogits, OK) + want(fmt.Sprint(c.CacheLayouts), "map[left-padded:ok out-of-order:ok static:ok]")
			}, nil},
		// a float64 forward 1e-6 off: the card's comparisons are at float64's precision
		{plain("forward 1e-6 off", func(e *emul) { e.fault = "fwd-1e-6" }), NotConformant,
			func(c *Card) string {
				return want(fmt.Sprint(strings.HasPrefix(c.CacheLayouts["static"], "o differs from the reference by ")), "true") +
					want(fmt.Sprint(strings.HasPrefix(c.CacheLayouts["out-of-order"], "o differs from the reference by ")), "true") +
					want(fmt.Sprint(strings.Contains(c.ExtremeLogits, ": o off by ")), "true")
			}, map[string]string{"agrees-with-reference": Fail}},
		// float32 only with an additive −1e4 mask: wrong at extreme
		// logits, whatever float32's rounding allows there
		{plain("float32 only, additive mask", func(e *emul) {
			e.f32, e.caps.DTypes, e.maskBias, e.caps.Masks = true, []string{"float32"}, -1e4, []string{MaskCausal, MaskBool}
		}), NotConformant,
			func(c *Card) string {
				return want(fmt.Sprint(strings.HasPrefix(c.ExtremeLogits, "N = 65, scores near -1e+04: o off by")), "true")
			}, nil},
		// float64 arithmetic rounded to float32 at the end: more accurate
		// than a plain float32 implementation
		{plain("float32 answers of float64 arithmetic", func(e *emul) { e.out32 = true }), Conformant,
			func(c *Card) string {
				if c.Float32ErrorRatio == nil || !(*c.Float32ErrorRatio < 0.9) {
					return fmt.Sprintf("float32 error ratio %v, want below 0.9", c.Float32ErrorRatio)
				}
				return ""
			}, nil},
		// a window of W + 2 keys matches neither convention
		{plain("window of W+2", func(e *emul) { e.wider = true }), NotConformant,
			func(c *Card) string {
				return want(c.WindowKeys, AlignOther) + want(fmt.Sprint(slices.Contains(c.Notes, "window of 2: query 3 sees 4 keys")), "true")
			}, nil},
		// empty rows: the notes say where they differ, and whether the
		// backward there is the forward's derivative
		{plain("empty rows refused", nil), Conformant,
			func(c *Card) string {
				return want(fmt.Sprint(c.EmptyRowBackwardConsistent), "<nil>") + want(strings.Join(c.Notes, "; "), emptyNotes+"empty row: batch 0 row 1: no visible key")
			}, nil},
		{plain("zero empty rows", func(e *emul) { e.empty = EmptyZero }), NotConformant,
			func(c *Card) string {
				return want(fmt.Sprint(*c.EmptyRowBackwardConsistent), "true") + want(strings.Join(c.Notes, "; "), "")
			}, nil},
		{plain("uniform empty rows, backward", func(e *emul) { e.empty = EmptyUniform }), NotConformant,
			func(c *Card) string { return want(fmt.Sprint(*c.EmptyRowBackwardConsistent), "true") }, nil},
		{plain("zero empty rows, a uniform backward", func(e *emul) { e.empty, e.emptyBack = EmptyZero, EmptyUniform }), NotConformant,
			func(c *Card) string {
				return want(fmt.Sprint(*c.EmptyRowBackwardConsistent), "false") +
					want(fmt.Sprint(slices.ContainsFunc(c.Notes, func(n string) bool { return strings.HasPrefix(n, "empty row backward: dv[0] = ") })), "true")
			}, nil},
		{plain("NaN empty rows", func(e *emul) { e.empty = EmptyNaN }), NotConformant,
			func(c *Card) string {
				// at M > N the rows before the first key are NaN: empty
				// rows, not a sign of another alignment
				return want(c.CausalMGtN, AlignPosition) + want(c.EmptyRow, EmptyNaN) + want(fmt.Sprint(c.EmptyRowBackwardConsistent), "<nil>") + want(strings.Join(c.Notes, "; "),
					"empty row: the forward is NaN, so its backward cannot be its derivative; the backward of a loss on that row gives dq of the row NaN, dk NaN, dv NaN")
			}, nil},
		{plain("empty first row zero, notes", func(e *emul) {
			e.emptyAt = func(i int) string {
				if i == 0 {
					return EmptyZero
				}
				return EmptyError
			}
		}), NotConformant, func(c *Card) string {
			return want(strings.Join(c.Notes, "; "), emptyNotes+"empty row: batch 0 row 1: no visible key; empty row: error as the middle row, zero as the first")
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
			// attnlab's += contract and its convention parameter are not
			// asked of an implementation that does not declare them
			for name, declared := range map[string]bool{"accumulates": c.impl.caps.Accumulates, "conventions": c.impl.caps.Conventions} {
				if got := status(rep, name); !declared && (got.Status != Skip || !got.Undeclared || !strings.HasPrefix(got.Detail, "not applicable: ")) {
					t.Errorf("%s: %s (undeclared %v) %s, want not applicable", name, got.Status, got.Undeclared, got.Detail)
				}
			}
			if rep.Rule != Rule {
				t.Error("the report does not state its rule")
			}
		})
	}
}

// emptyNotes is the note of the causal probe at M > N of an
// implementation that refuses an empty row.
const emptyNotes = "M = 6, N = 3: the first 3 queries see no key under the position rule; asked with them as padding; "

// TestCardOfNoisyFloat32: float32 answers that move in the last bits from
// call to call (a reduction in no fixed order) are not mistaken for a key
// being read.
func TestCardOfNoisyFloat32(t *testing.T) {
	card, err := measureCard(plain("float32, not deterministic", func(e *emul) { e.f32, e.jitter, e.caps.DTypes = true, true, []string{"float32"} }))
	if err != nil {
		t.Fatal(err)
	}
	if msg := want(card.CausalMLtN, AlignPosition) + want(card.CausalMGtN, AlignPosition) + want(card.CausalM1, AlignPosition) +
		want(card.WindowKeys, WindowW) + want(card.EmptyRow, EmptyError) + want(card.ExtremeLogits, OK); msg != "" {
		t.Errorf("card: %s", msg)
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
	t.Parallel() // after the fast tests, beside the other slow ones
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
	t.Parallel() // after the fast tests, beside the other slow ones
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

// failAt is an implementation whose plumbing fails at its call number at
// (an adapter that crashed), or that cancels the run there; at 0 never.
type failAt struct {
	Implementation
	at, calls int
	cancel    func()
}

var errCrashed = errors.New("the adapter crashed")

func (f *failAt) Attention(r *Request) (*Response, error) {
	f.calls++
	if f.calls == f.at {
		if f.cancel != nil {
			f.cancel()
		} else {
			return nil, errCrashed
		}
	}
	if f.at > 0 && f.calls > f.at && f.cancel == nil {
		panic("called after it failed")
	}
	return f.Implementation.Attention(r)
}

// TestRunStopsOnFailure: a failure of the implementation's plumbing, in
// the card's probes, the comparison with the reference, the checks or the
// variants' checks, stops the run with that error and no report; so does
// a cancelled context.
func TestRunStopsOnFailure(t *testing.T) {
	t.Parallel() // after the fast tests, beside the other slow ones
	whole := &failAt{Implementation: Reference()}
	card, err := measureCard(whole)
	if err != nil {
		t.Fatal(err)
	}
	inCard := whole.calls
	if _, err := runChecks(context.Background(), &wrapped{impl: whole, caps: whole.Capabilities(), card: card}); err != nil {
		t.Fatal(err)
	}
	total := whole.calls
	// 1: the scale's probe; 2: the first of a visibility probe's
	for _, at := range []int{1, 2, inCard / 2, inCard + 1, inCard + 3, (inCard + total) / 2, total - 3, total} {
		f := &failAt{Implementation: Reference(), at: at}
		rep, err := Run(context.Background(), f, AlignPosition)
		if !errors.Is(err, errCrashed) || rep != nil {
			t.Errorf("a crash at call %d of %d: report %v, error %v", at, total, rep != nil, err)
		}
	}
	for _, at := range []int{inCard / 2, inCard + 3, (inCard + total) / 2} {
		ctx, cancel := context.WithCancel(context.Background())
		f := &failAt{Implementation: Reference(), at: at, cancel: cancel}
		rep, err := Run(ctx, f, AlignPosition)
		if !errors.Is(err, context.Canceled) || rep != nil {
			t.Errorf("cancelled at call %d of %d: report %v, error %v", at, total, rep != nil, err)
		}
		if at > inCard && f.calls >= total {
			t.Errorf("cancelled at call %d, it went on to the end (call %d of %d)", at, f.calls, total)
		}
	}
}
