package conform

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestVariantsUndeclared: an implementation that declares none of sinks,
// softcap and ALiBi is never sent them (the adapter refuses the request
// before writing it, and goes on answering); its card says "not declared"
// and n/a, every check of the variants is not covered, none is a pass, and
// its verdict rests on the rest.
func TestVariantsUndeclared(t *testing.T) {
	proc, err := startTestAdapter(t, "plain", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	for _, edit := range []func(r *Request){
		func(r *Request) { r.Sinks = []float64{0.5} },
		func(r *Request) { r.Softcap = 2 },
		func(r *Request) { r.Alibi = []float64{0.5} },
	} {
		r := randomRequest(1, 1, 1, 1, 2, 2, 4)
		r.DType = "float64"
		edit(r)
		calls := proc.Calls()
		if _, err := proc.Attention(r); err == nil || !strings.Contains(err.Error(), "does not declare") {
			t.Errorf("an undeclared variant: %v, want a refusal to send it", err)
		}
		if proc.Calls() != calls || proc.requests != calls {
			t.Errorf("the request was sent")
		}
	}
	rep, err := Run(context.Background(), proc, AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Conformant {
		t.Errorf("verdict %s: %v %v", rep.Verdict, rep.Why, rep.NotEstablished)
	}
	c := rep.Card
	for _, f := range []string{c.Sinks, c.Softcap, c.Alibi} {
		if f != NotDeclared {
			t.Errorf("card: %q, want %q", f, NotDeclared)
		}
	}
	for _, f := range []string{c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance} {
		if f != NA {
			t.Errorf("card: %q, want n/a", f)
		}
	}
	variants := 0
	for _, ch := range rep.Checks {
		if strings.HasPrefix(ch.Name, VariantPrefix) {
			variants++
			if ch.Status != Skip || !ch.Undeclared {
				t.Errorf("%s: %s (undeclared %v) %s, want not covered", ch.Name, ch.Status, ch.Undeclared, ch.Detail)
			}
		} else if ch.Status != Pass && !ch.Undeclared {
			t.Errorf("%s: %s %s", ch.Name, ch.Status, ch.Detail)
		}
	}
	covered := strings.Join(rep.NotCovered, "\n")
	if variants == 0 || !strings.Contains(covered, "check "+VariantPrefix+"sink-limit: needs sinks") {
		t.Errorf("%d checks of the variants; not covered: %s", variants, covered)
	}
	if proc.Calls() < 500 {
		t.Errorf("%d calls", proc.Calls())
	}
}

// noDSinks declares sinks and answers without dsinks.
type noDSinks struct{ *Func }

func (n noDSinks) Attention(r *Request) (*Response, error) {
	resp, err := n.Func.Attention(r)
	if resp != nil {
		resp.DSinks = nil
	}
	return resp, err
}

// TestVariantsMissingDSinks: an implementation that declares sinks and
// gradients and returns no dσ has the card row "missing", fails the
// variants' finite differences, and is not conformant; attnlab's reference,
// which returns it, is conformant with every check of the variants passing.
func TestVariantsMissingDSinks(t *testing.T) {
	rep := runOn(t, noDSinks{Reference()})
	if rep.Card.SinksGrad != SinkGradMissing || rep.Verdict != NotConformant {
		t.Errorf("card dσ %s, verdict %s, want missing, not conformant", rep.Card.SinksGrad, rep.Verdict)
	}
	if s := status(rep, VariantPrefix+"fd-elements"); s.Status != Fail || !strings.Contains(s.Detail, "dsinks") {
		t.Errorf("variants/fd-elements: %s %s, want a failure naming dsinks", s.Status, s.Detail)
	}
	if s := status(rep, VariantPrefix+"agrees-with-reference"); s.Status != Fail {
		t.Errorf("variants/agrees-with-reference: %s %s", s.Status, s.Detail)
	}
	ref := runOn(t, Reference())
	if ref.Card.SinksGrad != SinkGradReturned || ref.Verdict != Conformant {
		t.Errorf("the reference: dσ %s, verdict %s %v", ref.Card.SinksGrad, ref.Verdict, ref.Why)
	}
	for _, ch := range ref.Checks {
		if strings.HasPrefix(ch.Name, VariantPrefix) && ch.Status != Pass {
			t.Errorf("the reference: %s: %s %s", ch.Name, ch.Status, ch.Detail)
		}
	}
}
