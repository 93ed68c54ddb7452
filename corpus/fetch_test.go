package corpus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeApt stands for apt-get and dpkg: its .deb files are JSON maps from
// path to content, and it knows the packages of debs only.
type fakeApt struct {
	debs    map[string]map[string]string // package → files of the unpacked tree
	version map[string]string            // as in the .deb's name; "1.0-1" when absent
	// unpacked, when set, is called after dpkg wrote the first file of a
	// package; an error it returns stops dpkg there.
	unpacked func(pkg string) error

	mu    sync.Mutex
	calls []string
}

func (f *fakeApt) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	f.mu.Unlock()
	switch {
	case name == "apt-get" && len(args) == 2 && args[0] == "download":
		pkg := args[1]
		files, ok := f.debs[pkg]
		if !ok {
			return []byte("Reading package lists...\nE: Unable to locate package " + pkg + "\n"), errors.New("exit status 100")
		}
		v := f.version[pkg]
		if v == "" {
			v = "1.0-1"
		}
		b, _ := json.Marshal(files)
		return nil, os.WriteFile(filepath.Join(dir, pkg+"_"+v+"_all.deb"), b, 0o644)
	case name == "dpkg" && len(args) == 3 && args[0] == "-x":
		b, err := os.ReadFile(args[1])
		if err != nil {
			return []byte("dpkg-deb: error: failed to read archive\n"), errors.New("exit status 2")
		}
		var files map[string]string
		json.Unmarshal(b, &files)
		pkg, _, _ := strings.Cut(filepath.Base(args[1]), "_")
		paths := make([]string, 0, len(files))
		for p := range files {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for i, p := range paths {
			path := filepath.Join(args[2], p)
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(files[p]), 0o644); err != nil {
				return nil, err
			}
			if i == 0 && f.unpacked != nil {
				if err := f.unpacked(pkg); err != nil {
					return nil, err
				}
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fake apt: unexpected command %s %q", name, args)
}

func (f *fakeApt) ncalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func goFile(pkg string) string { return "package " + pkg + "\n\nfunc F() {}\n" }

func newFakeApt() *fakeApt {
	return &fakeApt{
		debs: map[string]map[string]string{
			"golang-a-dev": {
				"usr/share/gocode/src/example.com/a/a.go":      goFile("a"),
				"usr/share/gocode/src/example.com/a/a_test.go": goFile("a"),
				"usr/share/doc/golang-a-dev/copyright":         "MIT",
			},
			"golang-b-dev": {
				"usr/share/gocode/src/example.com/b/b.go":       goFile("b"),
				"usr/share/gocode/src/example.com/b/inner/i.go": goFile("inner"),
			},
			"golang-c-dev":     {"usr/share/gocode/src/example.com/c/c.go": goFile("c")},
			"golang-empty-dev": {"usr/share/doc/golang-empty-dev/copyright": "transitional"},
		},
		version: map[string]string{"golang-c-dev": "1%3a2.0-1"},
	}
}

// leftovers lists the entries of dir that are neither pkgs, the manifest
// nor the lock.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); n != "pkgs" && n != "manifest.json" {
			names = append(names, n)
		}
	}
	return names
}

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFetchUnpacksAndRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "corpus")
	apt := newFakeApt()
	list := []string{"golang-a-dev", "golang-b-dev", "golang-c-dev", "golang-empty-dev"}
	var seen []Progress
	res, err := Fetch(context.Background(), list, dir, FetchOptions{Run: apt.run, Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Fetched, list) || res.Present != 0 || len(res.Failed) != 0 || res.Stale != 0 {
		t.Errorf("result %+v, want all four fetched", res)
	}
	for _, name := range list {
		if fi, err := os.Stat(filepath.Join(dir, "pkgs", name, "usr/share")); err != nil || !fi.IsDir() {
			t.Errorf("%s not unpacked: %v", name, err)
		}
	}
	m := readManifest(t, dir)
	want := map[string]Package{
		"golang-a-dev":     {Version: "1.0-1", Deb: "golang-a-dev_1.0-1_all.deb", GoFiles: 2, GoBytes: int64(2 * len(goFile("a")))},
		"golang-b-dev":     {Version: "1.0-1", Deb: "golang-b-dev_1.0-1_all.deb", GoFiles: 2, GoBytes: int64(len(goFile("b")) + len(goFile("inner")))},
		"golang-c-dev":     {Version: "1:2.0-1", Deb: "golang-c-dev_1%3a2.0-1_all.deb", GoFiles: 1, GoBytes: int64(len(goFile("c")))},
		"golang-empty-dev": {Version: "1.0-1", Deb: "golang-empty-dev_1.0-1_all.deb"},
	}
	if fmt.Sprint(m.Packages) != fmt.Sprint(want) {
		t.Errorf("manifest\n%v\nwant\n%v", m.Packages, want)
	}
	if want := int64(2*len(goFile("a")) + len(goFile("b")) + len(goFile("inner")) + len(goFile("c"))); res.Bytes != want {
		t.Errorf("result counts %d bytes of Go source, want %d", res.Bytes, want)
	}
	if len(seen) != 5 || seen[0] != (Progress{Package: "golang-a-dev", Total: 4}) || seen[4] != (Progress{Done: 4, Total: 4}) {
		t.Errorf("progress calls %+v", seen)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("left in the folder: %q", l)
	}
}

func TestFetchTwiceDoesNothing(t *testing.T) {
	dir := t.TempDir()
	apt := newFakeApt()
	list := []string{"golang-a-dev", "golang-b-dev"}
	if _, err := Fetch(context.Background(), list, dir, FetchOptions{Run: apt.run}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	n := apt.ncalls()
	res, err := Fetch(context.Background(), list, dir, FetchOptions{Run: apt.run})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fetched) != 0 || res.Present != 2 || apt.ncalls() != n {
		t.Errorf("second fetch: %+v and %d more commands, want nothing done", res, apt.ncalls()-n)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "manifest.json")); string(after) != string(before) {
		t.Errorf("the second fetch changed the manifest:\n%s\nto\n%s", before, after)
	}
	// a longer list fetches only what is new
	res, err = Fetch(context.Background(), append(list, "golang-c-dev"), dir, FetchOptions{Run: apt.run})
	if err != nil || !slices.Equal(res.Fetched, []string{"golang-c-dev"}) || res.Present != 2 {
		t.Errorf("fetch of one more: %+v, %v", res, err)
	}
}

func TestFetchInterruptedResumes(t *testing.T) {
	dir := t.TempDir()
	apt := newFakeApt()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	apt.unpacked = func(pkg string) error {
		if pkg == "golang-b-dev" { // interrupted half-way through unpacking b
			cancel()
			return ctx.Err()
		}
		return nil
	}
	list := []string{"golang-a-dev", "golang-b-dev", "golang-c-dev"}
	res, err := Fetch(ctx, list, dir, FetchOptions{Run: apt.run})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("error %v, want an interruption", err)
	}
	if !slices.Equal(res.Fetched, []string{"golang-a-dev"}) {
		t.Errorf("fetched %q before the interruption, want a only", res.Fetched)
	}
	for _, name := range []string{"golang-b-dev", "golang-c-dev"} {
		if _, err := os.Stat(filepath.Join(dir, "pkgs", name)); err == nil {
			t.Errorf("%s is in pkgs after the interruption", name)
		}
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("left in the folder after the interruption: %q", l)
	}
	if m := readManifest(t, dir); len(m.Packages) != 1 {
		t.Errorf("manifest holds %v, want a only", m.Packages)
	}

	apt.unpacked = nil
	res, err = Fetch(context.Background(), list, dir, FetchOptions{Run: apt.run})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Fetched, list[1:]) || res.Present != 1 {
		t.Errorf("resumed fetch: %+v, want b and c fetched, a present", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "pkgs/golang-b-dev/usr/share/gocode/src/example.com/b/inner/i.go")); err != nil {
		t.Errorf("b is not whole after the resumed fetch: %v", err)
	}
}

func TestFetchCleansAfterAKill(t *testing.T) {
	dir := t.TempDir()
	apt := newFakeApt()
	if _, err := Fetch(context.Background(), []string{"golang-a-dev", "golang-b-dev"}, dir, FetchOptions{Run: apt.run}); err != nil {
		t.Fatal(err)
	}
	// What a kill -9 leaves: a half-unpacked temporary, a half-written
	// manifest temporary, and a package renamed into place whose manifest
	// entry was never written. A user's look-alike of a temporary stays.
	killedAt(t, "dir:filled", func() { Fetch(context.Background(), []string{"golang-c-dev"}, dir, FetchOptions{Run: apt.run}) })
	killedAt(t, "write:synced", func() { m := readManifest(t, dir); writeManifest(dir, &m) })
	mine := filepath.Join(dir, ".tmp-golang-c-dev-123")
	os.Mkdir(mine, 0o755)
	m := readManifest(t, dir)
	delete(m.Packages, "golang-b-dev")
	b, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)

	n := apt.ncalls()
	res, err := Fetch(context.Background(), []string{"golang-a-dev", "golang-b-dev", "golang-c-dev"}, dir, FetchOptions{Run: apt.run})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stale != 2 || res.Present != 2 || !slices.Equal(res.Fetched, []string{"golang-c-dev"}) || apt.ncalls() != n+2 {
		t.Errorf("result %+v after %d commands, want 2 stale temporaries removed, a and b present, c fetched", res, apt.ncalls()-n)
	}
	if l := leftovers(t, dir); !slices.Equal(l, []string{filepath.Base(mine)}) {
		t.Errorf("left in the folder: %q, want only the user's %s", l, mine)
	}
	if p := readManifest(t, dir).Packages["golang-b-dev"]; p.Version != "1.0-1" || p.GoFiles != 2 {
		t.Errorf("b's manifest entry rebuilt as %+v", p)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pkgs/golang-c-dev", GoSrc, "example.com/c/c.go")); string(b) != goFile("c") {
		t.Errorf("c.go holds %q", b)
	}
	// a damaged manifest is rebuilt from the folders
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{not json"), 0o644)
	if res, err := Fetch(context.Background(), []string{"golang-a-dev"}, dir, FetchOptions{Run: apt.run}); err != nil || res.Present != 1 {
		t.Fatalf("fetch over a damaged manifest: %+v, %v", res, err)
	}
	if m := readManifest(t, dir); len(m.Packages) != 3 {
		t.Errorf("rebuilt manifest holds %d packages, want 3", len(m.Packages))
	}
}

func TestFetchReportsUnknownPackages(t *testing.T) {
	dir := t.TempDir()
	apt := newFakeApt()
	res, err := Fetch(context.Background(), []string{"golang-a-dev", "golang-nosuch-dev", "golang-b-dev"}, dir, FetchOptions{Run: apt.run})
	if err != nil {
		t.Fatalf("one unknown package among three: %v", err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Package != "golang-nosuch-dev" ||
		res.Failed[0].Err.Error() != "apt-get download: E: Unable to locate package golang-nosuch-dev" {
		t.Errorf("failures %+v", res.Failed)
	}
	if len(res.Fetched) != 2 {
		t.Errorf("fetched %q, want a and b", res.Fetched)
	}
	// every package failing is an error naming the first
	_, err = Fetch(context.Background(), []string{"golang-x-dev", "golang-y-dev"}, t.TempDir(), FetchOptions{Run: apt.run})
	if err == nil || !strings.Contains(err.Error(), "none of the 2 packages") || !strings.Contains(err.Error(), "golang-x-dev") {
		t.Errorf("all unknown: error %v", err)
	}
}

func TestFetchRefusesBadInput(t *testing.T) {
	apt := newFakeApt()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	other := filepath.Join(tmp, "home")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	for _, tc := range []struct {
		list []string
		dir  string
		want string
	}{
		{[]string{"golang-a-dev"}, file, "is a file, not a folder"},
		{[]string{"golang-a-dev"}, other, "is a non-empty folder that is not a corpus folder"},
		{[]string{"../../etc"}, filepath.Join(tmp, "c"), `"../../etc" is not a Debian package name`},
		{nil, filepath.Join(tmp, "c"), "no package to fetch"},
	} {
		_, err := Fetch(context.Background(), tc.list, tc.dir, FetchOptions{Run: apt.run})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Fetch(%q, %s): error %v, want %q", tc.list, tc.dir, err, tc.want)
		}
	}
	if apt.ncalls() != 0 {
		t.Errorf("%d commands run for bad input", apt.ncalls())
	}
	if entries, _ := os.ReadDir(other); len(entries) != 1 {
		t.Errorf("the foreign folder was written to: %d entries", len(entries))
	}
}

// TestExecStopsOnCancel runs the default runner on a fake apt-get that
// hangs, with a grandchild holding its output open: cancelling must kill
// both and return at once. A second fetch on the folder meanwhile is
// refused.
func TestExecStopsOnCancel(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a POSIX shell")
	}
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"$$\" > \"$FAKE_APT_PID\"\nsleep 60 &\nsleep 60\n"
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(bin, "pid")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_APT_PID", pidFile)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Fetch(ctx, []string{"golang-a-dev"}, dir, FetchOptions{})
		done <- err
	}()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 && b[len(b)-1] == '\n' {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the fake apt-get did not start")
		}
	}
	if _, err := Fetch(context.Background(), []string{"golang-a-dev"}, dir, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "is being written by") {
		t.Errorf("concurrent fetch: error %v, want a refusal", err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("fetch returned %v after the cancellation", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fetch still running 5s after the cancellation")
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("left in the folder: %q", l)
	}
}

// killedAt runs f until a write reaches step at, and stops it there as a
// kill would: no cleanup of the write runs, its locks are released.
func killedAt(t *testing.T, at string, f func()) {
	t.Helper()
	type killed struct{}
	defer func() {
		atomicfile.TestHook = nil
		if r := recover(); r != (killed{}) {
			t.Fatalf("not stopped at %s: %v", at, r)
		}
	}()
	atomicfile.TestHook = func(step string) {
		if step == at {
			panic(killed{})
		}
	}
	f()
}
