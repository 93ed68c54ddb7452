package corpus

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWalkStopsAtEndlessFiles: a .go file that is a link to /dev/zero is
// passed over at once, not read without end, and a file beyond
// readlimit.SourceFileBytes is too large even with no MaxFileBytes.
func TestWalkStopsAtEndlessFiles(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "p")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "a.go"), []byte("package p\n\nfunc A() {}\n"), 0o644)
	if err := os.Symlink("/dev/zero", filepath.Join(pkg, "zero.go")); err != nil {
		t.Fatal(err)
	}
	huge, err := os.Create(filepath.Join(pkg, "huge.go")) // sparse: no disk used
	if err != nil {
		t.Fatal(err)
	}
	huge.Truncate(65 << 20)
	huge.Close()
	for _, max := range []int64{0, -1} {
		done := make(chan struct{})
		var docs []Document
		var st Stats
		var err error
		go func() {
			docs, st, err = Read(context.Background(), []Source{{Name: "x", Dir: dir}}, Options{MaxFileBytes: max})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("MaxFileBytes %d: reading a link to /dev/zero did not end", max)
		}
		if err != nil || len(docs) != 1 || st.Large != 1 {
			t.Errorf("MaxFileBytes %d: %d documents, %d large, %v; want the one real file and huge.go too large", max, len(docs), st.Large, err)
		}
	}
}
