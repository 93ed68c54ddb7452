package fsprobe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileAndDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"a file in a folder", File(filepath.Join(dir, "x.png")), ""},
		{"a file over one that exists", File(file), ""},
		{"a file in a missing folder", File(filepath.Join(dir, "none", "x.png")), "does not exist"},
		{"a file under a file", File(filepath.Join(file, "x.png")), "is not a folder"},
		{"a file deeper under a file", File(filepath.Join(file, "a", "x.png")), "is not a folder"},
		{"a folder to make", Dir(filepath.Join(dir, "a", "b", "c")), ""},
		{"a folder that exists", Dir(dir), ""},
		{"a folder under a file", Dir(filepath.Join(file, "a", "b")), "is not a folder"},
	} {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: %v", c.name, c.err)
		case c.want != "" && (c.err == nil || !strings.Contains(c.err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
	if os.Getuid() != 0 { // root writes in a read-only folder
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if err := File(filepath.Join(ro, "x")); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("a read-only folder: %v", err)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the probes left %d entries", len(ents)-1)
	}
}
