package faults_test

import (
	"slices"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
)

// TestEveryFaultIsCaught is the negative half of the checks: every fault
// fails at least one check. For a fault the registry marks FDBlind, the
// finite-difference checks must pass (forward and backward stay consistent)
// and a semantic check must catch it; for the others, finite differences
// themselves must catch it.
func TestEveryFaultIsCaught(t *testing.T) {
	all := checks.All()
	for _, f := range faults.Attention() {
		t.Run(f.Name, func(t *testing.T) {
			var caught, fdCaught []string
			for _, c := range all {
				r := c.Run(f.Impl)
				if !r.Pass {
					caught = append(caught, c.Name)
					// A finite-difference check that failed because the
					// forward returned an error (a row left with no key) is
					// a catch, but not one made by comparing derivatives.
					if c.Kind == checks.Gradient && !r.Errored {
						fdCaught = append(fdCaught, c.Name)
					}
				}
			}
			t.Logf("caught by %v", caught)
			if len(caught) == 0 {
				t.Fatalf("fault %s (%s) escaped every check", f.Name, f.Breaks)
			}
			if f.FDBlind && len(fdCaught) > 0 {
				t.Errorf("fault %s is registered as invisible to finite differences, yet %v caught it", f.Name, fdCaught)
			}
			if !f.FDBlind && len(fdCaught) == 0 {
				t.Errorf("fault %s breaks the backward, yet no finite-difference check caught it", f.Name)
			}
		})
	}
}

// TestMaskDroppedIsCaughtOnlySemantically pins the lab's central lesson: a
// mask removed from forward and backward alike passes finite differences.
func TestMaskDroppedIsCaughtOnlySemantically(t *testing.T) {
	i := slices.IndexFunc(faults.Attention(), func(f faults.Fault[checks.Impl]) bool { return f.Name == "mask-dropped" })
	f := faults.Attention()[i]
	for _, name := range []string{"fd-elements", "fd-directions"} {
		c, _ := checks.ByName(name)
		if r := c.Run(f.Impl); !r.Pass {
			t.Errorf("%s caught mask-dropped (%s); it should not be able to", name, r.Detail)
		}
	}
	for _, name := range []string{"first-row-grad", "future-invariance", "visibility"} {
		c, _ := checks.ByName(name)
		if r := c.Run(f.Impl); r.Pass {
			t.Errorf("%s missed mask-dropped", name)
		}
	}
}
