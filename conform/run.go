package conform

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Contracts are the causal alignments an implementation may be held to.
var Contracts = []string{AlignPosition, AlignBottomRight, AlignTopLeft}

// Report is the outcome of a conformance run.
type Report struct {
	Implementation string        `json:"implementation"`
	Version        string        `json:"version"`
	Capabilities   Capabilities  `json:"capabilities"`
	Contract       string        `json:"contract"`
	Card           *Card         `json:"card"`
	Checks         []CheckResult `json:"checks"`
	Conformant     bool          `json:"conformant"`
	// Why lists what makes it not conformant.
	Why     []string `json:"why,omitempty"`
	Calls   int      `json:"calls"`
	Seconds float64  `json:"seconds"`
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

// noteOf returns the card's note starting with prefix, or "".
func noteOf(c *Card, prefix string) string {
	for _, n := range c.Notes {
		if strings.HasPrefix(n, prefix) {
			return n
		}
	}
	return ""
}

// Run measures impl's card, runs every applicable check of the lab's
// attention suite on it, and judges it against the contract (a causal
// alignment of Contracts): conformant when both causal alignments are the
// contract's, a fully masked valid row is an error (where one can be
// expressed), and no check fails. An error is a failure of the
// implementation's plumbing (an adapter that crashed): the run stops.
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
	rep := &Report{Implementation: caps.Name, Version: caps.Version, Capabilities: caps, Contract: contract}
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
	for _, a := range []struct{ what, got string }{{"causal alignment at M < N", card.CausalMLtN}, {"causal alignment at M > N", card.CausalMGtN}} {
		if a.got != contract {
			rep.Why = append(rep.Why, fmt.Sprintf("%s is %s, the contract %s", a.what, a.got, contract))
		}
	}
	if card.EmptyRow != EmptyError && noteOf(card, "empty row: not expressible") == "" {
		rep.Why = append(rep.Why, fmt.Sprintf("a fully masked valid row gives %s; the contract is an error naming the row (DESIGN §2)", card.EmptyRow))
	}
	for _, c := range rep.Checks {
		if c.Status == Fail {
			rep.Why = append(rep.Why, "check "+c.Name+" fails")
		}
	}
	rep.Conformant = len(rep.Why) == 0
	rep.Calls, rep.Seconds = cnt.calls, time.Since(start).Seconds()
	return rep, nil
}
