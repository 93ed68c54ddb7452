package vec

import (
	"strings"
	"testing"
)

// TestPathNamesTheKernels: Path names each path this machine can run
// while it is the one switched on (attnlab version prints it).
func TestPathNamesTheKernels(t *testing.T) {
	for _, p := range testPaths() {
		restore := p.use()
		got := Path()
		restore()
		if want := strings.ToLower(p.name); got != want {
			t.Errorf("with the %s path on, Path() = %q, want %q", p.name, got, want)
		}
	}
}
