package adapters_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
	"github.com/attnlab/attnlab/internal/atomicfile"
)

var update = flag.Bool("update", false, "rewrite docs/conform-cards.md, docs/conform-cards.json and docs/conform.md's table of conform cards from this run")

// The files the cards are written to, from this package's folder, and the
// command that writes them.
const (
	cardsDoc     = "../docs/conform-cards.md"
	cardsJSON    = "../docs/conform-cards.json"
	cardsPage    = "../docs/conform.md" // its compact table
	cardsCommand = "go test ./adapters -run ConformCards -update"
)

// cardRecord is one row of the cards tables, as docs/conform-cards.json
// holds it: attnlab conform's report of one implementation, with the
// command that produced it. Calls, seconds and the details of passing
// checks (measured errors, which vary in their last digits with the
// machine) are left out, so that the file changes only when a result does,
// and so is the report's not_covered, which repeats the checks not
// declared and the card's not_measured.
type cardRecord struct {
	Command        string               `json:"command"`
	Adapter        string               `json:"adapter,omitempty"` // the shipped adapter's name; none for -impl
	Implementation string               `json:"implementation"`
	Version        string               `json:"version"`
	Capabilities   conform.Capabilities `json:"capabilities"`
	Contract       string               `json:"contract"`
	Card           conform.Card         `json:"card"` // float32_error_ratio rounded to 2 decimals
	Checks         []checkRecord        `json:"checks"`
	Verdict        string               `json:"verdict"`
	Why            []string             `json:"why,omitempty"`
	NotEstablished []string             `json:"not_established,omitempty"`
}

// checkRecord is one check of a cardRecord.
type checkRecord struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Status is pass, fail, skipped (it should have run and could not:
	// the verdict is then not established) or not declared (it needs what
	// the implementation does not declare: outside the verdict).
	Status string `json:"status"`
	// Reason is why it failed, was skipped or is not declared; none for a
	// pass.
	Reason string `json:"reason,omitempty"`
}

// Check statuses of a checkRecord beside conform.Pass and conform.Fail.
const (
	checkSkipped     = "skipped"
	checkNotDeclared = "not declared"
)

// cardsFile is docs/conform-cards.json.
type cardsFile struct {
	GeneratedBy string       `json:"generated_by"`
	Cards       []cardRecord `json:"cards"`
}

// newCardRecord is rep as a row of the tables, run by command.
func newCardRecord(command, adapter string, rep *conform.Report) cardRecord {
	rec := cardRecord{Command: command, Adapter: adapter, Implementation: rep.Implementation, Version: rep.Version,
		Capabilities: rep.Capabilities, Contract: rep.Contract, Card: *rep.Card, Verdict: rep.Verdict,
		Why: rep.Why, NotEstablished: rep.NotEstablished}
	if r := rep.Card.Float32ErrorRatio; r != nil {
		rounded := math.Round(*r*100) / 100
		rec.Card.Float32ErrorRatio = &rounded
	}
	for _, ch := range rep.Checks {
		c := checkRecord{Name: ch.Name, Kind: ch.Kind, Status: ch.Status, Reason: ch.Detail}
		switch {
		case ch.Status == conform.Pass:
			c.Reason = ""
		case ch.Status == conform.Fail:
		case ch.Undeclared:
			c.Status = checkNotDeclared
		default:
			c.Status = checkSkipped
		}
		rec.Checks = append(rec.Checks, c)
	}
	return rec
}

// TestEveryShippedAdapterHasACard: the tables have a row for every
// adapter attnlab conform -list shows, and a card test for each.
func TestEveryShippedAdapterHasACard(t *testing.T) {
	var names []string
	for _, c := range cardCases {
		names = append(names, c.exec)
	}
	for _, s := range adapters.List() {
		if n := strings.Count(strings.Join(names, "\n")+"\n", s.Name+"\n"); n != 1 {
			t.Errorf("shipped adapter %s has %d card cases, want 1", s.Name, n)
		}
	}
	if len(names) != len(adapters.List()) {
		t.Errorf("%d card cases for %d shipped adapters", len(names), len(adapters.List()))
	}
}

// TestConformCards compares docs/conform-cards.md (every card field, the
// checks and the command of every row), docs/conform-cards.json (what the
// tables are made from) and docs/conform.md's compact table with this run of
// attnlab conform on attnlab's kernels and every shipped adapter (go test
// ./adapters -run ConformCards -update writes all three from the run).
func TestConformCards(t *testing.T) {
	for _, c := range cardCases {
		if why := cardMissing(c); why != "" {
			t.Skipf("the tables need every adapter; %s: %s", c.name, why)
		}
	}
	var records []cardRecord
	for _, impl := range []struct {
		name string
		impl conform.Implementation
	}{{"reference", conform.Reference()}, {"fused", conform.Fused()}} {
		rep, err := conform.Run(context.Background(), impl.impl, "position")
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, newCardRecord("attnlab conform -impl "+impl.name, "", rep))
	}
	// the shipped adapters in the order of attnlab conform -list
	cases := slices.Clone(cardCases)
	order := func(c cardCase) int {
		return slices.IndexFunc(adapters.List(), func(s adapters.Shipped) bool { return s.Name == c.exec })
	}
	slices.SortStableFunc(cases, func(a, b cardCase) int { return order(a) - order(b) })
	for _, c := range cases {
		var rep *conform.Report
		t.Run(c.name, func(t *testing.T) { rep = runCard(t, c) })
		if rep == nil {
			t.FailNow()
		}
		records = append(records, newCardRecord("attnlab conform -exec "+c.exec, c.exec, rep))
	}

	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cardsFile{GeneratedBy: cardsCommand, Cards: records}); err != nil {
		t.Fatal(err)
	}
	doc := cardsMarkdown(records)
	page, err := os.ReadFile(cardsPage)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- conform cards: " + cardsCommand + " -->\n", "<!-- end of conform cards -->"
	s := string(page)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/conform.md has no block between %q and %q", begin, end)
	}
	page = []byte(s[:i+len(begin)] + compactTable(records) + s[j:])

	for _, f := range []struct {
		path string
		data []byte
	}{{cardsJSON, js.Bytes()}, {cardsDoc, []byte(doc)}, {cardsPage, page}} {
		if *update {
			if err := atomicfile.WriteFile(f.path, f.data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Errorf("%v: %s writes it", err, cardsCommand)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s is not this run's; %s rewrites it. The first difference:\n%s", strings.TrimPrefix(f.path, "../"), cardsCommand, firstDifference(string(got), string(f.data)))
		}
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d\ncommitted: %s\nthis run:  %s", i+1, a, b)
		}
	}
	return "(none)"
}

// cell escapes s for a cell of a Markdown table.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// anchor is the anchor GitHub gives a heading of text.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// field is the card field key's value v, marked when the implementation
// refused the probe of a field it declares what it needs for (the verdict is
// then not established).
func (rec cardRecord) field(key, v string) string {
	if slices.Contains(rec.Card.Refused, key) {
		return v + " (refused)"
	}
	return v
}

// heading is the section heading of a row: its -exec or -impl argument.
func (rec cardRecord) heading() string {
	if rec.Adapter != "" {
		return rec.Adapter
	}
	return strings.TrimPrefix(rec.Command, "attnlab conform ")
}

// joinPlaces is m's values at keys, " · " between them, or n/a.
func joinPlaces(m map[string]string, keys []string) string {
	if len(m) == 0 {
		return conform.NA
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, cmp.Or(m[k], "?"))
	}
	return strings.Join(parts, " · ")
}

var cacheLayouts = []string{"static", "left-padded", "out-of-order"}

// backwardCell says whether the backward of an empty row is its forward's
// derivative, or why that was not asked.
func (rec cardRecord) backwardCell() string {
	c := rec.Card
	switch {
	case c.EmptyRowBackwardConsistent != nil:
		return map[bool]string{true: "yes", false: "no"}[*c.EmptyRowBackwardConsistent]
	case c.EmptyRow == conform.NA:
		return conform.NA
	case !rec.Capabilities.Gradients:
		return "n/a (no gradients)"
	case c.EmptyRow == conform.EmptyError:
		return "n/a (an error)"
	case c.EmptyRow == conform.EmptyNaN:
		return "n/a (NaN forward)"
	}
	return conform.NA
}

// checkCounts counts rec's checks by status: "29 pass, 1 fail (empty-row),
// 3 not declared".
func (rec cardRecord) checkCounts(names bool) string {
	n := map[string]int{}
	var failed []string
	for _, c := range rec.Checks {
		n[c.Status]++
		if c.Status == conform.Fail {
			failed = append(failed, c.Name)
		}
	}
	s := fmt.Sprintf("%d pass, %d fail", n[conform.Pass], n[conform.Fail])
	if names && len(failed) > 0 {
		s += " (" + strings.Join(failed, ", ") + ")"
	}
	if n[checkSkipped] > 0 {
		s += fmt.Sprintf(", %d skipped", n[checkSkipped])
	}
	return s + fmt.Sprintf(", %d not declared", n[checkNotDeclared])
}

func ratioCell(c conform.Card) string {
	if c.Float32ErrorRatio == nil {
		return conform.NA
	}
	return fmt.Sprintf("%.2f", *c.Float32ErrorRatio)
}

// emptyCell is the empty-row field with the places that differ from it.
func emptyCell(c conform.Card) string {
	s := c.EmptyRow
	for _, place := range conform.EmptyRowPlaces {
		if v, ok := c.EmptyRowAt[place]; ok && v != c.EmptyRow {
			s += fmt.Sprintf(" (%s row: %s)", place, v)
		}
	}
	return s
}

// compactTable is docs/conform.md's table: the fields where implementations
// differ most, one row each, linked to its section of
// docs/conform-cards.md.
func compactTable(records []cardRecord) string {
	var b strings.Builder
	b.WriteString("| `attnlab conform` | version | causal M < N | M > N | M = 1 | empty valid row | GQA | scale | window | checks | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, rec := range records {
		c := rec.Card
		fmt.Fprintf(&b, "| [`%s`](conform-cards.md#%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			rec.heading(), anchor(rec.heading()), cell(rec.Version),
			rec.field("causal_m_lt_n", c.CausalMLtN), rec.field("causal_m_gt_n", c.CausalMGtN), rec.field("causal_m_1", c.CausalM1), emptyCell(c),
			c.GQA, rec.field("scale", c.Scale), rec.field("window_keys", c.WindowKeys), rec.checkCounts(false), rec.Verdict)
	}
	return b.String()
}

// cardsMarkdown is docs/conform-cards.md: every card field of every row in
// one table, then a section per row with what it declares, why each n/a,
// the notes, and every check with its status and reason.
func cardsMarkdown(records []cardRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Conformance cards

<!-- generated by %s: do not edit; the test fails when this file is not its run's -->

One row per implementation, flag and version that attnlab conform checks:
attnlab's own kernels and every adapter shipped in [adapters/](../adapters/README.md),
each measured by the command in its first column, held to the default
contract (position). A field marked "(refused)" is one whose probe the
implementation refused although it declares what the probe needs (the
card's "refused" list): the verdict is then not established. The fields,
their values and the verdict are explained
in [conform-your-kernel.md](conform-your-kernel.md#reading-the-card); the
protocol in [conform-protocol.md](conform-protocol.md). The same results,
machine-readable, are in [conform-cards.json](conform-cards.json). All of it
is written by `+"`%s`"+`, which fails when a committed
file differs from its run; the findings behind the rows that are wrong
rather than on another convention are in [findings/](findings/README.md).

Column groups: the causal alignment at M < N (a chunk after a cache), M > N
and M = 1 (decode); what a valid query with no visible key gets, in the
middle and as the first, middle, last row and in a leading block, and
whether its backward is the derivative of that forward; padding rows; the
GQA head mapping; the default scale; the keys a window of W shows; extreme
logits; the cache layouts static, left-padded and out-of-order; the float32
error over that of a plain float32 implementation; sinks, softcap and ALiBi;
the checks; the verdict.

`, cardsCommand, cardsCommand)
	b.WriteString("| command | version | causal M < N | M > N | M = 1 | empty valid row | first · middle · last · leading | its backward | padding rows | GQA | scale | window of W sees | extreme logits | static · left-padded · out-of-order cache | float32 error ratio | sinks | sinks: empty row | dσ | softcap | softcap applied | ALiBi | ALiBi distance by | checks | verdict |\n")
	b.WriteString("|" + strings.Repeat("---|", 24) + "\n")
	for _, rec := range records {
		c := rec.Card
		cells := []string{
			fmt.Sprintf("[`%s`](#%s)", rec.Command, anchor(rec.heading())), cell(rec.Version),
			rec.field("causal_m_lt_n", c.CausalMLtN), rec.field("causal_m_gt_n", c.CausalMGtN), rec.field("causal_m_1", c.CausalM1),
			rec.field("empty_row", c.EmptyRow), joinPlaces(c.EmptyRowAt, conform.EmptyRowPlaces), rec.backwardCell(),
			rec.field("padding_rows", c.PaddingRows), rec.field("gqa", c.GQA), rec.field("scale", c.Scale), rec.field("window_keys", c.WindowKeys),
			cell(rec.field("extreme_logits", c.ExtremeLogits)), cell(rec.field("cache_layouts", joinPlaces(c.CacheLayouts, cacheLayouts))),
			rec.field("float32_error_ratio", ratioCell(c)),
			c.Sinks, rec.field("sinks_empty_row", c.SinksEmptyRow), rec.field("sinks_grad", c.SinksGrad), c.Softcap,
			rec.field("softcap_order", c.SoftcapOrder), c.Alibi, rec.field("alibi_distance", c.AlibiDistance),
			rec.checkCounts(true), rec.Verdict,
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n## Each row\n")
	for _, rec := range records {
		writeSection(&b, rec)
	}
	return b.String()
}

// writeSection writes rec's section of docs/conform-cards.md.
func writeSection(b *strings.Builder, rec cardRecord) {
	fmt.Fprintf(b, "\n### `%s`\n\n", rec.heading())
	fmt.Fprintf(b, "`%s`: %s, %s.\n\n", rec.Command, rec.Implementation, rec.Version)
	switch rec.Verdict {
	case conform.Conformant:
		fmt.Fprintf(b, "**%s** to the %s contract, within what it declares.\n\n", rec.Verdict, rec.Contract)
	case conform.Undecided:
		fmt.Fprintf(b, "**%s** for the %s contract: %s.\n\n", rec.Verdict, rec.Contract, strings.Join(rec.NotEstablished, "; "))
	default:
		fmt.Fprintf(b, "**%s** to the %s contract: %s.\n\n", rec.Verdict, rec.Contract, strings.Join(rec.Why, "; "))
	}
	caps := rec.Capabilities
	var declared []string
	declared = append(declared, strings.Join(caps.DTypes, " and "))
	for _, d := range []struct {
		on   bool
		name string
	}{{caps.Gradients, "gradients"}, {caps.LSE, "lse"}, {caps.GQA, "gqa"}, {caps.KVCache, "kv_cache"}, {caps.Scale, "scale"},
		{caps.Conventions, "conventions"}, {caps.Accumulates, "accumulates"}, {caps.Sinks, "sinks"}, {caps.Softcap, "softcap"}, {caps.Alibi, "alibi"}} {
		if d.on {
			declared = append(declared, d.name)
		}
	}
	masks := "no masks"
	if len(caps.Masks) > 0 {
		masks = "masks " + strings.Join(caps.Masks, ", ")
	}
	fmt.Fprintf(b, "Declares: %s; %s.\n", strings.Join(declared, ", "), masks)
	if len(rec.Card.NotMeasured) > 0 {
		b.WriteString("\nNot measured (`n/a`):\n\n")
		var fields []string
		for f := range rec.Card.NotMeasured {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		for _, f := range fields {
			fmt.Fprintf(b, "- `%s`: %s\n", f, rec.Card.NotMeasured[f])
		}
	}
	if len(rec.Card.Refused) > 0 {
		fmt.Fprintf(b, "\nRefused, although it declares what their probes need (so the verdict cannot rest on them): `%s`.\n", strings.Join(rec.Card.Refused, "`, `"))
	}
	if len(rec.Card.Notes) > 0 {
		b.WriteString("\nNotes of the measurement:\n\n")
		for _, n := range rec.Card.Notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	b.WriteString("\nChecks:\n\n")
	var passed []string
	type group struct{ status, reason string }
	byReason := map[group][]string{} // skipped or not declared, and why → the checks
	var groups []group
	for _, c := range rec.Checks {
		switch c.Status {
		case conform.Pass:
			passed = append(passed, "`"+c.Name+"`")
		case conform.Fail:
			fmt.Fprintf(b, "- fail: `%s`: %s", c.Name, listItem(c.Reason))
		default:
			g := group{c.Status, c.Reason}
			if byReason[g] == nil {
				groups = append(groups, g)
			}
			byReason[g] = append(byReason[g], "`"+c.Name+"`")
		}
	}
	// skipped checks first: they keep the verdict open
	skippedFirst := func(g group) int {
		if g.status == checkSkipped {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(groups, func(x, y group) int { return skippedFirst(x) - skippedFirst(y) })
	if len(passed) > 0 {
		fmt.Fprintf(b, "- pass (%d): %s\n", len(passed), strings.Join(passed, ", "))
	}
	for _, g := range groups {
		what := "not declared"
		if g.status == checkSkipped {
			what = "skipped, so the verdict is not established"
		}
		checks := byReason[g]
		fmt.Fprintf(b, "- %s (%d): %s: %s", what, len(checks), strings.Join(checks, ", "), listItem(g.reason))
	}
}

// listItem is the text of a list item: its first line, and the lines after
// it (a matrix of what a query saw) as a block of text inside the item.
func listItem(text string) string {
	first, rest, ok := strings.Cut(text, "\n")
	if !ok {
		return text + "\n"
	}
	var b strings.Builder
	b.WriteString(first + "\n\n  ```text\n")
	for _, l := range strings.Split(strings.TrimRight(rest, "\n"), "\n") {
		b.WriteString(strings.TrimRight("  "+l, " ") + "\n")
	}
	b.WriteString("  ```\n")
	return b.String()
}
