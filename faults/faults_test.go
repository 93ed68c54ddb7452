package faults_test

import (
	"slices"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
)

// TestMaskDroppedIsCaughtOnlySemantically pins the lab's central lesson: a
// mask removed from forward and backward alike passes finite differences.
func TestMaskDroppedIsCaughtOnlySemantically(t *testing.T) {
	i := slices.IndexFunc(faults.Attention(), func(f faults.Fault[checks.Impl]) bool { return f.Name == "mask-dropped" })
	f := faults.Attention()[i]
	suite := checks.Attention()
	for _, name := range []string{"fd-elements", "fd-directions"} {
		c, _ := suite.Check(name)
		if r := c.Run(f.Impl); !r.Pass {
			t.Errorf("%s caught mask-dropped (%s); it should not be able to", name, r.Detail)
		}
	}
	for _, name := range []string{"first-row-grad", "future-invariance", "visibility"} {
		c, _ := suite.Check(name)
		if r := c.Run(f.Impl); r.Pass {
			t.Errorf("%s missed mask-dropped", name)
		}
	}
}
