package output

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileRefusesAnExistingResult(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	if err := File(path, false); err != nil {
		t.Fatalf("a new file: %v", err)
	}
	os.WriteFile(path, []byte("result"), 0o644)
	err := File(path, false)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-force") {
		t.Errorf("existing file without -force: %v", err)
	}
	if err := File(path, true); err != nil {
		t.Errorf("existing file with -force: %v", err)
	}
	if err := File(dir, true); err == nil {
		t.Error("a folder as a file: no error")
	}
}

func TestNeverOverAnInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte("{}"), 0o644)
	// the same file, by another spelling, even with -force
	for _, out := range []string{in, filepath.Join(dir, ".", "in.jsonl")} {
		if err := File(out, true, in); !errors.Is(err, ErrInput) {
			t.Errorf("-out %s over -in %s: %v, want ErrInput", out, in, err)
		}
		if err := Dir(out, true, in); !errors.Is(err, ErrInput) {
			t.Errorf("folder %s over the input %s: %v, want ErrInput", out, in, err)
		}
	}
	// a hard link is the same file
	link := filepath.Join(dir, "link.jsonl")
	if os.Link(in, link) == nil {
		if err := File(link, true, in); !errors.Is(err, ErrInput) {
			t.Errorf("hard link: %v, want ErrInput", err)
		}
	}
	// a folder holding an input would be replaced with it
	if err := Dir(dir, true, in); !errors.Is(err, ErrInput) {
		t.Errorf("folder holding the input: %v, want ErrInput", err)
	}
	// beside an input is fine
	if err := File(filepath.Join(dir, "other"), true, in); err != nil {
		t.Errorf("a file beside the input: %v", err)
	}
}

func TestDirCleansStaleTemporaries(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "run")
	// what a kill in the middle of saves leaves: a checkpoint folder being
	// built, a file being written, and the folder's own temporary beside it
	os.MkdirAll(filepath.Join(dir, ".checkpoint.tmp-123", "x"), 0o755)
	os.WriteFile(filepath.Join(dir, ".curves.csv.tmp456"), nil, 0o644)
	os.MkdirAll(filepath.Join(parent, ".run.tmp-789.old"), 0o755)
	os.WriteFile(filepath.Join(dir, ".hidden"), nil, 0o644) // not ours: kept
	err := Dir(dir, false)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("a folder with a user's file: %v, want ErrExists", err)
	}
	for _, gone := range []string{filepath.Join(dir, ".checkpoint.tmp-123"), filepath.Join(dir, ".curves.csv.tmp456"), filepath.Join(parent, ".run.tmp-789.old")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s not removed", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".hidden")); err != nil {
		t.Errorf("a user's hidden file removed: %v", err)
	}
	os.Remove(filepath.Join(dir, ".hidden"))
	os.MkdirAll(filepath.Join(dir, ".model.tmp-1"), 0o755)
	if err := Dir(dir, false); err != nil {
		t.Errorf("a folder of stale temporaries only: %v, want it to count as empty", err)
	}
	os.WriteFile(filepath.Join(parent, "file"), nil, 0o644)
	if err := Dir(filepath.Join(parent, "file"), true); err == nil {
		t.Error("a file as a folder: no error")
	}
}

func TestHint(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	err := Target{Path: dir, Hint: "-resume continues it, -force starts over"}.Dir()
	if err == nil || !strings.Contains(err.Error(), "-resume continues it") {
		t.Errorf("%v", err)
	}
}
