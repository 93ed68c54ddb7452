package retrieve

import "testing"

func TestDuplicateMask(t *testing.T) {
	keys := []string{"x", "y", "x", "x"}
	m := make([]bool, 2*4)
	DuplicateMask(m, keys, 2)
	want := []bool{false, false, true, true, false, false, false, false}
	for i := range m {
		if m[i] != want[i] {
			t.Fatalf("mask %v, want %v", m, want)
		}
	}
}
