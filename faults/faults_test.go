package faults_test

import (
	"math"
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

// TestFloat32FaultIsTheConstant shows the float32 fault is caught for its
// constant and nothing else: the same written-out float32 path with the
// exact ln 2 passes the float32 check, with 0.69 it fails.
func TestFloat32FaultIsTheConstant(t *testing.T) {
	c, _ := checks.SwiGLU().Check("float32")
	impl := checks.SwiGLUReference
	impl.F32 = faults.SwiGLU32(func(a float32) float32 { return float32(1 / (1 + math.Exp(-float64(a)))) })
	if r := c.Run(impl); !r.Pass {
		t.Fatalf("the written-out float32 path with the exact sigmoid fails: %s", r.Detail)
	}
	impl.F32 = faults.SwiGLU32(faults.SigmoidLn2Rounded)
	r := c.Run(impl)
	if r.Pass {
		t.Fatalf("ln 2 rounded to 0.69 passed the float32 check: %s", r.Detail)
	}
	t.Logf("caught: %s", r.Detail)
}
