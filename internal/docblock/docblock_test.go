package docblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindReplace: the block between the markers is read and replaced,
// the rest of the page kept; a page without the markers is an error
// naming it.
func TestFindReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte("intro\n<!-- x -->\nold\n<!-- end -->\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Find(path, "<!-- x -->\n", "<!-- end -->")
	if err != nil || b.Text() != "old\n" {
		t.Fatalf("%v, %q", err, b.Text())
	}
	if err := b.Replace("new\nlines\n"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "intro\n<!-- x -->\nnew\nlines\n<!-- end -->\nafter\n" {
		t.Errorf("page %q", data)
	}
	if _, err := Find(path, "<!-- y -->\n", "<!-- end -->"); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("missing markers: %v", err)
	}
}
