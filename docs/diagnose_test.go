package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve/search"
)

const (
	diagnoseBegin = "<!-- diagnose table: scripts/diagnose-readme.sh DATA CORPUS -->\n"
	diagnoseEnd   = "<!-- end of diagnose table -->"
)

// diagnoseTable renders what attnlab retriever diagnose -json measured:
// a row per share and per contrast set, each system's accuracy on the
// contrast sets (with its ties where it has any).
func diagnoseTable(d *search.Diagnosis) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s training pairs examined.\n\n| warning | measured |\n|---|---|\n", thousands(d.Pairs))
	shareRow := func(prefix string, s search.Share) {
		fmt.Fprintf(&b, "| %s%s | %s of %s (%.2f %%) |\n", prefix, s.Name, thousands(s.Count), thousands(s.Of), 100*s.Value)
	}
	for _, s := range d.InBatch {
		shareRow("in-batch negatives: ", s)
	}
	for _, s := range d.Hard {
		shareRow("mined hard negatives: ", s)
	}
	if s := d.LengthBias; s != nil {
		fmt.Fprintf(&b, "| %s | %.3f (%d queries) |\n", s.Name, s.Value, s.Of)
	}
	for _, c := range d.Contrasts {
		systems := make([]string, 0, len(c.Accuracy))
		for name := range c.Accuracy {
			systems = append(systems, name)
		}
		slices.SortFunc(systems, func(a, b string) int {
			if d := systemOrder(a) - systemOrder(b); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		var cells []string
		for _, name := range systems {
			cell := fmt.Sprintf("%s %.3f", name, c.Accuracy[name])
			if t := c.Ties[name]; t > 0 {
				cell += fmt.Sprintf(" (%.1f %% ties)", 100*t)
			}
			cells = append(cells, cell)
		}
		measured := strings.Join(cells, " / ")
		if c.Items == 0 {
			measured = "none found"
		}
		fmt.Fprintf(&b, "| contrast: %s (%s items) | %s |\n", c.Name, thousands(c.Items), measured)
	}
	return b.String()
}

// systemOrder puts the systems in the order of the pipeline, those it
// does not know after them by name.
func systemOrder(name string) int {
	if i := slices.Index([]string{"bm25", "dense", "rerank"}, name); i >= 0 {
		return i
	}
	return 99
}

// TestDiagnoseTable: docs/retrieval.md's table of the seed's warnings is
// the rendering of docs/diagnose.json, which scripts/diagnose-readme.sh
// writes from attnlab retriever diagnose -json; -update renders it.
func TestDiagnoseTable(t *testing.T) {
	data, err := os.ReadFile("diagnose.json")
	if err != nil {
		t.Fatal(err)
	}
	var d search.Diagnosis
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("diagnose.json: %v", err)
	}
	if d.Pairs == 0 || len(d.InBatch) == 0 || len(d.Contrasts) == 0 {
		t.Fatalf("diagnose.json measured nothing: %d pairs, %d in-batch shares, %d contrasts", d.Pairs, len(d.InBatch), len(d.Contrasts))
	}
	syncBlock(t, "retrieval.md", diagnoseBegin, diagnoseEnd, diagnoseTable(&d),
		"the rendering of diagnose.json (go test ./docs -run DiagnoseTable -update)")
}
