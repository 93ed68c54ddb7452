package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoSourceStopsAtEndlessFiles: a .go file that is a link to /dev/zero
// is an error naming it, at once, not a read without end.
func TestGoSourceStopsAtEndlessFiles(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("package p\n\nfunc A() {}\n"), 0o644)
	zero := filepath.Join(dir, "zero.go")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	_, err := GoSource(dir)
	if err == nil || !strings.Contains(err.Error(), zero) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("GoSource with a link to /dev/zero: %v, want an error naming it", err)
	}
}
