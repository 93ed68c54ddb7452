package lab

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/checks"
)

// TestLab runs the whole lab (in parallel over faults, so -race sees the
// workers) and checks the report is OK and survives JSON.
func TestLab(t *testing.T) {
	r, err := Run(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		var b bytes.Buffer
		r.WriteText(&b)
		t.Fatalf("lab not OK:\n%s", b.String())
	}
	if len(r.Ops) == 0 || len(r.Ops[0].Faults) == 0 {
		t.Fatal("lab ran no operation or no fault")
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
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "ESCAPED") || !strings.Contains(b.String(), "FAILED") {
		t.Errorf("text report does not say the fault escaped:\n%s", b.String())
	}
	r = &Report{Ops: []OpReport{{Op: "x", Checks: []CheckOutcome{{}}}}}
	if r.OK() {
		t.Error("a failed check left the report OK")
	}
}

// TestEveryFaultIsCaught asserts, for every operation, the two halves of
// every check: the correct implementation passes (TestLab) and each fault is
// caught. A fault the registry marks FDBlind keeps forward and backward
// consistent, so no finite-difference check may catch it by measurement;
// every other fault must be caught by finite differences.
func TestEveryFaultIsCaught(t *testing.T) {
	for _, s := range Suites() {
		for _, f := range s.RunFaults() {
			t.Run(s.Name()+"/"+f.Name, func(t *testing.T) {
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
