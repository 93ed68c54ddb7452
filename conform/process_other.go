//go:build !unix

package conform

import (
	"os"
	"os/exec"
)

// ownGroup does nothing where there are no process groups: only the
// adapter itself is ended.
func ownGroup(cmd *exec.Cmd) {}

func signalGroup(pid int, term bool) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func groupAlive(pid int) bool { return false }
