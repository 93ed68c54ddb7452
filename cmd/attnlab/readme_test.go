package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/vec"

	"github.com/attnlab/attnlab/internal/docblock"
)

var updateREADME = flag.Bool("update", false, "rewrite docs/model.md's generation samples from this run")

// readmePrompts are the prompts of docs/model.md's generation samples.
var readmePrompts = []string{
	"// Reverse returns s with its runes in reverse order.\nfunc Reverse(s string) string {",
	"// Contains reports whether v is present in s.\nfunc Contains(s []int, v int) bool {",
	"// ReadLines reads the file at path and returns its lines.\nfunc ReadLines(path string) ([]string, error) {",
}

// TestREADMEGeneration: docs/model.md's samples of the shipped model are what
// generate prints for them at the default flags; go test ./cmd/attnlab
// -run READMEGeneration -update rewrites them. Greedy decoding in float32
// may pick another token where two are within rounding of each other on
// other kernels: on kernels other than the page's, the test skips.
func TestREADMEGeneration(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	blk, err := docblock.Find(filepath.Join("..", "..", "docs", "model.md"), "<!-- generation: go test ./cmd/attnlab -run READMEGeneration -update -->\n", "<!-- end of generation -->")
	if err != nil {
		t.Fatal(err)
	}
	old := blk.Text()
	if m := regexp.MustCompile(`on the (\w+) kernels`).FindStringSubmatch(old); !*updateREADME && (m == nil || m[1] != vec.Path()) {
		t.Skipf("docs/model.md's samples were generated on other kernels than this process's %s", vec.Path())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Shipped model, at the default flags (the repetition penalty and the n-gram ban on), greedy, on the %s kernels:\n", vec.Path())
	for _, p := range readmePrompts {
		code, stdout, stderr := attnlab(t, "generate", "-prompt", p, "-temp", "0", "-n", "60")
		if code != 0 {
			t.Fatalf("generate: exit %d: %s", code, stderr)
		}
		fmt.Fprintf(&b, "\n`attnlab generate -prompt %q -temp 0 -n 60`:\n\n```go\n%s```\n", p, stdout)
	}
	want := b.String()
	if *updateREADME {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old != want {
		t.Errorf("docs/model.md's generation samples differ from this run (go test ./cmd/attnlab -run READMEGeneration -update rewrites them):\ndocs/model.md:\n%s\nrun:\n%s", old, want)
	}
}
