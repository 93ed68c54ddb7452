package oracle_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/attnlab/attnlab/oracle"
)

// TestTorchOracleKnowsTheSameOps reads the OPS table of the PyTorch oracle
// and compares its names with the ops of attnlab ref: one name per op on
// both sides (package lab's tests tie these names to the registry).
func TestTorchOracleKnowsTheSameOps(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "python", "torch_oracle.py"))
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?s)\nOPS = \{(.*?)\n\}`).FindSubmatch(src)
	if table == nil {
		t.Fatal("torch_oracle.py has no OPS = {...} table")
	}
	var names []string
	for _, m := range regexp.MustCompile(`"([a-z-]+)":`).FindAllSubmatch(table[1], -1) {
		names = append(names, string(m[1]))
	}
	want := slices.Sorted(slices.Values(oracle.Ops))
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Errorf("torch_oracle.py knows %v, attnlab ref %v", names, want)
	}
}
