package oracle_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/docblock"
)

var updateREADME = flag.Bool("update", false, "rewrite docs/lab.md's table of the PyTorch cross-checks from this run")

// measure is what a PyTorch cross-check found: its cases and the worst
// max |a−b|/(1+|b|) in float64 over them.
type measure struct {
	cases int
	worst float64
}

// measured holds the cross-checks of this process by row of docs/lab.md's
// table, filled by TestAttentionAgreesWithPyTorch, TestOpsAgreeWithPyTorch
// and TestDecoderAgreesWithPyTorch.
var measured = map[string]measure{}

// readmeRows are the rows of docs/lab.md's table of this package's
// cross-checks.
var readmeRows = []struct{ key, what string }{
	{"attention", "attention (GQA, cache offsets, left padding, segments, windows, conventions)"},
	{"attention-variants", "attention with softcap, ALiBi or sinks (each alone and all three; `dsinks`; an empty row with sinks)"},
	{"rope", "RoPE (both pairings, linear and NTK scaling, positions to 110k)"},
	{"rmsnorm", "RMSNorm"},
	{"swiglu", "SwiGLU"},
	{"block", "decoder block (MHA, GQA, MQA, padding, segments, windows)"},
	{"decoder", "whole 2-layer GQA decoder: logits, loss, every gradient"},
}

// TestREADMEPyTorch (run after the cross-checks, its file's name last):
// docs/lab.md's table of worst errors against PyTorch is this run's; go
// test ./oracle -update rewrites it. It skips unless every cross-check
// ran in this process (PyTorch installed, no -run filter leaving one out).
func TestREADMEPyTorch(t *testing.T) {
	for _, r := range readmeRows {
		if _, ok := measured[r.key]; !ok {
			t.Skipf("the %s cross-check did not run in this process: docs/lab.md's table is checked only after all of them", r.key)
		}
	}
	var b strings.Builder
	b.WriteString("| what | cases | worst |\n|---|---|---|\n")
	for _, r := range readmeRows {
		m := measured[r.key]
		fmt.Fprintf(&b, "| %s | %d | %.2g |\n", r.what, m.cases, m.worst)
	}
	blk, err := docblock.Find(filepath.Join("..", "docs", "lab.md"), "<!-- pytorch table: go test ./oracle -update -->\n", "<!-- end of pytorch table -->")
	if err != nil {
		t.Fatal(err)
	}
	want := b.String()
	if *updateREADME {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old := blk.Text(); old != want {
		t.Errorf("docs/lab.md's PyTorch table differs from this run (go test ./oracle -update rewrites it):\ndocs/lab.md:\n%s\nrun:\n%s", old, want)
	}
}
