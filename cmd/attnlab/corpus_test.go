//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeAptScripts puts an apt-get and a dpkg on the PATH that need no
// network: apt-get "downloads" a .deb holding one Go file, dpkg -x unpacks
// it under usr/share/gocode/src. golang-nosuch-dev is unknown to apt,
// golang-copy-dev ships golang-a-dev's file, and golang-hang-dev hangs
// after writing its pid to $FAKE_APT_PID.
func fakeAptScripts(t *testing.T) (pidFile string) {
	t.Helper()
	bin := t.TempDir()
	aptGet := `#!/bin/sh
case "$2" in
golang-nosuch-dev) echo "E: Unable to locate package $2" >&2; exit 100;;
golang-hang-dev) echo "$$" > "$FAKE_APT_PID"; exec sleep 60;;
golang-copy-dev) printf 'package x\n\n// %s\nfunc F() {}\n' golang-a-dev > "$2_1.0-1_all.deb";;
*) printf 'package x\n\n// %s\nfunc F() {}\n' "$2" > "$2_1.0-1_all.deb";;
esac
`
	dpkg := `#!/bin/sh
name=$(basename "$2" | sed 's/_.*//')
mkdir -p "$3/usr/share/gocode/src/example.com/$name"
cp "$2" "$3/usr/share/gocode/src/example.com/$name/$name.go"
`
	os.WriteFile(filepath.Join(bin, "apt-get"), []byte(aptGet), 0o755)
	os.WriteFile(filepath.Join(bin, "dpkg"), []byte(dpkg), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	pidFile = filepath.Join(bin, "pid")
	t.Setenv("FAKE_APT_PID", pidFile)
	return pidFile
}

func writeList(t *testing.T, names ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(path, []byte("# test packages\n"+strings.Join(names, "\n")+"\n"), 0o644)
	return path
}

func TestCorpusFetchAndStats(t *testing.T) {
	fakeAptScripts(t)
	dir := filepath.Join(t.TempDir(), "corpus")
	list := writeList(t, "golang-a-dev", "golang-nosuch-dev", "golang-b-dev", "golang-copy-dev")
	code, out, errOut := attnlab(t, "corpus", "fetch", "-list", list, "-out", dir)
	if code != 0 {
		t.Fatalf("fetch exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"fetched 3 packages", "0 already there; 1 failed",
		"golang-nosuch-dev: apt-get download: E: Unable to locate package golang-nosuch-dev", "run apt-get update"} {
		if !strings.Contains(out, want) {
			t.Errorf("fetch output lacks %q:\n%s", want, out)
		}
	}
	list = writeList(t, "golang-a-dev", "golang-b-dev", "golang-copy-dev")
	code, out, _ = attnlab(t, "corpus", "fetch", "-list", list, "-out", dir)
	if code != 0 || !strings.Contains(out, "all 3 packages already fetched; nothing to do") {
		t.Errorf("second fetch: exit %d\n%s", code, out)
	}

	heldout := filepath.Join(t.TempDir(), "heldout.txt")
	code, out, errOut = attnlab(t, "corpus", "stats", "-corpus", dir, "-std=false", "-val-frac", "1", "-list-heldout", heldout)
	if code != 0 {
		t.Fatalf("stats exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"sources: 3 (3 Debian packages); 1 with no file kept", "kept: 2 packages, 2 files",
		"duplicates dropped: 1 files", "held out at -val-frac 1: 2 packages, 2 files", "relative to " + filepath.Join(dir, "pkgs")} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
	b, _ := os.ReadFile(heldout)
	if want := "golang-a-dev/usr/share/gocode/src/example.com/golang-a-dev/golang-a-dev.go\n" +
		"golang-b-dev/usr/share/gocode/src/example.com/golang-b-dev/golang-b-dev.go\n"; string(b) != want {
		t.Errorf("held-out list\n%s\nwant\n%s", b, want)
	}
	// the list is not replaced without -force
	code, _, errOut = attnlab(t, "corpus", "stats", "-corpus", dir, "-std=false", "-list-heldout", heldout)
	if code != 2 || !strings.Contains(errOut, "-force") {
		t.Errorf("stats over an existing list: exit %d, %s", code, errOut)
	}
}

func TestCorpusBadInput(t *testing.T) {
	fakeAptScripts(t)
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := filepath.Join(tmp, "empty.txt")
	os.WriteFile(empty, []byte("# none\n"), 0o644)
	bad := filepath.Join(tmp, "bad.txt")
	os.WriteFile(bad, []byte("golang-a-dev\nGolang_B\n"), 0o644)
	noGo := filepath.Join(tmp, "nogo")
	os.MkdirAll(filepath.Join(noGo, "pkgs", "golang-doc-dev", "usr", "share", "doc"), 0o755)
	good := writeList(t, "golang-a-dev")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"corpus"}, 2, "missing subcommand"},
		{[]string{"corpus", "get"}, 2, `unknown subcommand "get"`},
		{[]string{"corpus", "fetch"}, 2, "-out is required"},
		{[]string{"corpus", "fetch", "-out", tmp}, 1, "not a corpus folder"}, // the built-in list, refused as -list good is
		{[]string{"corpus", "fetch", "-list", good, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"corpus", "fetch", "-list", filepath.Join(tmp, "missing.txt"), "-out", tmp}, 1, "missing.txt: no such file"},
		{[]string{"corpus", "fetch", "-list", empty, "-out", tmp}, 1, "empty.txt lists no package"},
		{[]string{"corpus", "fetch", "-list", bad, "-out", tmp}, 1, `bad.txt:2: "Golang_B" is not a Debian package name`},
		{[]string{"corpus", "fetch", "-list", good, "-out", file}, 1, file + " is a file, not a folder"},
		{[]string{"corpus", "fetch", "-list", good, "-out", tmp}, 1, "not a corpus folder"},
		{[]string{"corpus", "fetch", "-list", writeList(t, "golang-nosuch-dev"), "-out", filepath.Join(tmp, "c")}, 1,
			"none of the 1 packages could be fetched; the first: golang-nosuch-dev: apt-get download: E: Unable to locate"},
		{[]string{"corpus", "stats", "-corpus", filepath.Join(tmp, "missing")}, 1, "missing: no such file"},
		{[]string{"corpus", "stats", "-corpus", tmp}, 1, "holds no unpacked package"},
		{[]string{"corpus", "stats", "-corpus", noGo, "-std=false"}, 1, "no usable Go file in " + filepath.Join(noGo, "pkgs", "golang-doc-dev")},
		{[]string{"corpus", "stats", "-val-frac", "1.5"}, 2, "-val-frac 1.5"},
		{[]string{"corpus", "stats", "-max-file-kb", "-1"}, 2, "-max-file-kb -1"},
		{[]string{"corpus", "stats", "-std=false"}, 2, "nothing to read"},
	} {
		code, _, errOut := attnlab(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
		if tc.code == 1 && strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: the error takes %d lines, want one:\n%s", tc.args, strings.Count(errOut, "\n"), errOut)
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 5 {
		t.Errorf("bad input wrote into %s: %d entries, want the 5 of the test", tmp, len(entries))
	}
}

// TestCorpusFetchInterrupted: an interrupt (SIGINT or SIGTERM: the
// context main cancels) during a download stops the fetch at once with
// exit status 130 or 143, keeps the finished packages and leaves no
// temporary; the next fetch completes.
func TestCorpusFetchInterrupted(t *testing.T) {
	pidFile := fakeAptScripts(t)
	dir := filepath.Join(t.TempDir(), "corpus")
	list := writeList(t, "golang-a-dev", "golang-hang-dev", "golang-b-dev")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		os.Remove(pidFile)
		type result struct {
			code        int
			out, errOut string
		}
		done := make(chan result, 1)
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() {
			code, out, errOut := attnlabCtx(t, ctx, "corpus", "fetch", "-list", list, "-out", dir)
			done <- result{code, out, errOut}
		}()
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if b, _ := os.ReadFile(pidFile); len(b) > 0 && b[len(b)-1] == '\n' {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("the fake apt-get did not start")
			}
		}
		start := time.Now()
		cancel(interrupted{sig})
		select {
		case r := <-done:
			if want := (interrupted{sig}).status(); r.code != want || !strings.Contains(r.errOut, "fetch interrupted after") || !strings.Contains(r.errOut, "(run again to resume): context canceled") {
				t.Errorf("%v: exit %d, stderr %q", sig, r.code, r.errOut)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("%v: fetch stopped %v after the signal", sig, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: fetch still running 10s after the signal", sig)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".tmp") {
				t.Errorf("%v: temporary %s left", sig, e.Name())
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "pkgs", "golang-hang-dev")); err == nil {
			t.Errorf("%v: the interrupted package is in pkgs", sig)
		}
	}
	code, out, _ := attnlab(t, "corpus", "fetch", "-list", writeList(t, "golang-a-dev", "golang-b-dev"), "-out", dir)
	if code != 0 || !strings.Contains(out, "fetched 1 packages") || !strings.Contains(out, "1 already there") {
		t.Errorf("fetch after the interruptions: exit %d\n%s", code, out)
	}
}
