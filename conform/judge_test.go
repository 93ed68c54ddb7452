package conform

import (
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goodCard is the card of an implementation of attnlab's semantics that
// declares every mask kind and a cache.
func goodCard() *Card {
	return &Card{CausalMLtN: AlignPosition, CausalMGtN: AlignPosition, CausalM1: AlignPosition,
		EmptyRow: EmptyError, EmptyRowAt: map[string]string{"first": EmptyError, "middle": EmptyError, "last": EmptyError, "leading": EmptyError},
		WindowKeys: WindowW, ExtremeLogits: OK, CacheLayouts: map[string]string{"static": OK, "left-padded": OK, "out-of-order": OK},
		Sinks: NotDeclared, Softcap: NotDeclared, Alibi: NotDeclared, SinksEmptyRow: NA, SinksGrad: NA, SoftcapOrder: NA, AlibiDistance: NA}
}

func passed(names ...string) []CheckResult {
	var out []CheckResult
	for _, n := range names {
		out = append(out, CheckResult{Name: n, Status: Pass})
	}
	return out
}

// TestJudge: the verdict rule on given cards and check results: what
// makes a report not conformant (and the reason it gives), not established
// (and what could not be run), and what it lists as not covered.
func TestJudge(t *testing.T) {
	undeclared := CheckResult{Name: "fd-elements", Status: Skip, Detail: "needs gradients", Undeclared: true}
	for _, tc := range []struct {
		name     string
		contract string
		card     func(c *Card)
		checks   []CheckResult
		verdict  string
		why, ne  []string
		covered  []string // NotCovered, exactly
	}{
		{name: "all measured right, checks passed", verdict: Conformant},
		{name: "a chunk aligned top-left", card: func(c *Card) { c.CausalMLtN = AlignTopLeft }, verdict: NotConformant,
			why: []string{"causal alignment at M < N is top-left, the contract position"}},
		{name: "more queries than keys bottom-right", card: func(c *Card) { c.CausalMGtN = AlignBottomRight }, verdict: NotConformant,
			why: []string{"causal alignment at M > N is bottom-right, the contract position"}},
		{name: "decode top-left", card: func(c *Card) { c.CausalM1 = AlignTopLeft }, verdict: NotConformant,
			why: []string{"causal alignment at M = 1 is top-left, the contract position"}},
		{name: "top-left everywhere, top-left contract", contract: AlignTopLeft,
			card:    func(c *Card) { c.CausalMLtN, c.CausalMGtN, c.CausalM1 = AlignTopLeft, AlignTopLeft, AlignTopLeft },
			verdict: Conformant},
		{name: "top-left contract, decode sees every key", contract: AlignTopLeft,
			card:    func(c *Card) { c.CausalMLtN, c.CausalMGtN = AlignTopLeft, AlignTopLeft },
			verdict: NotConformant, why: []string{"causal alignment at M = 1 is position, the contract top-left"}},
		{name: "bottom-right contract: decode by the position rule", contract: AlignBottomRight,
			card:    func(c *Card) { c.CausalMLtN, c.CausalMGtN = AlignBottomRight, AlignBottomRight },
			verdict: Conformant},
		{name: "no cache: the alignments at M ≠ N not covered", card: func(c *Card) {
			c.CausalMLtN, c.CausalMGtN, c.CausalM1 = NA, NA, NA
			c.NotMeasured = map[string]string{"causal_m_lt_n": "no kv_cache", "causal_m_gt_n": "no kv_cache (2)", "causal_m_1": "no kv_cache (3)"}
		}, verdict: Conformant, covered: []string{"causal alignment at M < N: no kv_cache", "causal alignment at M > N: no kv_cache (2)", "causal alignment at M = 1: no kv_cache (3)"}},
		{name: "empty rows not expressible", card: func(c *Card) {
			c.EmptyRow, c.EmptyRowAt = NA, nil
			c.NotMeasured = map[string]string{"empty_row": "no segments"}
		}, verdict: Conformant, covered: []string{"a valid row with no visible key: no segments"}},
		{name: "empty rows zero in two places, NaN in a third", card: func(c *Card) {
			c.EmptyRowAt["first"], c.EmptyRowAt["last"], c.EmptyRowAt["leading"] = EmptyZero, EmptyZero, EmptyNaN
		}, verdict: NotConformant, why: []string{
			"a valid row with no visible key gives zero (as the first, last row); the contract is an error naming the row (DESIGN §2)",
			"a valid row with no visible key gives nan (as the leading row); the contract is an error naming the row (DESIGN §2)"}},
		{name: "no window mask", card: func(c *Card) { c.WindowKeys = NA; c.NotMeasured = map[string]string{"window_keys": "no window mask"} },
			verdict: Conformant, covered: []string{"the window convention: no window mask"}},
		{name: "a window of W+1", card: func(c *Card) { c.WindowKeys = WindowWPlus }, verdict: NotConformant,
			why: []string{"a window of W sees W+1 keys; the contract is W, the current one included"}},
		{name: "extreme logits not measured", card: func(c *Card) {
			c.ExtremeLogits = NA
			c.NotMeasured = map[string]string{"extreme_logits": "no scale"}
		}, verdict: Conformant, covered: []string{"extreme logits: no scale"}},
		{name: "extreme logits zero", card: func(c *Card) { c.ExtremeLogits = "N = 65: o all zero" }, verdict: NotConformant,
			why: []string{"extreme logits: N = 65: o all zero"}},
		{name: "no cache layouts", card: func(c *Card) {
			c.CacheLayouts = nil
			c.NotMeasured = map[string]string{"cache_layouts": "needs kv_cache"}
		}, verdict: Conformant, covered: []string{"cache layouts: needs kv_cache"}},
		{name: "a cache layout wrong, one not measured", card: func(c *Card) {
			c.CacheLayouts["out-of-order"], c.CacheLayouts["static"] = "o differs from the reference by 0.3", NA
		}, verdict: NotConformant, why: []string{"cache layout out-of-order: o differs from the reference by 0.3"},
			covered: []string{"cache layout static: the default scale is not one conform knows"}},
		{name: "a check fails", checks: []CheckResult{{Name: "ds-rowsum", Status: Fail}, undeclared}, verdict: NotConformant,
			why: []string{"check ds-rowsum fails"}, covered: []string{"check fd-elements: needs gradients"}},
		{name: "one check fails, one passes", checks: []CheckResult{{Name: "ds-rowsum", Status: Fail}, {Name: "float32", Status: Pass}},
			verdict: NotConformant, why: []string{"check ds-rowsum fails"}},
		{name: "only checks of what it does not declare", checks: []CheckResult{undeclared}, verdict: Undecided,
			ne: []string{"no check could be run"}, covered: []string{"check fd-elements: needs gradients"}},
		{name: "no checks", checks: []CheckResult{}, verdict: Undecided, ne: []string{"no check could be run"}},
		{name: "deciding checks skipped, grouped by reason", checks: []CheckResult{
			{Name: "a", Status: Pass},
			{Name: "b", Status: Skip, Detail: "needs the scale"}, {Name: "c", Status: Skip, Detail: "needs a mapping"},
			{Name: "d", Status: Skip, Detail: "needs the scale"}}, verdict: Undecided,
			ne: []string{"check b, d: needs the scale", "check c: needs a mapping"}},
		{name: "a failure outweighs what could not be run", card: func(c *Card) { c.WindowKeys = WindowWPlus },
			checks: []CheckResult{{Name: "b", Status: Skip, Detail: "needs the scale"}}, verdict: NotConformant,
			why: []string{"a window of W sees W+1 keys; the contract is W, the current one included"},
			ne:  []string{"check b: needs the scale", "no check could be run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			card := goodCard()
			if tc.card != nil {
				tc.card(card)
			}
			contract := tc.contract
			if contract == "" {
				contract = AlignPosition
			}
			checks := tc.checks
			if checks == nil {
				checks = passed("agrees-with-reference", "fd-elements")
			}
			rep := &Report{Contract: contract, Card: card, Checks: checks}
			rep.judge()
			if rep.Verdict != tc.verdict || rep.Conformant != (tc.verdict == Conformant) {
				t.Errorf("verdict %q (conformant %v), want %q", rep.Verdict, rep.Conformant, tc.verdict)
			}
			for _, l := range []struct {
				name      string
				got, want []string
			}{{"why", rep.Why, tc.why}, {"not established", rep.NotEstablished, tc.ne}, {"not covered", rep.NotCovered, tc.covered}} {
				if !slices.Equal(l.got, l.want) {
					t.Errorf("%s:\n%q\nwant\n%q", l.name, l.got, l.want)
				}
			}
		})
	}
}

// TestRunContract: the contract is one of Contracts, and it decides: an
// implementation that is top-left everywhere is conformant to the
// top-left contract and to no other.
func TestRunContract(t *testing.T) {
	if _, err := Run(t.Context(), Reference(), "diagonal"); err == nil || !strings.Contains(err.Error(), `contract "diagonal"`) {
		t.Errorf("an unknown contract: %v, want an error naming it", err)
	}
	for _, contract := range Contracts {
		topLeft := &failAt{Implementation: plain("top-left", func(e *emul) { e.align = AlignTopLeft; e.caps.Masks = []string{MaskCausal, MaskBool} })}
		rep, err := Run(t.Context(), topLeft, contract)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Conformant != (contract == AlignTopLeft) {
			t.Errorf("contract %s: verdict %s; why %q; not established %q", contract, rep.Verdict, rep.Why, rep.NotEstablished)
		}
		if rep.Contract != contract || rep.Calls != topLeft.calls || rep.Seconds <= 0 {
			t.Errorf("contract %s: report of contract %q, %d calls (made: %d) in %g s", contract, rep.Contract, rep.Calls, topLeft.calls, rep.Seconds)
		}
	}
}

var columns = regexp.MustCompile(`(\S) {2,}`)

// TestWriteText: the text report shows every card row, its notes, each
// check and what it does not cover, and ends with the verdict and what it
// rests on.
func TestWriteText(t *testing.T) {
	ratio, consistent := 1.234, false
	card := goodCard()
	card.Float32ErrorRatio, card.EmptyRowBackwardConsistent = &ratio, &consistent
	card.Notes = []string{"empty row: refused"}
	rep := &Report{Implementation: "impl", Version: "v9", Contract: AlignPosition, Card: card, Calls: 12, Seconds: 3.25,
		Checks: []CheckResult{{Name: "agrees-with-reference", Status: Pass, Detail: "worst 1e-16"}, {Name: "fd-elements", Status: Skip, Detail: "needs gradients", Undeclared: true}}}
	rep.judge()
	text := func(rep *Report) string {
		var b strings.Builder
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		// the columns, aligned with blanks, as " | "
		return columns.ReplaceAllString(b.String(), "$1 | ")
	}
	got := text(rep)
	for _, line := range []string{
		"impl (v9): 12 calls in 3.2 s\n",
		"\ncausal, M < N | position\n", "\nfully masked valid row | error\n", "\n  as first, middle, last row, leading block | first error, middle error, last error, leading error\n",
		"\n  backward consistent there | no\n", "\ncache layouts | static ok, left-padded ok, out-of-order ok\n",
		"\nfloat32 error / plain float32's | 1.23\n", "\nwindow of W sees | W\n", "\n  note: empty row: refused\n",
		"\npass | agrees-with-reference | worst 1e-16\n", "\nskip | fd-elements | needs gradients\n",
		"\n  not covered: check fd-elements: needs gradients\n",
		"\nCONFORMANT to the position contract, within what it declares\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("the report lacks %q:\n%s", line, got)
		}
	}
	// unmeasured rows say n/a
	consistent = true
	card.Float32ErrorRatio, card.CacheLayouts, card.EmptyRowAt = nil, nil, nil
	got = text(rep)
	for _, line := range []string{"\n  backward consistent there | yes\n", "\ncache layouts | n/a\n", "\nfloat32 error / plain float32's | n/a\n", "leading block | n/a\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("the report lacks %q:\n%s", line, got)
		}
	}
	card.EmptyRowBackwardConsistent = nil
	if got = text(rep); !strings.Contains(got, "\n  backward consistent there | n/a\n") {
		t.Errorf("an unmeasured backward is not n/a:\n%s", got)
	}
	rep.Verdict, rep.NotEstablished = Undecided, []string{"check b: needs the scale", "no check could be run"}
	if got = text(rep); !strings.HasSuffix(got, "\nNOT ESTABLISHED for the position contract: check b: needs the scale; no check could be run\n") {
		t.Errorf("not established:\n%s", got)
	}
	rep.Verdict, rep.Why = NotConformant, []string{"check x fails", "a window of W sees W+1 keys"}
	if got = text(rep); !strings.HasSuffix(got, "\nNOT CONFORMANT to the position contract: check x fails; a window of W sees W+1 keys\n") {
		t.Errorf("not conformant:\n%s", got)
	}
}

// TestRuleDocumented: docs/conform-protocol.md quotes the rule a report
// states, word for word.
func TestRuleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/conform-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "\n> "+Rule+"\n") {
		t.Errorf("docs/conform-protocol.md does not quote the rule as a report states it:\n> %s", Rule)
	}
}

// TestAlignment: the causal convention a visibility pattern shows; at
// M > N the rows before the first key may see every key or none (empty
// rows), the rows after them may not.
func TestAlignment(t *testing.T) {
	pattern := func(M, N int, rule func(i, j int) bool) [][]bool {
		vis := make([][]bool, M)
		for i := range vis {
			vis[i] = make([]bool, N)
			for j := range vis[i] {
				vis[i][j] = rule(i, j)
			}
		}
		return vis
	}
	for _, c := range []struct {
		name string
		M, N int
		rule func(i, j int) bool
		want string
	}{
		{"bottom-right after a cache", 3, 7, func(i, j int) bool { return j <= i+4 }, AlignBottomRight},
		{"top-left after a cache", 3, 7, func(i, j int) bool { return j <= i }, AlignTopLeft},
		{"every key", 3, 7, func(i, j int) bool { return true }, AlignOther},
		{"square", 4, 4, func(i, j int) bool { return j <= i }, AlignBottomRight},
		{"M > N, rows before the keys see none", 6, 3, func(i, j int) bool { return j <= i-3 }, AlignBottomRight},
		{"M > N, rows before the keys see all", 6, 3, func(i, j int) bool { return i < 3 || j <= i-3 }, AlignBottomRight},
		{"M > N, the first row after them sees none", 6, 3, func(i, j int) bool { return i > 3 && j <= i-3 }, AlignOther},
		{"M > N, the last row sees one key less", 6, 3, func(i, j int) bool { return j <= i-3 && !(i == 5 && j == 2) }, AlignOther},
	} {
		if got := alignment(pattern(c.M, c.N, c.rule), c.M, c.N); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestCardRefusedWithoutValidity: an implementation that refuses M > N
// with the causal flag and has no validity to mark the rows before the
// first key as padding gets n/a there, with the count of those rows, and
// is not counted as refusing what it declares.
func TestCardRefusedWithoutValidity(t *testing.T) {
	e := plain("causal flag only", func(e *emul) {
		e.caps.Masks = []string{MaskCausal}
		e.caps.LSE, e.caps.GQA = false, false
		e.refuse = func(r *Request) bool { return r.Causal && r.M > r.N }
	})
	card, err := measureCard(e)
	if err != nil {
		t.Fatal(err)
	}
	why := card.NotMeasured["causal_m_gt_n"]
	if card.CausalMGtN != NA || !strings.Contains(why, "M = 6, N = 3 causal: refused") || !strings.Contains(why, "its first 3 rows see no key") {
		t.Errorf("causal M > N: %q (%q)", card.CausalMGtN, why)
	}
	if slices.Contains(card.Refused, "causal_m_gt_n") {
		t.Errorf("refused %v: M > N is counted as refused within what it declares", card.Refused)
	}
	// nor do the checks call it a refusal of what it declares
	rep := runOn(t, e)
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail, "declares and refused") {
			t.Errorf("check %s: %s", c.Name, c.Detail)
		}
	}
}

// TestCardEmptyRowPaths: the empty-row probes through a boolean mask (an
// implementation without segments), and the consistency of a float32-only
// backward on such a row at float32's step.
func TestCardEmptyRowPaths(t *testing.T) {
	card, err := measureCard(plain("a boolean mask", func(e *emul) {
		e.caps.Masks = []string{MaskCausal, MaskBool}
		e.empty = EmptyZero
	}))
	if err != nil {
		t.Fatal(err)
	}
	if card.EmptyRow != EmptyZero {
		t.Errorf("empty row %q, want %q (%v)", card.EmptyRow, EmptyZero, card.NotMeasured)
	}
	for place, got := range card.EmptyRowAt {
		if got != EmptyZero {
			t.Errorf("empty row as the %s row: %q, want %q", place, got, EmptyZero)
		}
	}
	// a uniform row depends on V: finite differences at float64's step
	// would drown in float32's rounding
	card, err = measureCard(plain("float32 only", func(e *emul) {
		e.f32, e.caps.DTypes = true, []string{"float32"}
		e.empty = EmptyUniform
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c := card.EmptyRowBackwardConsistent; c == nil || !*c {
		t.Errorf("float32 only: the backward on an empty row is not found consistent (%v; notes %q)", c, card.Notes)
	}
}

// TestFiniteness: the names of what a tensor holds.
func TestFiniteness(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		x    []float64
		want string
	}{
		{[]float64{nan, nan}, "NaN"}, {[]float64{0, 0}, "zero"}, {[]float64{1, 0}, "finite"},
		{[]float64{1, nan}, "partly NaN"}, {[]float64{1, -inf}, "partly infinite"}, {[]float64{inf, nan}, "partly NaN"},
	} {
		if got := finiteness(c.x); got != c.want {
			t.Errorf("finiteness(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

// TestRelDiff: differences over the largest finite reference value, an
// infinity in the reference matched only by the same infinity.
func TestRelDiff(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1.5, inf}, []float64{1, inf}, 0.5},   // the infinity agrees, the rest is measured
		{[]float64{4, 10}, []float64{4, 8}, 0.25},       // over the largest |b|
		{[]float64{0.1, 0.2}, []float64{0.1, 0.3}, 0.1}, // over 1 when |b| is small
		{[]float64{1, 2}, []float64{1, inf}, inf},
		{[]float64{nan, 2}, []float64{1, 2}, inf},
		{[]float64{1}, []float64{1, 2}, inf},
	} {
		if got := relDiff(c.a, c.b); math.Abs(got-c.want) > 1e-15 && got != c.want {
			t.Errorf("relDiff(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestFloat32RatioOfTheReference: the float32 error ratio is the
// implementation's float32 error over the reference's own: exactly 1 for
// the reference, and below 1 for an implementation that rounds the exact
// answer once.
func TestFloat32RatioOfTheReference(t *testing.T) {
	for _, c := range []struct {
		impl   Implementation
		lo, hi float64
	}{{Reference(), 1, 1}, {plain("rounds once", func(e *emul) { e.f32 = true }), 0.01, 0.99}} {
		card, err := measureCard(c.impl)
		if err != nil {
			t.Fatal(err)
		}
		if r := card.Float32ErrorRatio; r == nil || *r < c.lo || *r > c.hi {
			t.Errorf("%s: float32 error ratio %v, want in [%g, %g]", c.impl.Capabilities().Name, r, c.lo, c.hi)
		}
	}
}

// TestSameBuffer: the same backing array, not equal contents.
func TestSameBuffer(t *testing.T) {
	a, b := []float64{1, 2}, []float64{1, 2}
	if !sameBuffer(a, a) || sameBuffer(a, b) || sameBuffer(a, a[:1]) || sameBuffer(nil, nil) || sameBuffer(a[:0], a[:0]) {
		t.Error("sameBuffer: wrong")
	}
}
