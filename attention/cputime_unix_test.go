//go:build unix

package attention_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, user and system. On a
// machine shared with other jobs, flops per CPU-second measure a kernel
// better than flops per wall-clock second.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
