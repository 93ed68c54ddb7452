package train

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// sparse returns a file of n bytes that takes no room on disk.
func sparse(t *testing.T, path string, n int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadBounded: the state file and the curves file a resume reads
// are refused, naming them, beyond their limits, before they are read.
func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	state := sparse(t, filepath.Join(dir, StateFile), MaxStateBytes+1)
	if _, err := ReadStateFile(dir); err == nil || err.Error() != state+": larger than "+strconv.Itoa(MaxStateBytes)+" bytes" {
		t.Errorf("ReadStateFile of a state file of %d bytes: %v", MaxStateBytes+1, err)
	}
	sparse(t, state, MaxStateBytes)
	if _, err := ReadStateFile(dir); err != nil {
		t.Errorf("ReadStateFile at the limit: %v", err)
	}
	curves := sparse(t, filepath.Join(dir, "curves.csv"), MaxCurvesBytes+1)
	if _, err := ReadCurves(curves, 10); err == nil || err.Error() != curves+": larger than "+strconv.Itoa(MaxCurvesBytes)+" bytes" {
		t.Errorf("ReadCurves of %d bytes: %v", MaxCurvesBytes+1, err)
	}
}
