package models

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func TestExtract(t *testing.T) {
	fsys := fstest.MapFS{
		"lm/config.json":       {Data: []byte(`{"a": 1}`)},
		"lm/model.safetensors": {Data: []byte("weights")},
	}
	root := t.TempDir()
	dir, err := extract(fsys, "lm", root)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); string(got) != "weights" {
		t.Errorf("extracted %q", got)
	}
	// a second call finds it, without writing
	stat, _ := os.Stat(filepath.Join(dir, "config.json"))
	again, err := extract(fsys, "lm", root)
	if err != nil || again != dir {
		t.Fatalf("second call: %q, %v; first %q", again, err, dir)
	}
	if stat2, _ := os.Stat(filepath.Join(dir, "config.json")); !stat2.ModTime().Equal(stat.ModTime()) {
		t.Error("the second call rewrote the files")
	}
	// other contents, another directory: never mixed
	fsys["lm/model.safetensors"] = &fstest.MapFile{Data: []byte("other weights")}
	other, err := extract(fsys, "lm", root)
	if err != nil || other == dir {
		t.Fatalf("changed contents: %q, %v; want a directory other than %q", other, err, dir)
	}
	// nothing half-written is left behind
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary %s left in %s", e.Name(), root)
		}
	}
	if _, err := extract(fsys, "nope", root); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown model: %v", err)
	}
}

// Processes extracting at once all get the complete directory.
func TestExtractConcurrent(t *testing.T) {
	fsys := fstest.MapFS{"enc/a": {Data: []byte(strings.Repeat("x", 1<<20))}, "enc/b": {Data: []byte("b")}}
	root := t.TempDir()
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			d, err := extract(fsys, "enc", root)
			if err != nil {
				t.Error(err)
			}
			dirs[i] = d
		})
	}
	wg.Wait()
	for _, d := range dirs {
		if d != dirs[0] {
			t.Fatalf("directories differ: %q", dirs)
		}
		if data, _ := os.ReadFile(filepath.Join(d, "a")); len(data) != 1<<20 {
			t.Fatalf("%s/a has %d bytes", d, len(data))
		}
	}
}
