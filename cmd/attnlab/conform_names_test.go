package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters"
)

// TestConformList: -list prints every shipped adapter, one a line, with
// whether its runtime is here (missing ones say what to install) and what
// it runs, then where the guide to one's own kernel is.
func TestConformList(t *testing.T) {
	code, stdout, stderr := attnlab(t, "conform", "-list")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	table, footer, _ := strings.Cut(stdout, "\n\n")
	if footer != listFooter+"\n" || !strings.Contains(footer, "docs/conform-your-kernel.md") {
		t.Errorf("-list ends with %q, want the way to one's own kernel", footer)
	}
	lines := strings.Split(table, "\n")
	var names []string
	for i, s := range adapters.List() {
		names = append(names, s.Name)
		if i >= len(lines) {
			break
		}
		status := "ready"
		if s.Missing() != "" {
			status = "missing"
		}
		if f := strings.Fields(lines[i]); len(f) < 3 || f[0] != s.Name || f[1] != status || !strings.Contains(lines[i], s.Runs) ||
			status == "missing" && !strings.Contains(lines[i], "install") {
			t.Errorf("line %d: %q, want %s, %s, %q", i, lines[i], s.Name, status, s.Runs)
		}
	}
	if len(lines) != len(names) || !slices.Contains(names, "torch-composite") || !slices.Contains(names, "ort-gqa") {
		t.Errorf("%d lines for %q:\n%s", len(lines), names, stdout)
	}
	if code, _, stderr := attnlab(t, "conform", "-list", "-exec", "torch-composite"); code != 2 || !strings.Contains(stderr, "-list") {
		t.Errorf("-list with -exec: exit %d, %q", code, stderr)
	}
}

// TestConformByNameElsewhere: shipped adapters run by name from a folder
// that is not the repository: torch-composite is conformant (exit 0),
// ort-attention is not (exit 1, bottom-right at M < N, zero empty rows);
// with onnxruntime-node nowhere to be found, the ONNX Runtime adapter is an
// adapter failure (exit 3) saying what to install.
func TestConformByNameElsewhere(t *testing.T) {
	modules, _ := filepath.Abs("../../adapters/node/node_modules")
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		name string
		code int
		card string
	}{
		{"torch-composite", 0, `"causal_m_lt_n": "position"`},
		{"ort-attention", 1, `"causal_m_lt_n": "bottom-right"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NODE_PATH", modules)
			s, _ := adapters.Lookup(c.name)
			if why := s.Missing(); why != "" {
				t.Skipf("%s skipped: %s", c.name, why)
			}
			code, stdout, stderr := attnlab(t, "conform", "-exec", c.name, "-json")
			var rep struct{ Implementation string }
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != c.code || !strings.Contains(stdout, c.card) {
				t.Errorf("exit %d (want %d), card lacks %s (%v)\n%s", code, c.code, c.card, err, stderr)
			}
			t.Logf("%s: %s", c.name, rep.Implementation)
		})
	}
	t.Setenv("NODE_PATH", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	if s, _ := adapters.Lookup("ort-gqa"); s.Missing() == "" {
		t.Skip("onnxruntime-node is in node's global folder: cannot make it missing")
	}
	code, _, stderr := attnlab(t, "conform", "-exec", "ort-gqa")
	if code != 3 || !regexp.MustCompile(`ort-gqa.*npm install --prefix .* onnxruntime-node@`).MatchString(stderr) {
		t.Errorf("ort-gqa without onnxruntime-node: exit %d, %q; want 3 and what to install", code, stderr)
	}
}

// TestConformHelp: conform -h names the family of every shipped adapter
// and points to the guide, the cards and the examples of each language.
func TestConformHelp(t *testing.T) {
	code, stdout, _ := attnlab(t, "conform", "-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := strings.Join(strings.Fields(stdout), " ")
	families := []struct{ prefix, family string }{
		{"torchtext-", "torchtext"}, {"torch-", "PyTorch"}, {"ort-web-", "onnxruntime-web"}, {"ort-", "ONNX Runtime"},
		{"tfjs-", "TF.js"}, {"gomlx-", "GoMLX"}, {"spago", "spaGO"}, {"ggml-", "ggml"},
	}
	for _, s := range adapters.List() {
		i := slices.IndexFunc(families, func(f struct{ prefix, family string }) bool { return strings.HasPrefix(s.Name, f.prefix) })
		if i < 0 {
			t.Errorf("shipped adapter %s is of no family conform -h is known to name: add it to the help and to this test", s.Name)
		} else if !strings.Contains(help, families[i].family) {
			t.Errorf("conform -h does not name %s, the family of %s", families[i].family, s.Name)
		}
	}
	for _, want := range []string{"docs/conform-your-kernel.md", "docs/conform-cards.md", "docs/conform-protocol.md",
		"examples/conform-go", "conform-python", "conform-node", "conform-c"} {
		if !strings.Contains(help, want) {
			t.Errorf("conform -h does not mention %s", want)
		}
	}
}
