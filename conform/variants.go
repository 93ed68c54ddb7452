package conform

import (
	"fmt"
	"math"
)

// The card's rows of the variants of docs/design.md §3.1 (sinks, softcap,
// ALiBi): whether each is declared, then one probe each of what finite
// differences cannot see.

// variants measures the card's rows of sinks, softcap and ALiBi.
func (p *prober) variants() error {
	card := p.card
	declared := func(ok bool) string {
		if ok {
			return Supported
		}
		return NotDeclared
	}
	card.Sinks, card.Softcap, card.Alibi = declared(p.caps.Sinks), declared(p.caps.Softcap), declared(p.caps.Alibi)
	var err error
	if card.SinksEmptyRow, err = p.sinksEmptyRow(); err != nil {
		return err
	}
	if card.SinksGrad, err = p.sinksGrad(); err != nil {
		return err
	}
	if card.SoftcapOrder, err = p.softcapOrder(); err != nil {
		return err
	}
	card.AlibiDistance, err = p.alibiDistance()
	return err
}

// sinksEmptyRow asks what a valid row with no visible key gets with sinks:
// zero (O = 0, the sink takes all the weight), error or other.
func (p *prober) sinksEmptyRow() (string, error) {
	const field, row = "sinks_empty_row", 1
	if !p.caps.Sinks {
		return p.card.na(field, "sinks not declared"), nil
	}
	r := p.emptyRequest(50, row)
	if r == nil {
		return p.card.na(field, "an empty row is not expressible without segments or a boolean mask"), nil
	}
	r.Sinks = []float64{0.5}
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		p.card.notef("empty row with sinks: %s", out.Err)
		return EmptyError, nil
	}
	if allOf(out.O[row*r.Dv:(row+1)*r.Dv], func(x float64) bool { return x == 0 }) {
		return EmptyZero, nil
	}
	p.card.notef("empty row with sinks: O = %.3g, want 0", out.O[row*r.Dv:(row+1)*r.Dv])
	return EmptyOther, nil
}

// sinksGrad asks for dσ on a plain request with two heads' sinks and
// compares it with the reference's.
func (p *prober) sinksGrad() (string, error) {
	const field = "sinks_grad"
	switch {
	case !p.caps.Sinks:
		return p.card.na(field, "sinks not declared"), nil
	case !p.caps.Gradients:
		return p.card.na(field, "no gradients"), nil
	}
	r := p.explicit(randomRequest(51, 1, 2, 2, 3, 3, 4))
	r.Sinks = []float64{0.3, -0.5}
	if p.refScale(r) == 0 {
		return p.card.na(field, "the default scale (%s) is not one conform knows", p.card.Scale), nil
	}
	q := *r
	q.DType = p.dtype
	got, err := p.impl.Attention(&q)
	if err != nil {
		return "", err
	}
	if got.Err != "" {
		return "", p.capabilityRefused("sinks with gradients", got.Err)
	}
	if got.DSinks == nil {
		return SinkGradMissing, nil
	}
	want, err := p.reference(r, true)
	if err != nil {
		return "", err
	}
	if e := relDiff(got.DSinks, want.DSinks); e > p.agreeTol() {
		p.card.notef("dσ = %.4g, the reference's %.4g", got.DSinks, want.DSinks)
		return SinkGradWrong, nil
	}
	return SinkGradReturned, nil
}

// softcapOrder asks whether a masked key stays masked under softcap: the
// visibility probe on a causal request with softcap 1. Softcap applied
// after the mask caps −∞ to −c, and every hidden key is read.
func (p *prober) softcapOrder() (string, error) {
	const field, M = "softcap_order", 4
	if !p.caps.Softcap {
		return p.card.na(field, "softcap not declared"), nil
	}
	r := randomRequest(52, 1, 1, 1, M, M, 4)
	r.Softcap = 1
	switch {
	case p.caps.Has(MaskCausal) || p.caps.Has(MaskPositions):
		r.Causal = true
	case p.caps.Has(MaskBool):
		r.Mask = make([]bool, M*M)
		for i := range M {
			for j := range i + 1 {
				r.Mask[i*M+j] = true
			}
		}
	default:
		return p.card.na(field, "no causal flag, positions or boolean mask to hide a key with"), nil
	}
	vis, refused, err := p.visibility(r)
	if err != nil {
		return "", err
	}
	if refused != "" {
		return "", p.capabilityRefused("softcap (a causal request, softcap 1)", refused)
	}
	for i := range M {
		for j := i + 1; j < M; j++ {
			if vis[i][j] {
				p.card.notef("softcap 1: query %d reads key %d, which the causal mask hides", i, j)
				return SoftcapAfterMask, nil
			}
		}
	}
	return SoftcapBeforeMask, nil
}

// alibiDistance asks what ALiBi's distance is measured in: a chunk of 2
// queries after a cache of 3 keys, q = 0 so that every score is the bias
// alone, against the closed form by positions (qpos − kpos = 3 + i − j)
// and by slots (i − j).
func (p *prober) alibiDistance() (string, error) {
	const field, M, N, slope = "alibi_distance", 2, 5, 0.7
	switch {
	case !p.caps.Alibi:
		return p.card.na(field, "alibi not declared"), nil
	case !p.caps.KVCache:
		return p.card.na(field, "the probe is a chunk after a cache (no kv_cache capability)"), nil
	}
	r := randomRequest(53, 1, 1, 1, M, N, 4)
	clear(r.Q)
	r.Alibi = []float64{slope}
	out, err := p.forward(r)
	if err != nil {
		return "", err
	}
	if out.Err != "" {
		return "", p.capabilityRefused("alibi (a chunk of 2 after a cache of 3)", out.Err)
	}
	// closed is O with weights e^(−slope·|dist(i, j)|) over every key
	closed := func(dist func(i, j int) int) []float64 {
		o := make([]float64, M*r.Dv)
		for i := range M {
			var sum float64
			for j := range N {
				w := math.Exp(-slope * math.Abs(float64(dist(i, j))))
				sum += w
				for d := range r.Dv {
					o[i*r.Dv+d] += w * r.V[j*r.Dv+d]
				}
			}
			for d := range r.Dv {
				o[i*r.Dv+d] /= sum
			}
		}
		return o
	}
	switch {
	case maxDiff(out.O, closed(func(i, j int) int { return N - M + i - j })) < 1e3*p.tol():
		return AlibiPositions, nil
	case maxDiff(out.O, closed(func(i, j int) int { return i - j })) < 1e3*p.tol():
		return AlibiSlots, nil
	}
	p.card.notef("ALiBi with q = 0 after a cache: O is neither the closed form by positions nor by slots")
	return AlignOther, nil
}

// judgeVariants adds to rep what the card's variant rows make of it.
func (rep *Report) judgeVariants() {
	card, caps := rep.Card, rep.Capabilities
	for _, v := range []struct {
		declared         bool
		field, what, got string
		want             string
		why              string
	}{
		{caps.Sinks, "sinks_empty_row", "with sinks, a valid row with no visible key", card.SinksEmptyRow, EmptyZero,
			"with sinks, a valid row with no visible key gives %s; docs/design.md §3.1 defines it: O = 0, the sink takes all the weight"},
		{caps.Sinks, "sinks_grad", "the sinks' gradient", card.SinksGrad, SinkGradReturned,
			"the sinks' gradient dσ is %s (it declares sinks and gradients)"},
		{caps.Softcap, "softcap_order", "softcap's place", card.SoftcapOrder, SoftcapBeforeMask,
			"softcap is applied %s: a masked key is read (docs/design.md §3.1: softcap, then the mask as a select)"},
		{caps.Alibi, "alibi_distance", "ALiBi's distance", card.AlibiDistance, AlibiPositions,
			"ALiBi's distance is measured in %s, not logical positions: a chunk after a cache gets another bias than the full pass"},
	} {
		switch {
		case !v.declared:
		case v.got == NA:
			rep.NotCovered = append(rep.NotCovered, fmt.Sprintf("%s: %s", v.what, card.NotMeasured[v.field]))
		case v.got != v.want:
			rep.Why = append(rep.Why, fmt.Sprintf(v.why, v.got))
		}
	}
}
