package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/safetensors"
)

// TestConformDiff: attnlab's reference against an adapter whose window
// shows one key too many (the test binary serving a registered fault):
// only the differences are printed, the card's window_keys among them,
// exit 1; -repro writes the first differing request, which is a window
// request, refuses to overwrite it without -force and replaces it with;
// -json is the DiffReport; the reference against itself through a
// process agrees, exit 0. No Python or Node needed.
func TestConformDiff(t *testing.T) {
	wide := testAdapter(t, "fault:window-off-by-one")
	repro := filepath.Join(t.TempDir(), "repro")
	code, stdout, stderr := attnlab(t, "conform", "-impl", "reference", "-against", wide, "-repro", repro)
	if code != 1 || !regexp.MustCompile(`window_keys\s+A W\s+B W\+1`).MatchString(stdout) || !strings.Contains(stdout, "first: request") {
		t.Fatalf("exit %d (want 1), stdout lacks window_keys A W B W+1 or the first request:\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "causal_m_lt_n") || strings.Contains(stdout, "agrees-with-reference") {
		t.Errorf("prints what does not differ:\n%s", stdout)
	}
	var files []string
	entries, _ := os.ReadDir(repro)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if !slices.Equal(files, []string{"README.txt", "a.safetensors", "b.safetensors", "request.safetensors"}) {
		t.Fatalf("-repro wrote %q", files)
	}
	req, err := safetensors.ReadFile(filepath.Join(repro, "request.safetensors"))
	if err != nil || req.Metadata["op"] != "attention" || req.Metadata["window"] == "" || !req.Has("q") {
		t.Errorf("the saved request: %v %v, want an attention request with a window", req, err)
	}
	if code, _, stderr := attnlab(t, "conform", "-impl", "reference", "-against", wide, "-repro", repro); code != 2 || !strings.Contains(stderr, "-force") {
		t.Errorf("-repro over a result without -force: exit %d, %q; want 2 and the hint", code, stderr)
	}
	os.WriteFile(filepath.Join(repro, "README.txt"), []byte("stale"), 0o644)
	if code, _, stderr := attnlab(t, "conform", "-impl", "reference", "-against", wide, "-repro", repro, "-force"); code != 1 {
		t.Errorf("-force: exit %d, %s", code, stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(repro, "README.txt")); !strings.Contains(string(data), "answered otherwise") {
		t.Errorf("-force did not replace the folder: README %q", data)
	}

	code, stdout, _ = attnlab(t, "conform", "-impl", "reference", "-against", wide, "-json")
	var d struct {
		A, B     struct{ Implementation string }
		Card     []struct{ Name, A, B string }
		Replayed int
		Differ   int
		First    *struct {
			Index         int
			What, Request string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || code != 1 || d.Differ == 0 || d.Replayed < d.Differ || d.First == nil ||
		!strings.Contains(d.First.Request, "window") || !slices.ContainsFunc(d.Card, func(f struct{ Name, A, B string }) bool { return f.Name == "window_keys" }) {
		t.Errorf("-json: exit %d, %v, %+v", code, err, d)
	}
	if d.A.Implementation != "attnlab reference" || d.B.Implementation != "fault window-off-by-one" {
		t.Errorf("-json names A %q and B %q", d.A.Implementation, d.B.Implementation)
	}

	code, stdout, stderr = attnlab(t, "conform", "-impl", "reference", "-against", testAdapter(t, "reference"))
	if code != 0 || !strings.Contains(stdout, "no difference") || !regexp.MustCompile(`answers: 0 of [1-9]\d* replayed`).MatchString(stdout) {
		t.Errorf("the reference against itself: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-impl", "reference", "-repro", repro}, "-repro needs -against"},
		{[]string{"-impl", "reference", "-against", wide, "-force"}, "-force"},
		{[]string{"-list", "-against", wide}, "-list"},
	} {
		if code, _, stderr := attnlab(t, append([]string{"conform"}, c.args...)...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestConformDiffShipped: ONNX Runtime's Attention op against the PyTorch
// composite, two shipped adapters that differ: the causal alignment at
// M < N (bottom-right against the position rule) and the fully masked
// row (zero against an error), and the first request answered otherwise
// is written for reproduction.
func TestConformDiffShipped(t *testing.T) {
	if modules, err := filepath.Abs("../../adapters/node/node_modules"); err == nil {
		t.Setenv("NODE_PATH", modules)
	}
	for _, name := range []string{"ort-attention", "torch-composite"} {
		if s, _ := adapters.Lookup(name); s.Missing() != "" {
			t.Skipf("%s skipped: %s", name, s.Missing())
		}
	}
	repro := filepath.Join(t.TempDir(), "repro")
	code, stdout, stderr := attnlab(t, "conform", "-exec", "ort-attention", "-against", "torch-composite", "-repro", repro)
	for _, want := range []string{`causal_m_lt_n\s+A bottom-right\s+B position`, `empty_row\s+A zero\s+B error`, `answers: [1-9]\d* of \d+ replayed requests differ`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("the differences lack %q", want)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if data, err := os.ReadFile(filepath.Join(repro, "README.txt")); err != nil || !strings.Contains(string(data), "B refused") {
		t.Errorf("the reproduction: %q, %v", data, err)
	}
	if t.Failed() {
		t.Logf("%s%s", stdout, stderr)
	}
}
