package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/safetensors"
)

// DiffReport is where two implementations differ: their cards, their
// checks, and their answers to the same requests.
type DiffReport struct {
	A      *Report     `json:"a"`
	B      *Report     `json:"b"`
	Card   []FieldDiff `json:"card,omitempty"`   // card fields that differ
	Checks []FieldDiff `json:"checks,omitempty"` // check statuses that differ
	// Replayed is how many of the requests made to A were also sent to B
	// (those within what B declares); Skipped the others.
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
	// Differ is how many replayed requests B answered otherwise than A;
	// First is the first of them.
	Differ int          `json:"differ"`
	First  *RequestDiff `json:"first,omitempty"`
}

// FieldDiff is a field with its value on each side.
type FieldDiff struct {
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
}

// RequestDiff is one request the two implementations answered otherwise.
type RequestDiff struct {
	Index int    `json:"index"` // among the requests made to A
	What  string `json:"what"`  // how the answers differ
	// Described is the request's sizes and what it asks.
	Described string    `json:"request"`
	Request   *Request  `json:"-"`
	A, B      *Response `json:"-"`
}

// recorder keeps copies of the requests made through it and the answers
// (the callers reuse their buffers).
type recorder struct {
	Implementation
	reqs  []*Request
	resps []*Response
}

func (r *recorder) Attention(q *Request) (*Response, error) {
	c := q.clone() // before: an implementation that accumulates adds into q's gradients
	resp, err := r.Implementation.Attention(q)
	if err == nil {
		r.reqs, r.resps = append(r.reqs, c), append(r.resps, resp.clone())
	}
	return resp, err
}

// clone copies r with its slices.
func (r *Request) clone() *Request {
	c := *r
	for _, p := range []*[]float64{&c.Q, &c.K, &c.V, &c.DO, &c.DQ0, &c.DK0, &c.DV0, &c.Sinks, &c.Alibi} {
		*p = slices.Clone(*p)
	}
	for _, p := range []*[]int64{&c.QPos, &c.KPos, &c.QValid, &c.KValid, &c.QSeg, &c.KSeg} {
		*p = slices.Clone(*p)
	}
	c.Mask = slices.Clone(c.Mask)
	return &c
}

// clone copies r with its slices.
func (r *Response) clone() *Response {
	c := *r
	for _, p := range []*[]float64{&c.O, &c.LSE, &c.DQ, &c.DK, &c.DV, &c.DSinks} {
		*p = slices.Clone(*p)
	}
	return &c
}

// Diff runs conform on a and b, then sends b every request a was sent that
// b declares it can take, and reports where the cards, the checks and the
// answers differ. An error is the failure of either adapter.
func Diff(ctx context.Context, a, b Implementation, contract string) (*DiffReport, error) {
	rec := &recorder{Implementation: a}
	repA, err := Run(ctx, rec, contract)
	if err != nil {
		return nil, err
	}
	repB, err := Run(ctx, b, contract)
	if err != nil {
		return nil, err
	}
	d := &DiffReport{A: repA, B: repB, Card: cardDiff(repA.Card, repB.Card)}
	statusB := map[string]string{}
	for _, c := range repB.Checks {
		statusB[c.Name] = c.Status
	}
	for _, c := range repA.Checks {
		if statusB[c.Name] != c.Status {
			d.Checks = append(d.Checks, FieldDiff{c.Name, c.Status, statusB[c.Name]})
		}
	}
	capsB := b.Capabilities()
	for i, r := range rec.reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !declares(capsB, r) {
			d.Skipped++
			continue
		}
		d.Replayed++
		ra := rec.resps[i]
		rb, err := b.Attention(r.clone())
		if err != nil {
			return nil, err
		}
		if what := answersDiffer(r, ra, rb); what != "" {
			d.Differ++
			if d.First == nil {
				d.First = &RequestDiff{Index: i, What: what, Described: describeRequest(r), Request: r, A: ra, B: rb}
			}
		}
	}
	return d, nil
}

// Same reports whether the two implementations showed no difference.
func (d *DiffReport) Same() bool { return len(d.Card) == 0 && len(d.Checks) == 0 && d.Differ == 0 }

// cardDiff lists the card fields (by their JSON names) that differ; notes
// and the reasons of n/a fields aside.
func cardDiff(a, b *Card) []FieldDiff {
	flat := func(c *Card) map[string]string {
		cc := *c
		cc.Notes, cc.NotMeasured = nil, nil
		data, _ := json.Marshal(cc)
		var m map[string]any
		json.Unmarshal(data, &m)
		out := map[string]string{}
		for k, v := range m {
			if f, ok := v.(float64); ok && k == "float32_error_ratio" {
				v = fmt.Sprintf("%.1f", f) // measured noise aside
			}
			if sub, ok := v.(map[string]any); ok {
				for sk, sv := range sub {
					out[k+"."+sk] = fmt.Sprint(sv)
				}
				continue
			}
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	fa, fb := flat(a), flat(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if fa[k] != fb[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []FieldDiff
	for _, k := range names {
		out = append(out, FieldDiff{k, orNone(fa[k]), orNone(fb[k])})
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// declares reports whether an implementation of capabilities c can be
// sent r: its dtype, gradients, masks, cache, head mapping, scale.
func declares(c Capabilities, r *Request) bool {
	needs := []bool{
		c.HasDType(r.DType),
		r.DO == nil || c.Gradients,
		r.DQ0 == nil || c.Accumulates,
		r.M == r.N || c.KVCache,
		r.Hkv == r.Hq || c.GQA,
		r.Scale == 0 || c.Scale,
		r.Convention == "" || c.Conventions,
		r.Mask == nil || c.Has(MaskBool),
		r.QPos == nil && r.KPos == nil && r.QSeg == nil || c.Has(MaskPositions),
		r.QSeg == nil || c.Has(MaskSegments),
		r.QValid == nil && r.KValid == nil || c.Has(MaskValidity),
		r.Window == 0 || c.Has(MaskWindow),
		!r.Causal || c.Has(MaskCausal) || c.Has(MaskPositions),
		r.undeclared(c) == "", // sinks, softcap, ALiBi
	}
	return !slices.Contains(needs, false)
}

// answersDiffer says how two answers to r differ, or "" when they agree:
// one refused and the other not, or a tensor beyond the rounding of the
// coarser dtype, NaN and infinities where the other has numbers included.
func answersDiffer(r *Request, a, b *Response) string {
	switch {
	case (a.Err == "") != (b.Err == ""):
		if a.Err != "" {
			return "A refused (" + a.Err + "), B answered"
		}
		return "A answered, B refused (" + b.Err + ")"
	case a.Err != "":
		return ""
	}
	tol := 1e-9
	if r.DType == "float32" {
		tol = 1e-4
	}
	for _, t := range []struct {
		name string
		a, b []float64
	}{{"o", a.O, b.O}, {"lse", a.LSE, b.LSE}, {"dq", a.DQ, b.DQ}, {"dk", a.DK, b.DK}, {"dv", a.DV, b.DV}, {"dsinks", a.DSinks, b.DSinks}} {
		if t.a == nil || t.b == nil {
			continue // one side did not compute it
		}
		if len(t.a) != len(t.b) {
			return fmt.Sprintf("%s: %d values against %d", t.name, len(t.a), len(t.b))
		}
		scale := 1.0
		for _, v := range t.a {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				scale = max(scale, math.Abs(v))
			}
		}
		for i := range t.a {
			x, y := t.a[i], t.b[i]
			switch {
			case x == y, math.IsNaN(x) && math.IsNaN(y):
			case math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0):
				return fmt.Sprintf("%s[%d]: %v against %v", t.name, i, x, y)
			case math.Abs(x-y) > tol*scale:
				return fmt.Sprintf("%s[%d]: %.6g against %.6g", t.name, i, x, y)
			}
		}
	}
	return ""
}

// WriteRepro writes the first differing request into the new folder dir:
// request.safetensors (the request as the adapter protocol sends it),
// a.safetensors and b.safetensors (the two answers), and README.txt
// saying what differs. It is an error when there is none.
func (d *DiffReport) WriteRepro(dir string) error {
	if d.First == nil {
		return fmt.Errorf("conform: %s and %s answered every replayed request alike: nothing to reproduce", d.A.Implementation, d.B.Implementation)
	}
	f := d.First
	req, err := f.Request.file(f.Index)
	if err != nil {
		return err
	}
	return atomicfile.ReplaceDir(dir, func(tmp string) error {
		if err := safetensors.WriteFile(filepath.Join(tmp, "request.safetensors"), req); err != nil {
			return err
		}
		for name, resp := range map[string]*Response{"a.safetensors": f.A, "b.safetensors": f.B} {
			if err := safetensors.WriteFile(filepath.Join(tmp, name), responseFile(f.Request, resp)); err != nil {
				return err
			}
		}
		readme := fmt.Sprintf("request %d of those conform made to A, answered otherwise by B: %s\nA: %s (%s)\nB: %s (%s)\n",
			f.Index, f.What, d.A.Implementation, d.A.Version, d.B.Implementation, d.B.Version)
		return os.WriteFile(filepath.Join(tmp, "README.txt"), []byte(readme), 0o644)
	})
}

// responseFile is an answer as the adapter protocol carries it (float64);
// a refusal is its error in the metadata.
func responseFile(r *Request, resp *Response) *safetensors.File {
	out := safetensors.New()
	out.Metadata = map[string]string{"op": "attention"}
	if resp.Err != "" {
		out.Metadata["error"] = resp.Err
		return out
	}
	for _, t := range []struct {
		name  string
		shape []int
		x     []float64
	}{
		{"o", []int{r.B, r.Hq, r.M, r.Dv}, resp.O}, {"lse", []int{r.B, r.Hq, r.M}, resp.LSE},
		{"dq", []int{r.B, r.Hq, r.M, r.D}, resp.DQ}, {"dk", []int{r.B, r.Hkv, r.N, r.D}, resp.DK}, {"dv", []int{r.B, r.Hkv, r.N, r.Dv}, resp.DV},
		{"dsinks", []int{r.Hq}, resp.DSinks},
	} {
		if t.x != nil {
			out.SetF64(t.name, t.shape, t.x)
		}
	}
	return out
}

// WriteText prints only where the two differ.
func (d *DiffReport) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "A: %s (%s)\nB: %s (%s)\n", d.A.Implementation, d.A.Version, d.B.Implementation, d.B.Version)
	if d.A.Verdict != d.B.Verdict {
		fmt.Fprintf(w, "verdict: A %s, B %s\n", d.A.Verdict, d.B.Verdict)
	}
	for _, group := range []struct {
		title string
		rows  []FieldDiff
	}{{"card", d.Card}, {"checks", d.Checks}} {
		if len(group.rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", group.title)
		for _, f := range group.rows {
			fmt.Fprintf(w, "  %-36s A %-16s B %s\n", f.Name, f.A, f.B)
		}
	}
	fmt.Fprintf(w, "\nanswers: %d of %d replayed requests differ (%d not replayed: outside what B declares)\n", d.Differ, d.Replayed, d.Skipped)
	if d.First != nil {
		fmt.Fprintf(w, "first: request %d (%s): %s\n", d.First.Index, describeRequest(d.First.Request), d.First.What)
	}
	var err error
	if d.Same() {
		_, err = fmt.Fprintln(w, "\nno difference")
	}
	return err
}

// describeRequest names a request's sizes and what it asks.
func describeRequest(r *Request) string {
	parts := []string{fmt.Sprintf("B=%d Hq=%d Hkv=%d M=%d N=%d D=%d %s", r.B, r.Hq, r.Hkv, r.M, r.N, r.D, r.DType)}
	for _, f := range []struct {
		on   bool
		what string
	}{{r.Causal, "causal"}, {r.Window > 0, fmt.Sprintf("window %d", r.Window)}, {r.Mask != nil, "bool mask"}, {r.QPos != nil || r.KPos != nil, "positions"},
		{r.QValid != nil || r.KValid != nil, "validity"}, {r.QSeg != nil, "segments"}, {r.DO != nil, "backward"}} {
		if f.on {
			parts = append(parts, f.what)
		}
	}
	return strings.Join(parts, ", ")
}
