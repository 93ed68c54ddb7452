package hugepage

import (
	"os"
	"runtime"
	"testing"
)

// TestAdvise: the hint is given for a slice spanning whole huge pages on
// Linux with transparent huge pages available, never for one that spans
// none, and the slice's values are untouched.
func TestAdvise(t *testing.T) {
	if Advise([]float32(nil)) || Advise(make([]float32, 1000)) {
		t.Error("a hint for a slice shorter than a huge page")
	}
	x := make([]float32, 3*Size/4)
	for i := range x {
		x[i] = float32(i)
	}
	ok := Advise(x)
	for i := range x {
		if x[i] != float32(i) {
			t.Fatalf("x[%d] = %v after the hint", i, x[i])
		}
	}
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	switch {
	case runtime.GOOS != "linux":
		if ok {
			t.Error("a hint given off Linux")
		}
	case err != nil:
		t.Skipf("no transparent huge pages here (%v): the hint's result is not checked", err)
	case !ok:
		t.Errorf("no hint given for %d MiB (transparent_hugepage: %s)", len(x)*4>>20, thp)
	}
}
