//go:build unix

package conform

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// ownGroup makes the command the leader of a process group of its own, so
// that everything it starts (a wrapper script's python, a shell's
// background job) can be ended with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to every process of the group led by pid; term
// chooses SIGTERM, otherwise SIGKILL.
func signalGroup(pid int, term bool) {
	sig := syscall.SIGKILL
	if term {
		sig = syscall.SIGTERM
	}
	syscall.Kill(-pid, sig)
}

// groupAlive reports whether a process of the group led by pid still runs.
// A zombie does not count: an orphan that was killed stays a zombie until
// its new parent reaps it, and some init processes never do.
func groupAlive(pid int) bool {
	if err := syscall.Kill(-pid, 0); err != nil {
		return err == syscall.EPERM
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return true // no /proc: trust kill
	}
	pgrp := []byte(strconv.Itoa(pid))
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // it ended while we looked
		}
		// pid (comm) state ppid pgrp …: comm may hold blanks and parentheses
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+3 >= len(data) {
			continue
		}
		fields := bytes.Fields(data[i+1:])
		if len(fields) < 3 || fields[0][0] == 'Z' || fields[0][0] == 'X' {
			continue
		}
		if bytes.Equal(fields[2], pgrp) {
			return true
		}
	}
	return false
}
