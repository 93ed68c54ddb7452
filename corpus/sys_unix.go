//go:build unix

package corpus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// killGroup makes cmd the leader of a process group that is killed whole
// on cancellation: apt-get runs its downloads in child processes.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// lockDir takes an exclusive lock on dir/.lock, which the system releases
// when the process ends, however it ends.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("corpus: %s is being fetched by another process", dir)
	}
	return func() { f.Close() }, nil
}
