package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets a test run this binary as a child that writes, swaps,
// recovers or locks and is killed at a chosen step (ATOMICFILE_CHILD).
func TestMain(m *testing.M) {
	if spec := os.Getenv("ATOMICFILE_CHILD"); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

// child runs "OP STEP PATH [CONTENT]": OP is replace, write, recover or
// lock; the process ends with status 9 at step STEP, as a kill would end
// it (no deferred cleanup runs).
func child(spec string) int {
	f := strings.SplitN(spec, " ", 4)
	op, at, path := f[0], f[1], f[2]
	content := ""
	if len(f) > 3 {
		content = f[3]
	}
	TestHook = func(s string) {
		if s == at {
			os.Exit(9)
		}
	}
	var err error
	switch op {
	case "replace":
		err = ReplaceDir(path, fillWith(content))
	case "write":
		err = WriteFile(path, []byte(content), 0o644)
	case "recover":
		_, err = Recover(path)
	case "lock":
		var l *PathLock
		if l, err = Lock(path); err == nil {
			fmt.Println("locked")
			time.Sleep(time.Minute)
			l.Unlock()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fillWith writes two files that must agree: a and b both hold content.
func fillWith(content string) func(string) error {
	return func(tmp string) error {
		for _, name := range []string{"a", "b"} {
			if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// runChild runs the child spec and returns its exit status.
func runChild(t *testing.T, spec string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD="+spec)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("child %q: %v %s", spec, err, out)
	}
	return 0
}

// contentOf returns what the folder made by fillWith holds, failing when
// its two files disagree (a half-written folder).
func contentOf(t *testing.T, dir string) string {
	t.Helper()
	a, errA := os.ReadFile(filepath.Join(dir, "a"))
	b, errB := os.ReadFile(filepath.Join(dir, "b"))
	if errA != nil || errB != nil {
		t.Fatalf("%s: %v, %v", dir, errA, errB)
	}
	if string(a) != string(b) {
		t.Fatalf("%s is half written: a %q, b %q", dir, a, b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%s holds %d entries, want a and b only", dir, len(entries))
	}
	return string(a)
}

// names lists a folder.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range entries {
		ns = append(ns, e.Name())
	}
	return ns
}

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("new file: %v, %v: want mode 0640", fi.Mode(), err)
	}
	// a failing writer leaves the old content and no temporary file
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want the writer's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q, want %q", b, "old")
	}
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("file holds %q, want %q", b, "new")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("a replaced file has mode %v, want its own 0640", fi.Mode())
	}
	if ns := names(t, dir); len(ns) != 1 {
		t.Errorf("the folder holds %v, want only the file", ns)
	}
	if SavesInProgress() != 0 {
		t.Errorf("%d saves in progress after the writes", SavesInProgress())
	}
}

func TestWriteNamesWhatTheUserTyped(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	err := WriteFile(filepath.Join(missing, "f"), nil, 0o644)
	if err == nil || !strings.Contains(err.Error(), "the folder "+missing+" does not exist") || strings.Contains(err.Error(), ".attnlab-") {
		t.Errorf("writing into a missing folder: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writing into a missing folder: %v is not fs.ErrNotExist", err)
	}
	err = ReplaceDir(filepath.Join(missing, "d"), fillWith("x"))
	if err == nil || !strings.Contains(err.Error(), "the folder "+missing+" does not exist") || strings.Contains(err.Error(), ".attnlab-") {
		t.Errorf("a folder in a missing folder: %v", err)
	}
	// a plain error of the file system still names the path
	err = pathError("write", "p", os.ErrPermission)
	if err.Error() != "write p: permission denied" || !errors.Is(err, os.ErrPermission) {
		t.Errorf("pathError: %v", err)
	}
	err = pathError("write", "p", &os.LinkError{Op: "rename", Old: ".p.attnlab-x", New: "p", Err: os.ErrExist})
	if err.Error() != "write p: file already exists" {
		t.Errorf("pathError of a rename: %v", err)
	}
}

func TestReplaceDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	if err := ReplaceDir(dir, fillWith("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ReplaceDir(dir, func(tmp string) error {
		fillWith("half")(tmp)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want fill's", err)
	}
	err = ReplaceDir(dir, func(tmp string) error {
		return fmt.Errorf("writing %s: %w", filepath.Join(tmp, "a"), boom)
	})
	if want := "writing " + filepath.Join(dir, "a") + ": boom"; err == nil || err.Error() != want || !errors.Is(err, boom) {
		t.Errorf("error %v, want %q naming dir's file", err, want)
	}
	if got := contentOf(t, dir); got != "one" {
		t.Fatalf("after a failed fill the directory holds %q, want %q", got, "one")
	}
	if err := ReplaceDir(dir, fillWith("two")); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, dir); got != "two" {
		t.Fatalf("the directory holds %q, want %q", got, "two")
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode())
	}
	if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt"}) {
		t.Errorf("beside the directory: %v, want nothing left over", ns)
	}
	if SavesInProgress() != 0 {
		t.Errorf("%d saves in progress after the swaps", SavesInProgress())
	}
}

// hookAt sets TestHook to call f at step at, for the rest of the test.
func hookAt(t *testing.T, at string, f func()) {
	TestHook = func(s string) {
		if s == at {
			f()
		}
	}
	t.Cleanup(func() { TestHook = nil })
}

// beside returns the temporaries of kind beside dir.
func beside(t *testing.T, dir, kind string) []string {
	var ps []string
	for _, n := range names(t, filepath.Dir(dir)) {
		if tp, ok := parseTemp(n); ok && tp.kind == kind {
			ps = append(ps, filepath.Join(filepath.Dir(dir), n))
		}
	}
	return ps
}

func TestReplaceDirFailedRenamePutsTheOldBack(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	if err := ReplaceDir(dir, fillWith("one")); err != nil {
		t.Fatal(err)
	}
	// the new copy vanishes once the old one is aside: the rename in fails
	hookAt(t, "dir:aside", func() {
		for _, p := range beside(t, dir, kindNew) {
			os.RemoveAll(p)
		}
	})
	if err := ReplaceDir(dir, fillWith("two")); err == nil || !strings.Contains(err.Error(), "write "+dir+":") {
		t.Fatalf("a swap whose new copy vanished: %v", err)
	}
	if got := contentOf(t, dir); got != "one" {
		t.Errorf("after a failed swap: %q, want the old %q", got, "one")
	}
	if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt"}) {
		t.Errorf("beside the directory: %v, want nothing left over", ns)
	}
}

// TestReplaceDirHoldsItsCopies: during a swap both the new copy and the
// old one are locked, so that a Recover in another process leaves them.
func TestReplaceDirHoldsItsCopies(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	if err := ReplaceDir(dir, fillWith("one")); err != nil {
		t.Fatal(err)
	}
	checked := false
	hookAt(t, "dir:aside", func() {
		olds, news := beside(t, dir, kindOld), beside(t, dir, kindNew)
		if len(olds) != 1 || len(news) != 1 || !inUse(olds[0]) || !inUse(news[0]) {
			t.Errorf("during the swap: old %v, new %v, want both in use", olds, news)
		}
		checked = true
	})
	if err := ReplaceDir(dir, fillWith("two")); err != nil || !checked {
		t.Fatalf("swap: %v (checked %v)", err, checked)
	}
}

func TestReadMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mark")
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{markMagic + " 123 4:5\n", true},
		{"other-magic 123 4:5\n", false}, // parses, another magic
		{markMagic + " x 4:5\n", false},  // the magic, no time
		{markMagic + " 123\n", false},    // no identity
		{"", false},
	} {
		os.WriteFile(path, []byte(c.text), 0o644)
		when, replaces, err := readMark(path)
		if (err == nil) != c.ok || c.ok && (when != 123 || replaces != "4:5") {
			t.Errorf("%q: %d, %q, %v", c.text, when, replaces, err)
		}
	}
	if _, _, err := readMark(path + "x"); err == nil {
		t.Error("a missing mark: no error")
	}
}

func TestNamesAreProvablyOurs(t *testing.T) {
	for _, kind := range []string{kindFile, kindNew, kindDone, kindOld} {
		name := tempName("model.safetensors", kind, newID())
		tp, ok := parseTemp(name)
		if !ok || tp.base != "model.safetensors" || tp.kind != kind || !IsTemporary(name) {
			t.Errorf("%s: parsed %+v, %v", name, tp, ok)
		}
		// any change of a character makes it a user's name
		for i := range len(name) {
			for _, c := range []byte{'0', 'f', 'x', '.'} {
				if name[i] == c {
					continue
				}
				other := name[:i] + string(c) + name[i+1:]
				if tp, ok := parseTemp(other); ok && (tp.base != "model.safetensors" || tp.kind != kind) {
					t.Errorf("%s (changed at %d) parses as %+v", other, i, tp)
				} else if ok && other != name {
					t.Errorf("%s (changed at %d) still parses as ours", other, i)
				}
			}
		}
	}
	good := tempName("x", kindNew, "0123456789ab")
	for _, name := range []string{
		".notes.tmp1", ".backup.tmp-2024", ".backup.tmp-2024.old", ".ckpt.tmp-123", ".f.tmp456",
		"x.attnlab-0123456789ab-" + check("x", kindNew, "0123456789ab") + ".new",  // not hidden
		".x.attnlab-0123456789ab-" + check("x", kindNew, "0123456789ab") + ".tmp", // the check of another kind
		".x.attnlab-0123456789AB-" + check("x", kindNew, "0123456789AB") + ".new", // not lower-case hex
		".x.attnlab-0123456789a-" + check("x", kindNew, "0123456789a") + ".new",   // a short id
		".x.attnlab-0123456789ab-" + check("x", kindNew, "0123456789ab") + ".zip",
		".x.attnlab-0123456789ab" + check("x", kindNew, "0123456789ab") + "0.new",
		"..attnlab-0123456789ab-" + check("", kindNew, "0123456789ab") + ".new", // no base
		".attnlab-0123456789ab-" + check("", kindNew, "0123456789ab") + ".new",
		good + "x", good[1:], "." + good, "", ".", ".attnlab-", ".x.attnlab-.new",
	} {
		if IsTemporary(name) {
			t.Errorf("%q taken for ours", name)
		}
	}
	if !IsTemporary(good) || !IsTemporary(lockName("run")) {
		t.Errorf("%q or %q not taken for ours", good, lockName("run"))
	}
	for _, name := range []string{".run.attnlab-lock-00000000", "run.attnlab-lock-" + check("run", "lock", ""), ".attnlab-lock-" + check("", "lock", "")} {
		if IsTemporary(name) {
			t.Errorf("lock name %q taken for ours", name)
		}
	}
	if b, ok := parseLockName(lockName("a.b")); !ok || b != "a.b" {
		t.Errorf("parseLockName: %q, %v", b, ok)
	}
	if a, b := newID(), newID(); a == b || len(a) != 12 || !isHex(a) {
		t.Errorf("ids %q, %q", a, b)
	}
}

func TestRecoverLeavesWhatIsNotOurs(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "run")
	user := []string{".notes.tmp1", ".run.tmp-2024", ".run.tmp-1.old", "run.bak", ".run.attnlab-0123456789ab-00000000.new"}
	for _, n := range user {
		if err := os.MkdirAll(filepath.Join(parent, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(dir, 0o755)
	// one stale temporary of run's and one of another file's
	stale := filepath.Join(parent, tempName("run", kindNew, newID()))
	other := filepath.Join(parent, tempName("other", kindFile, newID()))
	os.MkdirAll(stale, 0o755)
	os.WriteFile(other, nil, 0o644)
	did, err := Recover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(did) != 1 || !strings.Contains(did[0], "removed "+stale) {
		t.Errorf("did %q, want the removal of %s", did, stale)
	}
	for _, n := range append(user, filepath.Base(other), "run") {
		if _, err := os.Stat(filepath.Join(parent, n)); err != nil {
			t.Errorf("%s: %v, want it kept", n, err)
		}
	}
	// RecoverIn tidies every file's temporaries, and only those
	other2 := filepath.Join(parent, tempName("zzz", kindFile, newID()))
	os.WriteFile(other2, nil, 0o644)
	did, err = RecoverIn(parent)
	if err != nil || len(did) != 2 || !strings.Contains(strings.Join(did, " "), other) || !strings.Contains(strings.Join(did, " "), other2) {
		t.Errorf("RecoverIn: %q, %v", did, err)
	}
	if ns := names(t, parent); len(ns) != len(user)+1 {
		t.Errorf("left %v, want the user's files and run", ns)
	}
	if did, err := Recover(filepath.Join(parent, "missing", "x")); did != nil || err != nil {
		t.Errorf("Recover in a missing folder: %v, %v", did, err)
	}
	if did, err := RecoverIn(filepath.Join(parent, "missing")); did != nil || err != nil {
		t.Errorf("RecoverIn of a missing folder: %v, %v", did, err)
	}
}

// TestKillAtEveryStep kills a swap of a checkpoint-like folder, and a file
// write, at each of their steps; Recover then finds the newest complete
// copy and leaves nothing else.
func TestKillAtEveryStep(t *testing.T) {
	for _, at := range Steps {
		if !strings.HasPrefix(at, "dir:") {
			continue
		}
		for _, existing := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/existing=%v", at, existing), func(t *testing.T) {
				parent := t.TempDir()
				dir := filepath.Join(parent, "ckpt")
				if existing {
					if err := ReplaceDir(dir, fillWith("one")); err != nil {
						t.Fatal(err)
					}
				}
				status := runChild(t, "replace "+at+" "+dir+" two")
				if !existing && at == "dir:aside" {
					// no old copy: the step never happens
					if status != 0 {
						t.Fatalf("child status %d, want 0", status)
					}
				} else if status != 9 {
					t.Fatalf("child status %d, want 9 (killed at %s)", status, at)
				}
				did, err := Recover(dir)
				if err != nil {
					t.Fatal(err)
				}
				// completed and marked: the new copy is the newest complete one
				want := "two"
				if at == "dir:filled" {
					want = "one"
				}
				if want == "one" && !existing {
					if _, err := os.Stat(dir); !os.IsNotExist(err) {
						t.Errorf("a folder appeared from an unfinished swap: %v", err)
					}
				} else if got := contentOf(t, dir); got != want {
					t.Errorf("after a kill at %s: %q, want %q (recovery did %q)", at, got, want, did)
				}
				if ns := names(t, parent); len(ns) > 1 || len(ns) == 1 && ns[0] != "ckpt" {
					t.Errorf("left beside: %v", ns)
				}
				// a second recovery has nothing to do
				if did, err := Recover(dir); len(did) != 0 || err != nil {
					t.Errorf("second recovery: %q, %v", did, err)
				}
			})
		}
	}
	for _, at := range []string{"write:synced", "write:renamed"} {
		t.Run(at, func(t *testing.T) {
			parent := t.TempDir()
			path := filepath.Join(parent, "curves.csv")
			os.WriteFile(path, []byte("old"), 0o644)
			if status := runChild(t, "write "+at+" "+path+" new"); status != 9 {
				t.Fatalf("child status %d", status)
			}
			if _, err := Recover(path); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"write:synced": "old", "write:renamed": "new"}[at]
			if b, _ := os.ReadFile(path); string(b) != want {
				t.Errorf("after a kill at %s: %q, want %q", at, b, want)
			}
			if ns := names(t, parent); !slices.Equal(ns, []string{"curves.csv"}) {
				t.Errorf("left: %v", ns)
			}
		})
	}
}

// TestKillDuringRecovery kills the recovery itself at each of its steps:
// the next recovery still finds the newest copy.
func TestKillDuringRecovery(t *testing.T) {
	for _, at := range []string{"recover:aside", "recover:in", "recover:unmarked"} {
		for _, first := range []string{"dir:marked", "dir:aside"} {
			t.Run(first+"/"+at, func(t *testing.T) {
				parent := t.TempDir()
				dir := filepath.Join(parent, "ckpt")
				if err := ReplaceDir(dir, fillWith("one")); err != nil {
					t.Fatal(err)
				}
				if s := runChild(t, "replace "+first+" "+dir+" two"); s != 9 {
					t.Fatalf("status %d", s)
				}
				s := runChild(t, "recover "+at+" "+dir)
				// with the old copy already aside, recovery does not move one
				if want := map[bool]int{true: 0, false: 9}[first == "dir:aside" && at == "recover:aside"]; s != want {
					t.Fatalf("recovery status %d, want %d", s, want)
				}
				if _, err := Recover(dir); err != nil {
					t.Fatal(err)
				}
				if got := contentOf(t, dir); got != "two" {
					t.Errorf("%q, want the newest copy %q", got, "two")
				}
				if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt"}) {
					t.Errorf("left: %v", ns)
				}
			})
		}
	}
}

// TestRecoverKeepsANewerFolder: a copy completed and marked but never
// swapped in does not replace a folder that changed since.
func TestRecoverKeepsANewerFolder(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	if err := ReplaceDir(dir, fillWith("one")); err != nil {
		t.Fatal(err)
	}
	if s := runChild(t, "replace dir:marked "+dir+" two"); s != 9 {
		t.Fatalf("status %d", s)
	}
	// the user puts another folder there meanwhile
	os.Rename(dir, filepath.Join(parent, "elsewhere"))
	if err := ReplaceDir(filepath.Join(parent, "ckpt.user"), fillWith("mine")); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(parent, "ckpt.user"), dir)
	did, err := Recover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, dir); got != "mine" {
		t.Errorf("%q, want the user's newer folder kept (did %q)", got, did)
	}
	if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt", "elsewhere"}) {
		t.Errorf("left: %v", ns)
	}
}

func TestRecoverPicksTheNewestOfSeveral(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	// two kills after marking, the target missing: the later copy wins
	for _, c := range []string{"two", "three"} {
		if s := runChild(t, "replace dir:marked "+dir+" "+c); s != 9 {
			t.Fatalf("status %d", s)
		}
	}
	// and an old copy aside, older than both
	old := filepath.Join(parent, tempName("ckpt", kindOld, newID()))
	os.Mkdir(old, 0o755)
	fillWith("one")(old)
	if _, err := Recover(dir); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, dir); got != "three" {
		t.Errorf("%q, want the newest %q", got, "three")
	}
	if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt"}) {
		t.Errorf("left: %v", ns)
	}
	// with no complete copy and the target missing, the newest old one
	os.Rename(dir, filepath.Join(parent, tempName("ckpt", kindOld, newID())))
	time.Sleep(10 * time.Millisecond)
	newer := filepath.Join(parent, tempName("ckpt", kindOld, newID()))
	os.Mkdir(newer, 0o755)
	fillWith("four")(newer)
	unmarked := filepath.Join(parent, tempName("ckpt", kindNew, newID()))
	os.Mkdir(unmarked, 0o755)
	fillWith("half")(unmarked)
	badMark := filepath.Join(parent, tempName("ckpt", kindNew, "0123456789ab"))
	os.Mkdir(badMark, 0o755)
	fillWith("bad")(badMark)
	os.WriteFile(filepath.Join(parent, tempName("ckpt", kindDone, "0123456789ab")), []byte("garbage"), 0o644)
	if _, err := Recover(dir); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, dir); got != "four" {
		t.Errorf("%q, want the newest old copy %q", got, "four")
	}
	if ns := names(t, parent); !slices.Equal(ns, []string{"ckpt"}) {
		t.Errorf("left: %v", ns)
	}
}

// complete makes a complete new copy of dir with the given id, content
// and completion time, as a swap killed after its mark leaves it.
func complete(t *testing.T, dir, id, content string, when int64) {
	parent, base := split(dir)
	p := filepath.Join(parent, tempName(base, kindNew, id))
	os.Mkdir(p, 0o755)
	fillWith(content)(p)
	os.WriteFile(filepath.Join(parent, tempName(base, kindDone, id)), []byte(fmt.Sprintf("%s %d none\n", markMagic, when)), 0o644)
}

// aside makes an old copy of dir with the given id, content and time.
func aside(t *testing.T, dir, id, content string, when time.Time) {
	parent, base := split(dir)
	p := filepath.Join(parent, tempName(base, kindOld, id))
	os.Mkdir(p, 0o755)
	fillWith(content)(p)
	os.Chtimes(p, when, when)
}

// TestRecoverOrdersCopies: the newest copy wins whatever the order of the
// names (the folder lists them by id), and a tie goes to the larger id.
func TestRecoverOrdersCopies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	complete(t, dir, "000000000001", "newest", 300)
	complete(t, dir, "000000000002", "older", 200)
	complete(t, dir, "000000000003", "oldest", 100)
	if _, err := Recover(dir); err != nil {
		t.Fatal(err)
	}
	if got := contentOf(t, dir); got != "newest" {
		t.Errorf("%q, want the newest", got)
	}
	dir = filepath.Join(t.TempDir(), "ckpt")
	complete(t, dir, "000000000002", "larger id", 100)
	complete(t, dir, "000000000001", "smaller id", 100)
	complete(t, dir, "000000000003", "older", 50)
	Recover(dir)
	if got := contentOf(t, dir); got != "larger id" {
		t.Errorf("%q, want the tie to the larger id", got)
	}
	// old copies, by their time
	base := time.Now().Add(-time.Hour)
	dir = filepath.Join(t.TempDir(), "ckpt")
	aside(t, dir, "000000000001", "newest", base.Add(3*time.Minute))
	aside(t, dir, "000000000002", "older", base.Add(2*time.Minute))
	aside(t, dir, "000000000003", "oldest", base)
	Recover(dir)
	if got := contentOf(t, dir); got != "newest" {
		t.Errorf("old copies: %q, want the newest", got)
	}
	dir = filepath.Join(t.TempDir(), "ckpt")
	aside(t, dir, "000000000002", "larger id", base)
	aside(t, dir, "000000000001", "smaller id", base)
	aside(t, dir, "000000000003", "older", base.Add(-time.Minute))
	Recover(dir)
	if got := contentOf(t, dir); got != "larger id" {
		t.Errorf("old copies: %q, want the tie to the larger id", got)
	}
}

func TestRecoverLeavesAWriteInProgress(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "f")
	f, err := createTemp(parent, "f")
	if err != nil {
		t.Fatal(err)
	}
	if !inUse(f.Name()) {
		t.Error("a locked temporary is not in use")
	}
	if did, err := Recover(path); len(did) != 0 || err != nil {
		t.Errorf("Recover during a write: %q, %v", did, err)
	}
	if _, err := os.Stat(f.Name()); err != nil {
		t.Errorf("a write in progress lost its temporary: %v", err)
	}
	f.Close()
	if inUse(f.Name()) {
		t.Error("a closed temporary is in use")
	}
	if did, err := Recover(path); len(did) != 1 || err != nil {
		t.Errorf("Recover after the write died: %q, %v", did, err)
	}
	if inUse(filepath.Join(parent, "missing")) {
		t.Error("a missing file is in use")
	}
	// a folder being built
	d := filepath.Join(parent, tempName("g", kindNew, newID()))
	os.Mkdir(d, 0o700)
	l, err := lockDir(d)
	if err != nil {
		t.Fatal(err)
	}
	if did, _ := RecoverIn(parent); len(did) != 0 {
		t.Errorf("RecoverIn during a swap: %q", did)
	}
	l.Close()
	if did, _ := RecoverIn(parent); len(did) != 1 {
		t.Errorf("RecoverIn after the swap died: %q", did)
	}
}

func TestLock(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "run")
	l1, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	// one writer in one process too, by any spelling
	_, err = Lock(filepath.Join(parent, ".", "run"))
	if want := path + " is being written by another task of this process: wait for it to end, or stop it"; err == nil || err.Error() != want {
		t.Fatalf("second hold: %v, want %q", err, want)
	}
	lockFile := filepath.Join(parent, lockName("run"))
	if b, err := os.ReadFile(lockFile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file: %q, %v, want our pid", b, err)
	}
	l1.Unlock()
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("the lock file stays after the release: %v", err)
	}
	l1.Unlock() // twice: a no-op
	(*PathLock)(nil).Unlock()
	l2, err := Lock(path)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	l1.Unlock() // the old hold does not release the new one
	if _, err := Lock(path); !errors.Is(err, ErrLocked) {
		t.Errorf("an old hold's Unlock released the new one: %v", err)
	}
	l2.Unlock()

	// another process holds it: refused, naming its pid; its death frees it
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD=lock - "+path)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	_, err = Lock(path)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid || !errors.Is(err, ErrLocked) {
		t.Fatalf("lock held by pid %d: %v", cmd.Process.Pid, err)
	}
	want := fmt.Sprintf("%s is being written by another attnlab process (pid %d): wait for it to end, or stop it", path, cmd.Process.Pid)
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Lock(path)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Unlock()

	// the holder before us releases (removes the file) between our open
	// and our flock: we must not keep a lock on a file no one can find
	once := false
	hookAt(t, "lock:opened", func() {
		if !once {
			once = true
			os.Remove(filepath.Join(parent, lockName("run")))
		}
	})
	l, err = Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(parent, lockName("run"))); err != nil || !once {
		t.Errorf("the lock taken after a release in between has no file: %v", err)
	}
	l.Unlock()
	TestHook = nil

	if _, err := Lock(filepath.Join(parent, "missing", "x")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("lock in a missing folder: %v", err)
	}
	if (&LockedError{Path: "p"}).Error() != "p is being written by another attnlab process: wait for it to end, or stop it" {
		t.Errorf("without a pid: %v", &LockedError{Path: "p"})
	}
}

func TestWaitSaves(t *testing.T) {
	done := Saving()
	waited := make(chan bool)
	go func() { WaitSaves(); waited <- true }()
	select {
	case <-waited:
		t.Fatal("WaitSaves returned during a save")
	case <-time.After(50 * time.Millisecond):
	}
	if SavesInProgress() != 1 {
		t.Errorf("%d saves in progress, want 1", SavesInProgress())
	}
	done()
	done() // a second call is a no-op
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitSaves did not return after the save")
	}
	if SavesInProgress() != 0 {
		t.Errorf("%d saves in progress, want 0", SavesInProgress())
	}
}

// TestNothingLeftOpen: writes, swaps, locks and recoveries close every
// file they open (a leaked one would hold its lock until collected).
func TestNothingLeftOpen(t *testing.T) {
	open := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd here")
		}
		return len(entries)
	}
	// no collection meanwhile: a leaked *os.File would be closed by its
	// finalizer and hide
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	parent := t.TempDir()
	dir, file := filepath.Join(parent, "ckpt"), filepath.Join(parent, "f")
	before := open()
	for range 3 {
		if err := ReplaceDir(dir, fillWith("x")); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Lock(dir)
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock()
		complete(t, dir, newID(), "y", time.Now().UnixNano())
		if _, err := Recover(dir); err != nil {
			t.Fatal(err)
		}
	}
	if after := open(); after != before {
		t.Errorf("%d files open before, %d after", before, after)
	}
}
