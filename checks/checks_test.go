package checks_test

import (
	"testing"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
)

// TestReferencePassesEveryCheck is the positive half of every check: the
// reference attention passes. The negative half (each check catches some
// fault) is in package faults.
func TestReferencePassesEveryCheck(t *testing.T) {
	ref := attention.Reference[float64]().Run
	for _, c := range checks.All() {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Run(ref)
			if !r.Pass {
				t.Fatalf("reference fails %s: %s", c.Name, r.Detail)
			}
			t.Logf("%s", r.Detail)
		})
	}
}
