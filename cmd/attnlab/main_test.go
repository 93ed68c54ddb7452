package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// attnlab runs the command in-process and returns its exit status and output.
func attnlab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	// Flags are package state: restore their defaults for the next call.
	for _, c := range commands {
		c.flags.VisitAll(func(f *flag.Flag) { f.Value.Set(f.DefValue) })
	}
	return code, stdout.String(), stderr.String()
}

func TestLabPassesAndWritesThePlot(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "sweep.png")
	code, out, errOut := attnlab(t, "lab", "-plot", plot)
	if code != 0 {
		t.Fatalf("lab exited %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"mask-dropped", "passes finite differences", "OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(\d+)/(\d+) checks pass.*; (\d+)/(\d+) faults caught`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[3] != m[4] {
		t.Errorf("summary is not all-pass, all-caught: %q", m)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

func TestMaskPrintsTheSeedTable(t *testing.T) {
	code, out, _ := attnlab(t, "mask", "-past", "3", "-new", "2")
	want := `2 new after 3 cached; causal=true, convention=position; 1 = may read
       old0 old1 old2 new3 new4
new3      1    1    1    1    0
new4      1    1    1    1    1
`
	if code != 0 || out != want {
		t.Errorf("exit %d, got\n%s\nwant\n%s", code, out, want)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"mask", "-pad", "middle:2"},
		{"mask", "-segments", "0,1"},
		{"mask", "-convention", "diagonal"},
		{"gradcheck", "-hq", "3", "-hkv", "2"},
		{"ref", "-op", "attention"},
		{"lab", "extra"},
	} {
		code, _, errOut := attnlab(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
		if errOut == "" {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}

func TestGradcheckCommand(t *testing.T) {
	code, out, errOut := attnlab(t, "gradcheck", "-hq", "2", "-hkv", "1", "-m", "2", "-n", "4", "-d", "3", "-dv", "2", "-precise")
	if code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = attnlab(t, "gradcheck", "-dtype", "float32", "-m", "2", "-n", "4")
	if code != 0 {
		t.Fatalf("float32: exit %d\n%s", code, out)
	}
}

func TestRefRejectsBadInputWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	os.WriteFile(in, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"q\":"), 0o644) // header claims 16 bytes, has 5
	out := filepath.Join(dir, "out.safetensors")
	code, _, errOut := attnlab(t, "ref", "-op", "attention", "-in", in, "-out", out)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("exit %d, stderr %q: want 1 and one line", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written despite the error")
	}
}

func TestLabJSON(t *testing.T) {
	code, out, errOut := attnlab(t, "lab", "-json", "-plot", "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		OK  bool `json:"ok"`
		Ops []struct {
			Op     string `json:"op"`
			Faults []struct {
				CaughtBy []string `json:"caught_by"`
			} `json:"faults"`
		} `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("lab -json is not JSON: %v", err)
	}
	if !r.OK || len(r.Ops) == 0 || len(r.Ops[0].Faults) == 0 {
		t.Errorf("lab -json: ok=%v, %d ops", r.OK, len(r.Ops))
	}
}

func TestFaultsTable(t *testing.T) {
	code, out, _ := attnlab(t, "faults")
	if code != 0 || !strings.Contains(out, "mask-dropped") || !strings.Contains(out, "=== attention") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestGradcheckOps(t *testing.T) {
	for _, op := range []string{"rope", "rmsnorm", "swiglu", "layer", "block"} {
		code, out, errOut := attnlab(t, "gradcheck", "-op", op, "-precise", "-rel", "1e-8")
		if code != 0 || !strings.Contains(out, "OK") {
			t.Errorf("%s: exit %d\n%s%s", op, code, out, errOut)
		}
	}
	if code, _, _ := attnlab(t, "gradcheck", "-op", "nosuch"); code != 2 {
		t.Errorf("unknown op: exit %d, want 2", code)
	}
	if code, _, _ := attnlab(t, "gradcheck", "-op", "rope", "-d", "5"); code != 2 {
		t.Errorf("odd RoPE dimension: exit %d, want 2", code)
	}
}
