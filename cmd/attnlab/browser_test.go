package main

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumPath is Debian's chromium package (apt-get install chromium).
const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium with a fresh profile and the flags that
// keep it from reaching the network on its own, and returns its stdout.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromiumPath, append(flags, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestReportInBrowser writes the HTML report, serves it on 127.0.0.1 and
// loads it in headless Chromium twice: once with ?selftest, where the page's
// own script checks that every image decoded with a non-zero size and that
// no script error, failed load or console error happened, and writes the
// verdict into <pre id=selftest> for --dump-dom to print; once for a
// screenshot, which must be a non-empty PNG of the window's size. The server
// records every request: the page must fetch nothing but its own files.
//
// Set ATTNLAB_SCREENSHOT=FILE to keep the screenshot.
func TestReportInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s not found (apt-get install -y chromium): the report is not checked in a browser", chromiumPath)
	}
	dir := filepath.Join(t.TempDir(), "report")
	if code, out, errOut := attnlab(t, "lab", "-op", someOps, "-html", dir); code != 0 {
		t.Fatalf("lab -html exited %d\n%s\n%s", code, out, errOut)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, f := range files {
		mine = append(mine, "/"+f.Name())
	}

	// Each file at its own path (http.FileServer would redirect
	// /index.html to /); anything else is a 404, and every request is
	// recorded.
	var mu sync.Mutex
	var requested []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean("/" + r.URL.Path)
		mu.Lock()
		requested = append(requested, p)
		mu.Unlock()
		if !slices.Contains(mine, p) {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(filepath.Join(dir, p[1:]))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.ServeContent(w, r, p, fi.ModTime(), f)
	}))
	defer srv.Close()
	page := srv.URL + "/index.html"

	dom := string(chromium(t, "--virtual-time-budget=5000", "--dump-dom", page+"?selftest"))
	start := strings.Index(dom, `<pre id="selftest">`)
	if start < 0 {
		t.Fatalf("the self-test did not run: no <pre id=\"selftest\"> in the dumped DOM (%d bytes)", len(dom))
	}
	verdict := dom[start:]
	verdict = verdict[:strings.Index(verdict, "</pre>")]
	t.Logf("%s", verdict)
	for _, want := range []string{"SELFTEST OK", "images: 4", "broken images: 0", "errors: 0"} {
		if !strings.Contains(verdict, want) {
			t.Errorf("self-test verdict lacks %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	chromium(t, "--screenshot="+shot, "--window-size=1280,2000", page)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if s := img.Bounds().Size(); s.X != 1280 || s.Y != 2000 {
		t.Errorf("screenshot is %v, want 1280×2000", s)
	}
	// A blank page would be a single colour.
	first := img.At(0, 0)
	blank := true
	for y := 0; y < 2000 && blank; y += 7 {
		for x := 0; x < 1280 && blank; x += 7 {
			blank = img.At(x, y) == first
		}
	}
	if blank {
		t.Error("screenshot is blank")
	}
	if keep := os.Getenv("ATTNLAB_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Error(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range requested {
		if !slices.Contains(mine, p) {
			t.Errorf("the page requested %s, which is not a file of the report", p)
		}
	}
	for _, p := range mine {
		if !slices.Contains(requested, p) {
			t.Errorf("%s was never loaded", p)
		}
	}
}

func TestExplainCommand(t *testing.T) {
	code, out, errOut := attnlab(t, "explain", "attention")
	if code != 0 || !strings.Contains(out, "dV = Pᵀ dO") || !strings.Contains(out, "dK = dSᵀ Q · scale") {
		t.Errorf("explain attention: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = attnlab(t, "explain", "attention/ds-rowsum")
	if code != 0 || !strings.Contains(out, "What a pass cannot prove") {
		t.Errorf("explain attention/ds-rowsum: exit %d\n%s", code, out)
	}
	code, out, _ = attnlab(t, "explain", "dq-no-scale")
	if code != 0 || !strings.Contains(out, "CAUGHT  fd-elements") {
		t.Errorf("explain dq-no-scale: exit %d\n%s", code, out)
	}
	code, out, _ = attnlab(t, "explain", "-list")
	if code != 0 || !strings.Contains(out, "decoder") || !strings.Contains(out, "labels-not-shifted") {
		t.Errorf("explain -list: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"explain", "nosuch"}, {"explain"}, {"explain", "a", "b"}} {
		code, out, errOut := attnlab(t, args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out)
		}
		if first, _, _ := strings.Cut(errOut, "\n"); !strings.HasPrefix(first, "attnlab explain: ") {
			t.Errorf("%v: stderr %q", args, errOut)
		}
	}
	_, _, errOut = attnlab(t, "explain", "nosuch")
	if !strings.Contains(errOut, "operations: attention, attention-flash") {
		t.Errorf("unknown name: no hint listing names: %q", errOut)
	}
}

// TestLabHTMLRefusesABusyFolder checks the refusal comes before the run: it
// must be immediate, exit 2, and leave the folder as it was.
func TestLabHTMLRefusesABusyFolder(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errOut := attnlab(t, "lab", "-html", dir)
	if code != 2 || !strings.Contains(errOut, "-force") {
		t.Errorf("exit %d, stderr %q; want 2 and a hint at -force\n%s", code, errOut, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusal took %v: the lab ran first", d)
	}
	if got, err := os.ReadFile(keep); err != nil || string(got) != "mine" {
		t.Error("the refused folder changed")
	}
	if code, _, errOut := attnlab(t, "lab", "-force"); code != 2 {
		t.Errorf("-force without -html or -plot: exit %d (%s)", code, errOut)
	}
}
