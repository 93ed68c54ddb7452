package conform

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Contracts are the causal alignments an implementation may be held to.
var Contracts = []string{AlignPosition, AlignBottomRight, AlignTopLeft}

// Verdicts of a Report.
const (
	Conformant    = "conformant"
	NotConformant = "not conformant"
	Undecided     = "not established"
)

// Rule is how the verdict is reached, as the report states it.
const Rule = "conformant when every check within what the implementation declares ran and passed, " +
	"its measured causal alignments are the contract's, a valid row with no visible key is an error wherever it sits, " +
	"a window of W sees W keys, extreme logits and the cache layouts give the reference's answers, " +
	"and each variant it declares behaves as docs/design.md §3.1 says (with sinks an empty row is O = 0 and dσ is returned and right; " +
	"softcap before the mask; ALiBi by logical positions); " +
	"not conformant when any of those is measured otherwise; not established when a check it should answer " +
	"could not be run (a convention conform cannot express, or a probe it refused though it declares what the probe needs), " +
	"or when no check ran at all. " +
	"Checks of what it does not declare (gradients, a cache, a mask kind) and card fields that could not be asked " +
	"are listed as not covered, and never count as passing"

// Report is the outcome of a conformance run.
type Report struct {
	Implementation string        `json:"implementation"`
	Version        string        `json:"version"`
	Capabilities   Capabilities  `json:"capabilities"`
	Contract       string        `json:"contract"`
	Card           *Card         `json:"card"`
	Checks         []CheckResult `json:"checks"`
	// Verdict is Conformant, NotConformant or Undecided; Conformant (the
	// bool) is true only for the first.
	Verdict    string `json:"verdict"`
	Conformant bool   `json:"conformant"`
	Rule       string `json:"rule"`
	// Why lists what makes it not conformant.
	Why []string `json:"why,omitempty"`
	// NotEstablished lists the checks it should have answered that could
	// not be run, with the reason: they make the verdict Undecided.
	NotEstablished []string `json:"not_established,omitempty"`
	// NotCovered lists what the verdict does not cover: checks of what the
	// implementation does not declare, card fields that could not be
	// measured.
	NotCovered []string `json:"not_covered,omitempty"`
	Calls      int      `json:"calls"`
	Seconds    float64  `json:"seconds"`
}

// counter counts the calls made through an Implementation.
type counter struct {
	Implementation
	calls int
}

func (c *counter) Attention(r *Request) (*Response, error) {
	c.calls++
	return c.Implementation.Attention(r)
}

// Run measures impl's card, runs every applicable check of the lab's
// attention suite on it under the conventions the card measured, and
// judges it against the contract (a causal alignment of Contracts) by
// Rule. An error is a failure of the implementation's plumbing (an
// adapter that crashed, or refused what it declares): the run stops.
func Run(ctx context.Context, impl Implementation, contract string) (*Report, error) {
	known := false
	for _, c := range Contracts {
		known = known || c == contract
	}
	if !known {
		return nil, fmt.Errorf("conform: contract %q (want %v)", contract, Contracts)
	}
	start := time.Now()
	cnt := &counter{Implementation: impl}
	caps := impl.Capabilities()
	rep := &Report{Implementation: caps.Name, Version: caps.Version, Capabilities: caps, Contract: contract, Rule: Rule}
	card, err := measureCard(cnt)
	if err != nil {
		return nil, err
	}
	rep.Card = card
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &wrapped{impl: cnt, caps: caps, card: card}
	if rep.Checks, err = runChecks(ctx, w); err != nil {
		return nil, err
	}
	rep.judge()
	rep.Calls, rep.Seconds = cnt.calls, time.Since(start).Seconds()
	return rep, nil
}

// judge sets the verdict from the card and the checks by Rule.
func (rep *Report) judge() {
	card, contract := rep.Card, rep.Contract
	uncovered := func(field, what string) {
		line := fmt.Sprintf("%s: %s", what, card.NotMeasured[field])
		if slices.Contains(card.Refused, field) {
			// asked within what it declares, and refused: the verdict
			// cannot rest on it
			rep.NotEstablished = append(rep.NotEstablished, line)
			return
		}
		rep.NotCovered = append(rep.NotCovered, line)
	}
	m1 := AlignPosition // one query: the position rule and bottom-right agree
	if contract == AlignTopLeft {
		m1 = AlignTopLeft
	}
	for _, a := range []struct{ field, what, got, want string }{
		{"causal_m_lt_n", "causal alignment at M < N", card.CausalMLtN, contract},
		{"causal_m_gt_n", "causal alignment at M > N", card.CausalMGtN, contract},
		{"causal_m_1", "causal alignment at M = 1", card.CausalM1, m1},
	} {
		switch a.got {
		case NA:
			uncovered(a.field, a.what)
		case a.want:
		default:
			rep.Why = append(rep.Why, fmt.Sprintf("%s is %s, the contract %s", a.what, a.got, a.want))
		}
	}
	if card.EmptyRow == NA {
		uncovered("empty_row", "a valid row with no visible key")
	}
	wrong := map[string][]string{} // what an empty row gives → where
	var kinds []string
	for _, place := range EmptyRowPlaces {
		if got, ok := card.EmptyRowAt[place]; ok && got != EmptyError {
			if wrong[got] == nil {
				kinds = append(kinds, got)
			}
			wrong[got] = append(wrong[got], place)
		}
	}
	for _, k := range kinds {
		rep.Why = append(rep.Why, fmt.Sprintf("a valid row with no visible key gives %s (as the %s row); the contract is an error naming the row (DESIGN §2)", k, strings.Join(wrong[k], ", ")))
	}
	switch card.WindowKeys {
	case NA:
		uncovered("window_keys", "the window convention")
	case WindowW:
	default:
		rep.Why = append(rep.Why, fmt.Sprintf("a window of W sees %s keys; the contract is W, the current one included", card.WindowKeys))
	}
	switch card.ExtremeLogits {
	case NA:
		uncovered("extreme_logits", "extreme logits")
	case OK:
	default:
		rep.Why = append(rep.Why, "extreme logits: "+card.ExtremeLogits)
	}
	if card.CacheLayouts == nil {
		uncovered("cache_layouts", "cache layouts")
	}
	for _, l := range []string{"static", "left-padded", "out-of-order"} {
		switch got, ok := card.CacheLayouts[l]; {
		case !ok, got == OK:
		case got == NA:
			rep.NotCovered = append(rep.NotCovered, "cache layout "+l+": the default scale is not one conform knows")
		default:
			rep.Why = append(rep.Why, fmt.Sprintf("cache layout %s: %s", l, got))
		}
	}
	rep.judgeVariants()
	ran := 0
	skipped := map[string][]string{} // why → the checks it kept from running
	var reasons []string
	for _, c := range rep.Checks {
		switch {
		case c.Status == Fail:
			rep.Why = append(rep.Why, "check "+c.Name+" fails")
			ran++
		case c.Status == Pass:
			ran++
		case c.Undeclared:
			rep.NotCovered = append(rep.NotCovered, "check "+c.Name+": "+c.Detail)
		default:
			if skipped[c.Detail] == nil {
				reasons = append(reasons, c.Detail)
			}
			skipped[c.Detail] = append(skipped[c.Detail], c.Name)
		}
	}
	for _, why := range reasons {
		rep.NotEstablished = append(rep.NotEstablished, fmt.Sprintf("check %s: %s", strings.Join(skipped[why], ", "), why))
	}
	if ran == 0 {
		rep.NotEstablished = append(rep.NotEstablished, "no check could be run")
	}
	switch {
	case len(rep.Why) > 0:
		rep.Verdict = NotConformant
	case len(rep.NotEstablished) > 0:
		rep.Verdict = Undecided
	default:
		rep.Verdict = Conformant
	}
	rep.Conformant = rep.Verdict == Conformant
}

// WriteText prints the report: the card, its notes, each check, and the
// verdict with what it rests on.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s (%s): %d calls in %.1f s\n\n", rep.Implementation, rep.Version, rep.Calls, rep.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rep.Card.rows() {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	tw.Flush()
	for _, n := range rep.Card.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ch := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Status, ch.Name, ch.Detail)
	}
	tw.Flush()
	for _, n := range rep.NotCovered {
		fmt.Fprintf(w, "  not covered: %s\n", n)
	}
	var err error
	switch rep.Verdict {
	case Conformant:
		_, err = fmt.Fprintf(w, "\nCONFORMANT to the %s contract, within what it declares\n", rep.Contract)
	case Undecided:
		_, err = fmt.Fprintf(w, "\nNOT ESTABLISHED for the %s contract: %s\n", rep.Contract, strings.Join(rep.NotEstablished, "; "))
	default:
		_, err = fmt.Fprintf(w, "\nNOT CONFORMANT to the %s contract: %s\n", rep.Contract, strings.Join(rep.Why, "; "))
	}
	return err
}
