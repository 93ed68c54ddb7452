package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConformCommand: attnlab's kernels are conformant (exit 0); the
// example adapter is bottom-right aligned and gives NaN on an empty row
// (exit 1, the card says so); usage errors exit 2; an adapter that is not
// there exits 3 naming it.
func TestConformCommand(t *testing.T) {
	code, stdout, stderr := attnlab(t, "conform", "-impl", "reference", "-json")
	var rep struct {
		Implementation string
		Conformant     bool
		Card           map[string]any
		Verdict, Rule  string
		Checks         []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || !rep.Conformant {
		t.Fatalf("conform -impl reference: exit %d (%v)\n%s%s", code, err, stdout, stderr)
	}
	for _, key := range []string{"causal_m_lt_n", "causal_m_gt_n", "causal_m_1", "empty_row", "empty_row_at", "empty_row_backward_consistent", "gqa", "scale",
		"window_keys", "extreme_logits", "cache_layouts", "float32_error_ratio"} {
		if _, ok := rep.Card[key]; !ok {
			t.Errorf("the card lacks %s", key)
		}
	}
	if rep.Verdict != "conformant" || !strings.Contains(rep.Rule, "not established") {
		t.Errorf("verdict %q, rule %q", rep.Verdict, rep.Rule)
	}
	if len(rep.Checks) < 10 || rep.Checks[0].Status != "pass" {
		t.Errorf("checks: %+v", rep.Checks)
	}

	bin := filepath.Join(t.TempDir(), "conform-go")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/conform-go").CombinedOutput(); err != nil {
		t.Fatalf("building the example adapter: %v\n%s", err, out)
	}
	code, stdout, _ = attnlab(t, "conform", "-exec", bin)
	for _, want := range []string{`causal, M < N\s+bottom-right`, `fully masked valid row\s+nan`, "NOT CONFORMANT to the position contract"} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("the example's card lacks %q:\n%s", want, stdout)
		}
	}
	if code != 1 {
		t.Errorf("the example adapter: exit %d, want 1", code)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"conform"}, 2, "-exec and -impl"},
		{[]string{"conform", "-impl", "reference", "-contract", "diagonal"}, 2, "-contract"},
		{[]string{"conform", "-impl", "nosuch"}, 2, "-impl"},
		{[]string{"conform", "-exec", "/nonexistent/adapter --flag"}, 3, "/nonexistent/adapter"},
		{[]string{"conform", "-exec", "/bin/false"}, 3, "hello"},
		{[]string{"conform", "-exec", "/bin/cat"}, 3, "hello"},
	} {
		code, _, stderr := attnlab(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
