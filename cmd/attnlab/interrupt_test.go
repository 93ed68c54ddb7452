package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptAfter starts the binary with args, sends sig after delay and
// returns the exit status, how long the process took to stop and its
// output.
func interruptAfter(t *testing.T, sig os.Signal, delay time.Duration, args ...string) (int, time.Duration, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	start := time.Now()
	cmd.Process.Signal(sig)
	code := waitExit(t, &proc{Cmd: cmd}, 10*time.Second)
	return code, time.Since(start), stdout.String() + stderr.String()
}

// TestInterruptsStopWithinASecond: commands that ignored the first signal
// for a minute (gradcheck), for as long as no writer came (ref reading a
// FIFO) or for the decoder's seconds (faults, the lab) stop within a second,
// with 143 for SIGTERM and 130 for SIGINT.
func TestInterruptsStopWithinASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	out := filepath.Join(dir, "out.safetensors")
	for _, c := range []struct {
		sig   os.Signal
		delay time.Duration
		args  []string
	}{
		{syscall.SIGTERM, time.Second, []string{"gradcheck", "-m", "64", "-n", "128", "-d", "16", "-dv", "16"}},
		{os.Interrupt, time.Second, []string{"gradcheck", "-m", "64", "-n", "128", "-d", "16", "-dv", "16", "-directions", "100000"}},
		{syscall.SIGTERM, 500 * time.Millisecond, []string{"ref", "-op", "attention", "-in", fifo, "-out", out}},
		{os.Interrupt, 500 * time.Millisecond, []string{"ref", "-op", "attention", "-in", fifo, "-out", out}},
		{syscall.SIGTERM, time.Second, []string{"faults"}}, // the whole registry, as the lab below
		{os.Interrupt, 2 * time.Second, []string{"lab"}},   // the whole lab: the decoder alone ends within 2 s on a quiet machine
	} {
		want := 130
		if c.sig == syscall.SIGTERM {
			want = 143
		}
		code, took, output := interruptAfter(t, c.sig, c.delay, c.args...)
		if code != want || took > 1500*time.Millisecond {
			t.Errorf("%v: exit %d %v after %v; want %d within a second\n%s", c.args, code, took, c.sig, want, output)
		}
		if !strings.Contains(output, "interrupted") {
			t.Errorf("%v: no word of the interrupt:\n%s", c.args, output)
		}
		t.Logf("%v stopped %v after %v", c.args, took, c.sig)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an interrupted ref wrote %s", out)
	}
}
