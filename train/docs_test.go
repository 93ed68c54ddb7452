package train_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/attnlab/attnlab/internal/docblock"
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
	blk, err := docblock.Find(filepath.Join("..", "docs", "lab.md"), "<!-- training table: go test ./train -run TrainingMatchesPyTorch -update -->\n", "<!-- end of training table -->")
	if err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old := blk.Text(); old != want {
		t.Errorf("docs/lab.md's table of the training cross-check differs from this run (go test ./train -run TrainingMatchesPyTorch -update rewrites it):\ndocs/lab.md:\n%s\nrun:\n%s", old, want)
	}
}
