package output

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// TestMain lets a test run this binary as a child (OUTPUT_CHILD): "claim
// DIR" claims DIR and waits, "kill STEP DIR" swaps DIR and is killed at
// step STEP.
func TestMain(m *testing.M) {
	if spec := os.Getenv("OUTPUT_CHILD"); spec != "" {
		f := strings.SplitN(spec, " ", 3)
		switch f[0] {
		case "claim":
			c, err := Dir(f[1], true)
			if err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			fmt.Println("claimed")
			time.Sleep(time.Minute)
			c.Release()
		case "kill":
			atomicfile.TestHook = func(s string) {
				if s == f[1] {
					os.Exit(9)
				}
			}
			atomicfile.ReplaceDir(f[2], func(tmp string) error {
				return os.WriteFile(filepath.Join(tmp, "weights"), []byte("new"), 0o644)
			})
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(spec string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OUTPUT_CHILD="+spec)
	return cmd
}

func mustNot(t *testing.T, c *Claim, err error, target error, what string) {
	t.Helper()
	if err == nil {
		c.Release()
	}
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

func must(t *testing.T, c *Claim, err error, what string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	c.Release()
}

func TestFileRefusesAnExistingResult(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	c, err := File(path, false)
	must(t, c, err, "a new file")
	os.WriteFile(path, []byte("result"), 0o644)
	c, err = File(path, false)
	mustNot(t, c, err, ErrExists, "existing file without -force")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-force replaces it") {
		t.Errorf("existing file without -force: %v", err)
	}
	c, err = File(path, true)
	must(t, c, err, "existing file with -force")
	if c, err := File(dir, true); err == nil || !strings.Contains(err.Error(), "is a folder, not a file") {
		t.Errorf("a folder as a file: %v", err)
		c.Release()
	}
	missing := filepath.Join(dir, "missing")
	if c, err := File(filepath.Join(missing, "f"), true); err == nil || !strings.Contains(err.Error(), "the folder "+missing+" does not exist") {
		t.Errorf("a file in a missing folder: %v", err)
		c.Release()
	}
	for _, p := range []string{"", "  "} {
		_, err := Target{Path: p, Flag: "-out"}.ClaimFile()
		if err == nil || err.Error() != "-out is empty: name a path to write" || !errors.Is(err, ErrNoPath) {
			t.Errorf("empty -out: %v", err)
		}
		_, err = Target{Path: p}.ClaimDir()
		if err == nil || err.Error() != "the output is empty: name a path to write" {
			t.Errorf("empty folder: %v", err)
		}
	}
	if ns, _ := os.ReadDir(dir); len(ns) != 1 {
		t.Errorf("%d entries left, want the result only (no lock file)", len(ns))
	}
}

func TestNeverOverAnInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte("{}"), 0o644)
	// the same file, by another spelling, even with -force
	for _, out := range []string{in, filepath.Join(dir, ".", "in.jsonl")} {
		c, err := File(out, true, in)
		mustNot(t, c, err, ErrInput, "-out over -in "+out)
		c, err = Dir(out, true, in)
		if err == nil {
			c.Release()
			t.Errorf("folder %s over the input %s: no error", out, in)
		}
	}
	// a hard link is the same file
	link := filepath.Join(dir, "link.jsonl")
	if os.Link(in, link) == nil {
		c, err := File(link, true, in)
		mustNot(t, c, err, ErrInput, "hard link")
	}
	// a folder holding an input would be replaced with it
	c, err := Dir(dir, true, in)
	mustNot(t, c, err, ErrInput, "folder holding the input")
	// beside an input is fine
	c, err = File(filepath.Join(dir, "other"), true, in)
	must(t, c, err, "a file beside the input")
	c, err = File(filepath.Join(dir, "other"), true, "", in+"x")
	must(t, c, err, "an empty or missing input")
	c, err = File(in, true, "", in)
	mustNot(t, c, err, ErrInput, "the input after an empty one")

	// through symbolic links: a link to the input, a link to its folder as
	// the output folder, the input named through a linked folder
	sym := filepath.Join(t.TempDir(), "sym.jsonl")
	os.Symlink(in, sym)
	c, err = File(sym, true, in)
	mustNot(t, c, err, ErrInput, "a link to the input as -out")
	c, err = File(in, true, sym)
	mustNot(t, c, err, ErrInput, "-out the input named by a link")
	other := t.TempDir()
	linkDir := filepath.Join(other, "index")
	os.Symlink(dir, linkDir)
	c, err = Dir(linkDir, true, in)
	mustNot(t, c, err, ErrInput, "a link to the input's folder as the output folder")
	c, err = Dir(dir, true, filepath.Join(linkDir, "in.jsonl"))
	mustNot(t, c, err, ErrInput, "the output folder holding the input named through a link")
	c, err = Dir(filepath.Join(linkDir, "new", "index"), true, in)
	must(t, c, err, "a new folder through a linked folder")

	// an existing file inside an input folder is part of the input
	ckpt := filepath.Join(dir, "ckpt")
	os.Mkdir(ckpt, 0o755)
	weights := filepath.Join(ckpt, "model.safetensors")
	os.WriteFile(weights, []byte("w"), 0o644)
	c, err = File(weights, true, ckpt)
	mustNot(t, c, err, ErrInput, "a file of the input checkpoint")
	c, err = File(filepath.Join(ckpt, "new.safetensors"), true, ckpt)
	must(t, c, err, "a new file in the input checkpoint's folder")
	c, err = File(filepath.Join(dir, "ckpt2"), true, ckpt)
	must(t, c, err, "a sibling whose name begins like the input's")
	c, err = File(weights, true, weights+".x")
	must(t, c, err, "an input that is a missing path")
	// CheckInputs: inputs learnt from an input's contents
	c, err = File(weights, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckInputs(ckpt); !errors.Is(err, ErrInput) {
		t.Errorf("CheckInputs of the checkpoint holding -out: %v", err)
	}
	if err := c.CheckInputs(filepath.Join(dir, "other")); err != nil {
		t.Errorf("CheckInputs of another input: %v", err)
	}
	c.Release()
}

// TestOnlyOurTemporariesGo: files that look like temporaries but are a
// user's are kept, beside a file output and inside an output folder, and
// make a folder count as not empty.
func TestOnlyOurTemporariesGo(t *testing.T) {
	parent := t.TempDir()
	run := filepath.Join(parent, "run")
	user := []string{".notes.tmp1", ".backup.tmp-2024", ".checkpoint.tmp-123", ".curves.csv.tmp456", ".run.tmp-789.old"}
	os.MkdirAll(run, 0o755)
	for _, n := range user {
		os.MkdirAll(filepath.Join(run, n), 0o755)
		os.WriteFile(filepath.Join(parent, n), nil, 0o644)
	}
	c, err := Dir(run, false)
	mustNot(t, c, err, ErrExists, "a folder of a user's hidden files")
	c, err = Dir(run, true)
	must(t, c, err, "the same with -force")
	c, err = File(filepath.Join(parent, "out"), true)
	must(t, c, err, "a file beside them")
	for _, n := range user {
		for _, d := range []string{run, parent} {
			if _, err := os.Stat(filepath.Join(d, n)); err != nil {
				t.Errorf("a user's %s removed: %v", filepath.Join(d, n), err)
			}
		}
	}
	// ours, of another file beside the target, stay too: not what we own
	atomicfile.WriteFile(filepath.Join(parent, "other"), nil, 0o644)
	// a swap of another folder killed midway is not the target's
	child("kill dir:filled " + filepath.Join(parent, "neighbour")).Run()
	before, _ := os.ReadDir(parent)
	c, err = File(filepath.Join(parent, "out"), true)
	must(t, c, err, "a file beside another's temporaries")
	after, _ := os.ReadDir(parent)
	if len(after) != len(before) {
		t.Errorf("claiming out changed what is beside it: %d → %d entries", len(before), len(after))
	}
}

// TestDirRecoversAnInterruptedSave: a run folder whose checkpoint swap was
// killed between its renames gets its newest checkpoint back, for -resume
// and for a plain run alike (which then refuses the folder: it holds a
// run).
func TestDirRecoversAnInterruptedSave(t *testing.T) {
	for _, replace := range []bool{true, false} {
		run := filepath.Join(t.TempDir(), "run")
		ckpt := filepath.Join(run, "checkpoint")
		os.MkdirAll(ckpt, 0o755)
		os.WriteFile(filepath.Join(ckpt, "weights"), []byte("old"), 0o644)
		if err := child("kill dir:aside " + ckpt).Run(); err == nil {
			t.Fatal("the child was not killed")
		}
		if _, err := os.Stat(ckpt); !os.IsNotExist(err) {
			t.Fatalf("the kill left the checkpoint in place: %v", err)
		}
		c, err := Target{Path: run, Replace: replace, Holds: func() string { return "it holds a run" }}.ClaimDir()
		if replace {
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Recovered) == 0 || !strings.Contains(c.Recovered[0], "restored "+ckpt) {
				t.Errorf("recovered %q", c.Recovered)
			}
			c.Release()
		} else if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "is not empty: it holds a run: -force replaces it") {
			t.Errorf("a plain run on a recovered folder: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(ckpt, "weights")); string(b) != "new" {
			t.Errorf("the checkpoint holds %q, want the newest %q", b, "new")
		}
		if ns, _ := os.ReadDir(run); len(ns) != 1 {
			t.Errorf("%d entries in the run folder, want the checkpoint only", len(ns))
		}
	}
	// the target itself swapped whole: recovered beside it
	parent := t.TempDir()
	index := filepath.Join(parent, "index")
	atomicfile.ReplaceDir(index, func(tmp string) error { return os.WriteFile(filepath.Join(tmp, "weights"), []byte("old"), 0o644) })
	child("kill dir:aside " + index).Run()
	c, err := Dir(index, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
	if b, _ := os.ReadFile(filepath.Join(index, "weights")); string(b) != "new" {
		t.Errorf("the index holds %q, want %q", b, "new")
	}
	if ns, _ := os.ReadDir(parent); len(ns) != 1 {
		t.Errorf("%d entries beside, want the index only", len(ns))
	}
}

func TestClaimIsExclusive(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	cmd := child("claim " + run)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "claimed\n" {
		t.Fatalf("child: %q", line)
	}
	for _, replace := range []bool{false, true} {
		c, err := Dir(run, replace)
		mustNot(t, c, err, ErrLocked, "a folder another process claims")
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", cmd.Process.Pid)) {
			t.Errorf("the refusal does not name the holder: %v", err)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	c, err := Dir(run, true)
	must(t, c, err, "after the holder died")
}

func TestDirKinds(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	os.WriteFile(file, nil, 0o644)
	if c, err := Dir(file, true); err == nil || !strings.Contains(err.Error(), "is a file, not a folder") {
		t.Errorf("a file as a folder: %v", err)
		c.Release()
	}
	// missing parents are made, and removed again if nothing was written
	deep := filepath.Join(parent, "a", "b", "run")
	c, err := Dir(deep, false)
	if err != nil {
		t.Fatalf("a folder in missing folders: %v", err)
	}
	if fi, err := os.Stat(filepath.Dir(deep)); err != nil || !fi.IsDir() {
		t.Errorf("the parent was not made: %v", err)
	}
	c.Release()
	if _, err := os.Stat(filepath.Join(parent, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a claim released with nothing written left the folders it made: %v", err)
	}
	// ... and kept once something is in them
	c, err = Dir(deep, false)
	must(t, c, err, "a folder in missing folders")
	os.MkdirAll(filepath.Join(parent, "a", "keep"), 0o755)
	c, err = Dir(filepath.Join(parent, "a", "b", "c", "run"), false)
	must(t, c, err, "a folder in missing folders")
	if _, err := os.Stat(filepath.Join(parent, "a", "keep")); err != nil {
		t.Errorf("a folder that was there: %v", err)
	}
	// an empty folder is no result; one file is
	os.MkdirAll(deep, 0o755)
	c, err = Dir(deep, false)
	must(t, c, err, "an empty folder")
	os.WriteFile(filepath.Join(deep, "x"), nil, 0o644)
	c, err = Target{Path: deep, Hint: "-resume continues it, -force starts over"}.ClaimDir()
	mustNot(t, c, err, ErrExists, "a folder with a file")
	if err == nil || !strings.HasSuffix(err.Error(), "is not empty: -resume continues it, -force starts over") {
		t.Errorf("hint: %v", err)
	}
	names, _ := os.ReadDir(filepath.Dir(deep))
	if !slices.EqualFunc(names, []string{"run"}, func(e os.DirEntry, n string) bool { return e.Name() == n }) {
		t.Errorf("beside the folder: %v", names)
	}
}

func TestWithin(t *testing.T) {
	sep := string(filepath.Separator)
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", false},
		{"/ab", "/a", false},
		{"/a/../b", "/a", false},
		{"/", "/a", false},
		{"/a/..b", "/a", true},
		{"/a/b" + sep + "c", "/a", true},
	} {
		if got := within(c.path, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

func TestInside(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "ckpt")
	os.Mkdir(in, 0o755)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(in, link)
	for _, c := range []struct {
		path string
		want bool
	}{
		{filepath.Join(in, "bf16"), true},
		{filepath.Join(link, "bf16"), true}, // through a link to the folder
		{in, false},
		{filepath.Join(dir, "ckpt2"), false},
		{dir, false},
	} {
		if got := Inside(c.path, in); got != c.want {
			t.Errorf("Inside(%q, %q) = %v, want %v", c.path, in, got, c.want)
		}
	}
}
