package train_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/lab.md's table of the training cross-check from this run")

// checkTrainingTable: docs/lab.md's table of the training cross-check
// against PyTorch is this run's (steps AdamW steps of variants models, the
// worst |a−b|/(1+|b|) over their losses and final weights); go test
// ./train -run TrainingMatchesPyTorch -update rewrites it.
func checkTrainingTable(t *testing.T, steps, variants int, worst float64) {
	t.Helper()
	want := fmt.Sprintf("| what | cases | worst |\n|---|---|---|\n| %d AdamW training steps (clipping, accumulation, weight decay groups): losses and weights | %d | %.2g |\n",
		steps, variants, worst)
	path := filepath.Join("..", "docs", "lab.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- training table: go test ./train -run TrainingMatchesPyTorch -update -->\n", "<!-- end of training table -->"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block between %q and %q", path, begin, end)
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old := s[i+len(begin) : j]; old != want {
		t.Errorf("docs/lab.md's table of the training cross-check differs from this run (go test ./train -run TrainingMatchesPyTorch -update rewrites it):\ndocs/lab.md:\n%s\nrun:\n%s", old, want)
	}
}
