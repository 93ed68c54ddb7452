package lab

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/oracle"
)

// full is the one run of the whole lab in go test ./...: the tests of this
// package share it, and the other packages test their own pieces on a few
// operations.
var full = sync.OnceValues(func() (*Report, error) { return Run(context.Background(), Options{}) })

func fullReport(t *testing.T) *Report {
	t.Helper()
	r, err := full()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLab runs the whole lab (in parallel over faults, so -race sees the
// workers) and checks every check passes on every correct implementation
// and the report survives JSON.
func TestLab(t *testing.T) {
	r := fullReport(t)
	for _, op := range r.Ops {
		for _, c := range op.Checks {
			if !c.Pass {
				t.Errorf("%s/%s fails on the correct implementation: %s", op.Op, c.Check, c.Detail)
			}
		}
	}
	if len(r.Ops) != len(Ops()) || len(r.Ops[0].Faults) == 0 {
		t.Fatalf("lab ran %d of %d operations", len(r.Ops), len(Ops()))
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Ops []OpReport }
	if err := json.Unmarshal(data, &back); err != nil || len(back.Ops) != len(r.Ops) {
		t.Fatalf("JSON round trip: %v", err)
	}
	// Broken implementations measure infinite errors; JSON must carry them.
	inf := false
	for _, f := range back.Ops[0].Faults {
		for _, res := range f.Results {
			inf = inf || math.IsInf(res.Error, 1)
		}
	}
	if !inf {
		t.Error("no fault result carried an infinite error through JSON")
	}
}

// TestOKIsFalseWhenAFaultEscapes makes sure the verdict can fail.
func TestOKIsFalseWhenAFaultEscapes(t *testing.T) {
	r := &Report{Ops: []OpReport{{Op: "x", Faults: []FaultOutcome{{Name: "f"}}}}}
	if r.OK() {
		t.Error("a fault caught by nothing left the report OK")
	}
	r = &Report{Ops: []OpReport{{Op: "x", Checks: []CheckOutcome{{}}}}}
	if r.OK() {
		t.Error("a failed check left the report OK")
	}
}

// TestEveryFaultIsCaught asserts, for every operation, the other half of
// every check: each fault is caught. A fault the registry marks FDBlind keeps
// forward and backward consistent, so no finite-difference check may catch it
// by measurement; every other fault must be caught by finite differences.
func TestEveryFaultIsCaught(t *testing.T) {
	for _, op := range fullReport(t).Ops {
		for _, f := range op.Faults {
			t.Run(op.Op+"/"+f.Name, func(t *testing.T) {
				t.Logf("caught by %v", f.CaughtBy)
				if !f.Caught() {
					t.Fatalf("%s escaped every check: %s", f.Name, f.Breaks)
				}
				fd := f.Kinds[checks.Gradient]
				if f.FDBlind && fd > 0 {
					t.Errorf("%s is registered as invisible to finite differences, yet they caught it", f.Name)
				}
				if !f.FDBlind && fd == 0 {
					t.Errorf("%s breaks the backward, yet no finite-difference check caught it", f.Name)
				}
			})
		}
	}
}

// TestRegistry checks the rows: one name per operation, a complete long form
// on every check, and every oracle op named by a row is one attnlab ref
// knows, and every one it knows is named.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	oracles := map[string]bool{}
	for _, info := range Catalog() {
		if seen[info.Op] {
			t.Errorf("operation %s registered twice", info.Op)
		}
		seen[info.Op] = true
		if info.Oracle != "" {
			oracles[info.Oracle] = true
			if !slices.Contains(oracle.Ops, info.Oracle) {
				t.Errorf("%s names oracle op %q, which attnlab ref does not know (%v)", info.Op, info.Oracle, oracle.Ops)
			}
		}
		if info.Reads == "" {
			t.Errorf("%s does not say what its sized instance reads", info.Op)
		}
		for _, c := range info.Checks {
			if !c.Long.Complete() {
				t.Errorf("%s/%s has no complete long form", info.Op, c.Name)
			}
		}
		for _, f := range info.Faults {
			if seen["fault:"+f.Name] {
				t.Errorf("fault %s registered twice", f.Name)
			}
			seen["fault:"+f.Name] = true
		}
	}
	for _, op := range oracle.Ops {
		if !oracles[op] {
			t.Errorf("oracle op %s is named by no row of the registry", op)
		}
	}
	if _, err := Run(context.Background(), Options{Ops: []string{"nosuch"}}); err == nil {
		t.Error("an unknown operation was run")
	}
}
