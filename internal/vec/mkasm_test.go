package vec

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestAssemblyIsGenerated: the committed assembly is exactly what
// mkasm.go writes, file for file: a hand edit of a .s file, or a change to
// mkasm.go not regenerated (go generate), fails here and so in CI.
func TestAssemblyIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mkasm.go")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command at %s to run mkasm.go: %v", goBin, err)
	}
	out := t.TempDir()
	cmd := exec.Command(goBin, "run", "mkasm.go", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run mkasm.go: %v\n%s", err, b)
	}
	generated, _ := filepath.Glob(filepath.Join(out, "*.s"))
	committed, _ := filepath.Glob("*.s")
	var names []string
	for _, g := range generated {
		names = append(names, filepath.Base(g))
	}
	slices.Sort(names)
	slices.Sort(committed)
	if !slices.Equal(names, committed) {
		t.Fatalf("mkasm.go writes %v; the package holds %v", names, committed)
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			line := 1 + bytes.Count(got[:commonPrefix(got, want)], []byte("\n"))
			t.Errorf("%s differs from what mkasm.go writes from line %d: run go generate in internal/vec", name, line)
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
