package retrieve

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/docblock"
)

var updateREADME = flag.Bool("update", false, "rewrite docs/retrieval.md's block of dataset counts from this run")

// readmeDataBlock is docs/retrieval.md's paragraph on the dataset built from the
// standard library of goVersion, with the counts of st (the default
// split) and all (every pair in one split).
func readmeDataBlock(goVersion string, st, all Stats) string {
	n := func(v int) string { // 15279 → 15,279
		s := fmt.Sprint(v)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	return fmt.Sprintf(`**Data.** From the Go standard library (%s): %s (query, code) pairs — the
doc comment without its leading identifier, and the function without its
comment — with build-tag variants and code duplicated up to white space
dropped, split by package (%s / %s / %s; the test split is %d
packages never seen in training; %s training pairs whose query a
validation or test pair repeats are dropped, so that no query is both
learned and measured). With every package in one split, as the search
index below takes them, %s pairs. Any JSONL file in the same format can be
evaluated.
`, goVersion, n(st.Kept), n(st.Split[0].Pairs), n(st.Split[1].Pairs), n(st.Split[2].Pairs), st.Split[2].Packages,
		n(st.HeldQuery), n(all.Kept))
}

// TestREADMEData: docs/retrieval.md's counts of the dataset retriever data builds
// from the standard library are this Go version's, as the command builds
// them; go test ./retrieve -run READMEData -update rewrites them. On
// another Go version (another standard library) the test skips.
func TestREADMEData(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("reads the whole standard library twice")
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		t.Skipf("go env: %v", err)
	}
	env := strings.Fields(string(out))
	goroot, version := env[0], env[1]
	blk, err := docblock.Find(filepath.Join("..", "docs", "retrieval.md"), "<!-- retrieval data: go test ./retrieve -run READMEData -update -->\n", "<!-- end of retrieval data -->")
	if err != nil {
		t.Fatal(err)
	}
	old := blk.Text()
	if m := regexp.MustCompile(`standard library \((go[^)]*)\)`).FindStringSubmatch(old); !*updateREADME && (m == nil || m[1] != version) {
		t.Skipf("docs/retrieval.md's counts are of another standard library than %s's: go test ./retrieve -run READMEData -update rewrites them", version)
	}
	src := filepath.Join(goroot, "src")
	_, _, _, st, err := BuildDataset(context.Background(), src, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.ValFrac, o.TestFrac = 0, 1
	_, _, _, all, err := BuildDataset(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	want := readmeDataBlock(version, st, all)
	if *updateREADME {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old != want {
		t.Errorf("docs/retrieval.md's dataset counts differ from this run (go test ./retrieve -run READMEData -update rewrites them):\ndocs/retrieval.md:\n%s\nrun:\n%s", old, want)
	}
}
