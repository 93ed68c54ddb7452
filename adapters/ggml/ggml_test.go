package ggml_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters/ggml/internal/build"
)

// bin is the folder the programs were built into for this run; skipWhy is
// why they could not be (no C compiler, no ollama module), "" when built.
var bin, skipWhy string

// TestMain builds the programs once, with the flags of internal/build, so
// that every test runs what the build tool ships.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "attnlab-ggml-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := build.Configure(context.Background(), ".")
	if err != nil {
		skipWhy = "the ggml programs cannot be built here: " + err.Error()
	} else if err := c.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the ggml programs:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func need(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

// TestMaskedRowReproduces runs the finding's reproduction: it exits 1, with
// the masked row zero through flash_attn_ext and NaN through soft_max_ext,
// and the row that sees keys equal on both paths.
func TestMaskedRowReproduces(t *testing.T) {
	need(t)
	out, err := exec.Command(filepath.Join(bin, "ggml-masked-row")).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1 (the paths disagree):\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 7 || !strings.Contains(lines[0], "github.com/ollama/ollama v") {
		t.Fatalf("output:\n%s", out)
	}
	flash, soft := strings.Fields(lines[5]), strings.Fields(lines[6])
	if len(flash) != 5 || len(soft) != 5 {
		t.Fatalf("row 1 lines %q, %q", lines[5], lines[6])
	}
	for d := 1; d < 5; d++ {
		if flash[d] != "0.000000" || !strings.Contains(soft[d], "nan") {
			t.Errorf("row 1 feature %d: flash %s, softmax %s; want 0 and NaN", d-1, flash[d], soft[d])
		}
	}
	if a, b := strings.Fields(lines[2]), strings.Fields(lines[3]); len(a) != 5 || fmt.Sprint(a[1:]) != fmt.Sprint(b[1:]) {
		t.Errorf("row 0 differs:\n%s\n%s", lines[2], lines[3])
	}
}
