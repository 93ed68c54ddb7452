package report

import (
	"bytes"
	"context"
	"errors"
	stdhtml "html"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/attnlab/attnlab/lab"
)

// quickOps are the operations the HTML tests run: every kind of section
// (faults caught by measurement and by semantics only, an operation without
// faults of its own) in well under a second. The decoder takes most of a
// full run's time and adds nothing the page's structure does not show here.
var quickOps = []string{"attention", "attention-flash", "rmsnorm", "rope"}

func quickReport(t *testing.T) *lab.Report {
	t.Helper()
	r, err := lab.Run(context.Background(), lab.Options{Ops: quickOps})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sharedReport is one quickReport for the tests that only read it.
var sharedReport = sync.OnceValues(func() (*lab.Report, error) { return lab.Run(context.Background(), lab.Options{Ops: quickOps}) })

func sharedQuickReport(t *testing.T) *lab.Report {
	t.Helper()
	r, err := sharedReport()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readDir returns the files of dir and their contents.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

// names returns the entries of dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// TestWriteHTMLReproducible runs the lab twice and writes two reports: every
// file must be identical byte for byte (the page holds no timestamp or
// duration; figures are rendered deterministically from fixed seeds).
func TestWriteHTMLReproducible(t *testing.T) {
	parent := t.TempDir()
	var files []map[string][]byte
	for _, name := range []string{"a", "b"} {
		dir := filepath.Join(parent, name)
		if err := HTML(quickReport(t), dir, false); err != nil {
			t.Fatal(err)
		}
		files = append(files, readDir(t, dir))
	}
	want := []string{"attention-weights.png", "eps-sweep.png", "first-row-gradients.png", "index.html", "rope-rotation.png"}
	for x, f := range files {
		var got []string
		for n := range f {
			got = append(got, n)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("report %d holds %v, want %v", x, got, want)
		}
	}
	for name, a := range files[0] {
		if !bytes.Equal(a, files[1][name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	if got := names(t, parent); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("temporary folders left beside the reports: %v", got)
	}
	for name, data := range files[0] {
		if !strings.HasSuffix(name, ".png") {
			continue
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if s := img.Bounds().Size(); s.X < 300 || s.Y < 300 {
			t.Errorf("%s is only %v", name, s)
		}
	}
}

// TestHTMLPage checks what the page holds: the summary, every operation,
// check and fault, the figures, the self-test hook, and nothing fetched
// from elsewhere.
func TestHTMLPage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	r := sharedQuickReport(t)
	if err := HTML(r, dir, false); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	// html/template writes some characters as references (+ as &#43;); a
	// reader sees the text they stand for.
	text := stdhtml.UnescapeString(html)
	for _, want := range []string{
		"<!DOCTYPE html>", `<pre id="selftest" hidden>`, "[?&]selftest",
		"dV = Pᵀ dO", "dS = P ⊙ (dP − rowsum(P ⊙ dP))", "dQ = dS K · scale", "dK = dSᵀ Q · scale",
		"Causal with a cache: 3 cached + 2 new", "Left padding", "Packed documents", "Sliding window",
		"convention position", "convention bottom-right", "convention top-left",
		"q7", "KV head 1 (q4–q7)", "1/4", "<details",
		"checks pass on the correct implementations", "invisible to finite differences",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, op := range r.Ops {
		if !strings.Contains(html, `id="`+anchor("op", op.Op)+`"`) {
			t.Errorf("no section for %s", op.Op)
		}
		for _, c := range op.Checks {
			if !strings.Contains(html, `id="`+anchor("check", op.Op, c.Check)+`"`) {
				t.Errorf("no row for %s/%s", op.Op, c.Check)
			}
		}
		for _, f := range op.Faults {
			if !strings.Contains(html, `id="`+anchor("fault", op.Op, f.Name)+`"`) {
				t.Errorf("no entry for fault %s/%s", op.Op, f.Name)
			}
		}
	}
	// Self-contained: no URL with a scheme or a protocol-relative one in
	// an attribute or in CSS, and every image is a file of the report.
	for _, re := range []string{`(?i)(src|href)\s*=\s*"(https?:|//)`, `(?i)url\(`, `(?i)@import`, `(?i)<link[^>]+stylesheet`, `(?i)<script[^>]+src`} {
		if m := regexp.MustCompile(re).FindString(html); m != "" {
			t.Errorf("page refers outside itself: %q", m)
		}
	}
	srcs := regexp.MustCompile(`<img src="([^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(srcs) != 4 {
		t.Errorf("page shows %d images, want 4", len(srcs))
	}
	for _, m := range srcs {
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			t.Errorf("image %s: %v", m[1], err)
		}
	}
	if regexp.MustCompile(`\d+\.\d s\b|seconds`).MatchString(html) {
		t.Error("page holds a duration")
	}
}

// TestAttentionExampleFutureIsExactlyZero checks the data behind the
// first-row figure: future keys get exactly zero gradient from the reference
// and non-zero gradient from the fault without a mask.
func TestAttentionExampleFutureIsExactlyZero(t *testing.T) {
	ex, err := newAttentionExample()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ex.Future, []int{5, 6, 7}) || !ex.ExactZero {
		t.Fatalf("future keys %v, exactly zero %v; want [5 6 7], true", ex.Future, ex.ExactZero)
	}
	for _, j := range ex.Future {
		if ex.DK[j] != 0 || ex.DV[j] != 0 || ex.FaultDK[j] == 0 || ex.FaultDV[j] == 0 {
			t.Errorf("key %d: ‖dK‖ %g ‖dV‖ %g, with the fault %g %g", j, ex.DK[j], ex.DV[j], ex.FaultDK[j], ex.FaultDV[j])
		}
	}
	for j := range 5 {
		if ex.DK[j] == 0 || ex.DV[j] == 0 {
			t.Errorf("visible key %d got no gradient", j)
		}
	}
	if rope := newRopeExample(); rope.MaxDiff != 0 {
		t.Errorf("half and interleaved pairings rotate the same pair differently: %g", rope.MaxDiff)
	}
}

// TestWriteHTMLOutputFolder checks the bad-input rules: a folder holding
// files is refused without force and left alone; with force it is replaced;
// an empty folder is used; a file is refused; a failed write leaves nothing.
func TestWriteHTMLOutputFolder(t *testing.T) {
	r := sharedQuickReport(t)
	parent := t.TempDir()

	busy := filepath.Join(parent, "busy")
	if err := os.MkdirAll(busy, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(busy, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := HTML(r, busy, false)
	if !errors.Is(err, ErrDirNotEmpty) {
		t.Fatalf("non-empty folder: error %v, want ErrDirNotEmpty", err)
	}
	if got, _ := os.ReadFile(keep); string(got) != "mine" {
		t.Error("refused folder was changed")
	}
	if err := HTML(r, busy, true); err != nil {
		t.Fatalf("-force: %v", err)
	}
	if _, err := os.Stat(keep); !os.IsNotExist(err) {
		t.Error("-force left the old folder's file in place")
	}
	if _, err := os.Stat(filepath.Join(busy, "index.html")); err != nil {
		t.Errorf("-force wrote no report: %v", err)
	}

	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := HTML(r, empty, false); err != nil {
		t.Errorf("empty folder: %v", err)
	}

	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := HTML(r, file, true); err == nil {
		t.Error("a file was accepted as the output folder")
	}

	// A report that cannot be drawn (no ε sweep) fails half way: neither
	// the folder nor a temporary one is left behind.
	broken := &lab.Report{Ops: r.Ops}
	if err := HTML(broken, filepath.Join(parent, "broken"), false); err == nil {
		t.Error("a report without a sweep was written")
	}
	if got := names(t, parent); !slices.Equal(got, []string{"busy", "empty", "file"}) {
		t.Errorf("after the failed write the folder holds %v", got)
	}
}

// TestEveryCheckExplainsItself asserts that every check of every operation
// has a complete long form and every operation a gradient path, and that
// Explain accepts every name and prints them.
func TestEveryCheckExplainsItself(t *testing.T) {
	for _, info := range lab.Catalog() {
		if info.Guide.What == "" || len(info.Guide.Forward) == 0 || len(info.Guide.Backward) == 0 {
			t.Errorf("operation %s has no gradient-path guide", info.Op)
		}
		for _, c := range info.Checks {
			if !c.Long.Complete() {
				t.Errorf("%s/%s has no complete long form: %+v", info.Op, c.Name, c.Long)
			}
			var b strings.Builder
			if err := Explain(&b, info.Op+"/"+c.Name); err != nil {
				t.Errorf("explain %s/%s: %v", info.Op, c.Name, err)
			}
			for _, want := range []string{c.Claim, c.Long.Shapes, "What a pass proves", "What a pass cannot prove"} {
				if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
					t.Errorf("explain %s/%s lacks %q", info.Op, c.Name, want)
				}
			}
		}
	}
}

func TestExplain(t *testing.T) {
	explain := func(name string) (string, error) {
		var b strings.Builder
		err := Explain(&b, name)
		return strings.Join(strings.Fields(b.String()), " "), err
	}
	out, err := explain("attention")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"V path", "dV = Pᵀ dO", "Q/K path", "dP = dO Vᵀ", "dS = P ⊙ (dP − rowsum(P ⊙ dP))",
		"dQ = dS K · scale", "dK = dSᵀ Q · scale", "[B,Hq,M,N]", "[B,Hkv,N,Dv]", "first-row-grad", "mask-dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain attention lacks %q", want)
		}
	}

	// A bare name run on many operations is explained generically, with
	// the list; one that means the same everywhere is explained once.
	out, err = explain("fd-elements")
	if err != nil || !strings.Contains(out, "rmsnorm/fd-elements") || !strings.Contains(out, "decoder/fd-elements") {
		t.Errorf("explain fd-elements: %v\n%s", err, out)
	}
	out, err = explain("first-row-grad")
	if err != nil || !strings.Contains(out, "CHECK attention/first-row-grad") || !strings.Contains(out, "attention-flash") {
		t.Errorf("explain first-row-grad: %v\n%s", err, out)
	}

	// A fault is run through its operation's checks.
	out, err = explain("mask-dropped")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAULT mask-dropped", "invisible to finite differences", "passed fd-elements", "CAUGHT first-row-grad", "No finite-difference check sees it"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain mask-dropped lacks %q:\n%s", want, out)
		}
	}
	out, err = explain("rmsnorm/rmsnorm-r-constant")
	if err != nil || !strings.Contains(out, "CAUGHT fd-elements") {
		t.Errorf("explain rmsnorm/rmsnorm-r-constant: %v\n%s", err, out)
	}

	for _, bad := range []string{"fd-element", "nosuch", "rope/mask-dropped", "/", ""} {
		_, err := explain(bad)
		var u *UnknownNameError
		if !errors.As(err, &u) {
			t.Errorf("explain %q: error %v, want *UnknownNameError", bad, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "attention-flash") {
			t.Errorf("explain %q: error is not one line naming the operations: %q", bad, err)
		}
	}
	_, err = explain("fd-element")
	if err == nil || !strings.Contains(err.Error(), "did you mean fd-elements") {
		t.Errorf("no suggestion for a misspelling: %v", err)
	}
}
