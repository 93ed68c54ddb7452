package lab

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/docblock"
)

var update = flag.Bool("update", false, "rewrite docs/lab.md's block of lab numbers from this run")

// readmeBlock is the part of docs/lab.md that the lab's numbers fill: the
// summary line and the finite-difference measures. Everything in it comes
// from the run; the test fails when docs/lab.md says something else. The
// README's front page quotes its summary line (docs's tests check that).
func readmeBlock(r *Report) string {
	n := r.Counts()
	detail := func(op, check string) string {
		for _, o := range r.Ops {
			if o.Op != op {
				continue
			}
			for _, c := range o.Checks {
				if c.Check == check {
					// "243 elements, max rel 5.4e-10, max abs 8.0e-13, ε = …": up to the step
					d, _, _ := strings.Cut(c.Detail, ", ε")
					return bounds(d)
				}
			}
		}
		return "?"
	}
	central, precise := r.Sweep.Central.Best(), r.Sweep.Precise.Best()
	var b strings.Builder
	fmt.Fprintf(&b, "```text\n$ go run ./cmd/attnlab lab\n…\nSUMMARY: %d/%d checks pass on the correct implementations; %d/%d faults caught (%d invisible to finite differences); %d operations; %.1f s.\nOK\n```\n\n",
		n.Passed, n.Checks, n.Caught, n.Faults, n.FDBlind, n.Ops, r.Seconds)
	fmt.Fprintf(&b, "Finite differences of every element (float64, 4-point stencil) agree with\n")
	fmt.Fprintf(&b, "the hand-derived gradients: attention %s; the whole decoder %s.\n", detail("attention", "fd-elements"), detail("decoder", "fd-elements"))
	fmt.Fprintf(&b, "The ε sweep shows both regimes: central differences reach %.1e at ε = %.0e,\n", central.MaxAbs, central.Eps)
	fmt.Fprintf(&b, "the 4-point stencil %.1e at ε = %.0e; below those steps rounding takes over.\n", precise.MaxAbs, precise.Eps)
	return b.String()
}

// maxErr matches the worst errors of a finite-difference check.
var maxErr = regexp.MustCompile(`max (rel|abs) ([0-9.]+e[-+][0-9]+)`)

// bounds states the worst errors as the power of ten above them ("max rel
// < 1e-07"): their digits are rounding, and change with the CPU's vector
// width (AVX2 or AVX-512 sums in another order); the bound holds on both.
func bounds(detail string) string {
	return maxErr.ReplaceAllStringFunc(detail, func(m string) string {
		f := maxErr.FindStringSubmatch(m)
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil || v <= 0 {
			return m
		}
		return fmt.Sprintf("max %s < 1e%03d", f[1], int(math.Floor(math.Log10(v)))+1)
	})
}

// seconds hides the run time, the one number that changes between runs.
var seconds = regexp.MustCompile(`operations; [0-9.]+ s\.`)

// TestREADMEIsTrue compares docs/lab.md's lab numbers with this run's. With
// -update it writes them: go test ./lab -run README -update.
func TestREADMEIsTrue(t *testing.T) {
	blk, err := docblock.Find(filepath.Join("..", "docs", "lab.md"), "<!-- lab numbers: go test ./lab -run README -update -->\n", "<!-- end of lab numbers -->")
	if err != nil {
		t.Fatal(err)
	}
	want := readmeBlock(fullReport(t))
	got := blk.Text()
	if *update {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if seconds.ReplaceAllString(got, "") != seconds.ReplaceAllString(want, "") {
		t.Errorf("docs/lab.md's lab numbers are not this run's; run go test ./lab -run README -update. Want:\n%s\ngot:\n%s", want, got)
	}
}
