package conform

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProgramEnv: a Program's Env reaches the adapter, added to this
// process's environment (the adapter also sees what was already set).
func TestProgramEnv(t *testing.T) {
	t.Setenv("ATTNLAB_TEST_INHERITED", "yes")
	a, err := StartProgram(context.Background(), Program{Name: "env adapter", Argv: []string{os.Args[0]},
		Env: []string{"ATTNLAB_TEST_ADAPTER=reference"}}, 10*time.Second)
	if err != nil {
		t.Fatalf("an adapter told what to be only through Program.Env: %v", err)
	}
	defer a.Close()
	if !strings.Contains(strings.Join(a.cmd.Env, "\n"), "ATTNLAB_TEST_INHERITED=yes") {
		t.Error("the adapter's environment lost this process's variables")
	}
}

// TestCloseTwice: a second Close, and Close of an adapter never started,
// return nil at once.
func TestCloseTwice(t *testing.T) {
	if err := (&Adapter{}).Close(); err != nil {
		t.Errorf("close of an adapter never started: %v", err)
	}
	a, err := startTestAdapter(t, "reference", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("first close: %v", err)
	}
	start := time.Now()
	if err := a.Close(); err != nil || time.Since(start) > time.Second {
		t.Errorf("second close: %v after %v, want nil at once", err, time.Since(start))
	}
}

// TestCloseGraceDefault: a CloseGrace of 0 means the default, so an
// adapter whose clean exit takes a moment is not a failure.
func TestCloseGraceDefault(t *testing.T) {
	t.Parallel() // after the fast tests, beside the other slow ones
	a, err := startTestAdapter(t, "exit:slow", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.CloseGrace = 0
	if err := a.Close(); err != nil {
		t.Errorf("close with CloseGrace 0 of an adapter exiting after 1.5 s: %v", err)
	}
}

// TestCallsCountRefusals: every answered request counts as a call, a
// refusal (an error response) included.
func TestCallsCountRefusals(t *testing.T) {
	a, err := startTestAdapter(t, "reference", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := &Request{B: 1, Hq: 1, Hkv: 1, M: 1, N: 2, D: 2, Dv: 2, DType: "float64",
		Q: make([]float64, 2), K: make([]float64, 4), V: make([]float64, 4),
		KValid: []int64{0, 0}} // the query sees no key: refused
	before := a.Calls()
	resp, err := a.Attention(r)
	if err != nil || resp.Err == "" {
		t.Fatalf("a row that sees no key: %+v, %v; want a refusal", resp, err)
	}
	r.KValid = nil
	if _, err := a.Attention(r); err != nil {
		t.Fatal(err)
	}
	if got := a.Calls() - before; got != 2 {
		t.Errorf("%d calls counted for a refusal and an answer, want 2", got)
	}
}
