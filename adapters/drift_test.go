package adapters_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
	"github.com/attnlab/attnlab/internal/docblock"
)

// driftPairs are the differential runs of docs/conform-drift.md: ONNX
// Runtime versions side by side, and each op natively and in WASM. A side
// is a shipped adapter's name or the arguments of ort_attention.js (for the
// runs no shipped name covers).
var driftPairs = []struct{ a, b string }{
	{"ort-attention-1.24", "ort-attention-1.27"},
	{"ort-attention-1.27", "ort-attention"},
	{"attention --no-cache --ort 1.24", "attention --no-cache --ort 1.27"},
	{"attention --no-cache --ort 1.27", "ort-attention-no-cache"},
	{"attention --nonpad --ort 1.27", "attention --nonpad"},
	{"mha --ort 1.24", "ort-mha"},
	{"mha --no-cache --ort 1.24", "ort-mha-no-cache"},
	{"ort-attention", "ort-web-attention"},
	{"ort-attention-no-cache", "ort-web-attention-no-cache"},
	{"ort-gqa", "ort-web-gqa"},
	{"ort-mha", "ort-web-mha"},
	{"ort-mha-no-cache", "ort-web-mha-no-cache"},
}

// driftSide is how a side of a pair is started, how the table names it
// (the -exec or -against argument of attnlab conform), and the npm package
// it needs.
func driftSide(side string) (command, shown, npm string) {
	args := side
	command, shown = nodeAdapter(side), `"node adapters/node/ort_attention.js `+side+`"`
	if s, ok := adapters.Lookup(side); ok {
		args, command, shown = s.Command(), side, side
	}
	switch {
	case strings.Contains(args, "--ort 1.24"):
		return command, shown, ortNode124
	case strings.Contains(args, "--ort 1.27"):
		return command, shown, ortNode127
	case strings.Contains(args, "--wasm"):
		return command, shown, ortWeb
	}
	return command, shown, ortNode
}

// TestDriftTable compares docs/conform-drift.md's table with this run of
// attnlab conform's differential mode on every pair (go test ./adapters
// -run DriftTable -update writes it).
func TestDriftTable(t *testing.T) {
	rows := []string{"| A | B | card fields that differ (A → B) | checks that differ | replayed answers that differ | first differing request | command |",
		"|---|---|---|---|---|---|---|"}
	for _, p := range driftPairs {
		ca, sa, na := driftSide(p.a)
		cb, sb, nb := driftSide(p.b)
		for _, npm := range []string{na, nb} {
			if why := npmMissing(npm); why != "" {
				t.Skipf("the drift table needs every ONNX Runtime build: %s", why)
			}
		}
		var d *conform.DiffReport
		t.Run(p.a+" against "+p.b, func(t *testing.T) {
			ctx := context.Background()
			a, err := adapters.Start(ctx, ca, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := adapters.Start(ctx, cb, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if d, err = conform.Diff(ctx, a, b, "position"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s) against %s (%s): %d card fields, %d checks, %d of %d answers differ",
				d.A.Implementation, d.A.Version, d.B.Implementation, d.B.Version, len(d.Card), len(d.Checks), d.Differ, d.Replayed)
		})
		if d == nil {
			t.FailNow()
		}
		rows = append(rows, driftRow(d, sa, sb))
	}
	want := strings.Join(rows, "\n") + "\n"
	const doc = "../docs/conform-drift.md"
	blk, err := docblock.Find(doc, "<!-- conform drift: go test ./adapters -run DriftTable -update -->\n", "<!-- end of conform drift -->")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := blk.Text(); got != want {
		t.Errorf("the drift table of %s is not this run's; go test ./adapters -run DriftTable -update. Want:\n%s\ngot:\n%s", doc, want, got)
	}
}

// driftRow is one pair's row: the sides as attnlab conform takes them,
// what differs, and the command.
func driftRow(d *conform.DiffReport, a, b string) string {
	name := func(r *conform.Report) string { return r.Implementation }
	// an empty row that changes alike in every place is one entry
	var fields []string
	emptyA, emptyB := "", ""
	for _, f := range d.Card {
		if f.Name == "empty_row" {
			emptyA, emptyB = f.A, f.B
		}
	}
	everyPlace := emptyA != ""
	for _, f := range d.Card {
		if strings.HasPrefix(f.Name, "empty_row_at.") && (f.A != emptyA || f.B != emptyB) {
			everyPlace = false
		}
	}
	for _, f := range d.Card {
		switch {
		case strings.HasPrefix(f.Name, "empty_row_at.") && everyPlace:
		case f.Name == "empty_row" && everyPlace:
			fields = append(fields, fmt.Sprintf("empty_row %s → %s (every place)", f.A, f.B))
		default:
			fields = append(fields, fmt.Sprintf("%s %s → %s", f.Name, f.A, f.B))
		}
	}
	var checks []string
	for _, c := range d.Checks {
		checks = append(checks, fmt.Sprintf("%s %s → %s", c.Name, c.A, c.B))
	}
	first := "—"
	if d.First != nil {
		first = fmt.Sprintf("%s: %s", d.First.Described, d.First.What)
	}
	none := func(x []string) string {
		if len(x) == 0 {
			return "none"
		}
		return strings.Join(x, "; ")
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %d of %d | %s | `attnlab conform -exec %s -against %s` |", name(d.A), name(d.B), none(fields), none(checks),
		d.Differ, d.Replayed, first, a, b)
}
