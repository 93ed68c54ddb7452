package checks_test

import (
	"testing"

	"github.com/attnlab/attnlab/checks"
)

// TestReferencePassesEveryCheck is the positive half of every attention
// check: the reference attention passes. The negative half (each check
// catches some fault) is in package lab, which runs every fault.
func TestReferencePassesEveryCheck(t *testing.T) {
	for _, c := range checks.Attention().Checks {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Run(checks.AttentionReference)
			if !r.Pass {
				t.Fatalf("reference fails %s: %s", c.Name, r.Detail)
			}
			t.Logf("%s", r.Detail)
		})
	}
}
