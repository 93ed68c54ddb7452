package lab

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
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
