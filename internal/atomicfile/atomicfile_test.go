package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

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
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries in the folder, want only the file", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Error("writing into a missing folder: no error")
	}
}

func TestReplaceDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	fill := func(content string) func(string) error {
		return func(tmp string) error { return os.WriteFile(filepath.Join(tmp, "a"), []byte(content), 0o644) }
	}
	if err := ReplaceDir(dir, fill("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ReplaceDir(dir, func(tmp string) error {
		fill("half")(tmp)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want fill's", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "one" {
		t.Fatalf("after a failed fill the directory holds %q, want %q", b, "one")
	}
	if err := ReplaceDir(dir, fill("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "two" {
		t.Fatalf("the directory holds %q, want %q", b, "two")
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode())
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("%d entries beside the directory, want none left over", len(entries)-1)
	}
}
