//go:build unix

package corpus

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd the leader of a process group that is killed whole
// on cancellation: apt-get runs its downloads in child processes.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
