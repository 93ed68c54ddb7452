//go:build !unix

package corpus

import "os/exec"

// killGroup leaves cmd as it is: exec.CommandContext kills the process.
func killGroup(cmd *exec.Cmd) {}

// lockDir does not lock: one fetch at a time is the caller's care here.
func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }
