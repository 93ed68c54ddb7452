package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds attnlab once for the tests that need a real process.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "attnlab-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "attnlab")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("building attnlab: %v", binErr)
	}
	return binPath
}

// startUntil starts the binary with args and waits until a line of its
// stdout contains marker; it returns the process and its output, complete
// once waitExit returned.
func startUntil(t *testing.T, marker string, args ...string) (*proc, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	sc := bufio.NewScanner(pipe)
	found := make(chan bool, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		seen := false
		for sc.Scan() {
			stdout.WriteString(sc.Text() + "\n")
			if !seen && strings.Contains(sc.Text(), marker) {
				seen = true
				found <- true
			}
		}
		if !seen {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			<-read
			cmd.Wait()
			t.Fatalf("%v ended without printing %q:\n%s%s", args, marker, stdout.String(), stderr.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%v: no %q within 2 minutes", args, marker)
	}
	return &proc{cmd, read}, &stdout, &stderr
}

// proc is a started command whose stdout is being read.
type proc struct {
	*exec.Cmd
	read chan struct{} // closed when stdout is read to its end
}

// waitExit waits for cmd and returns its exit status; a process that does
// not stop within the limit is killed and fails the test.
func waitExit(t *testing.T, p *proc, limit time.Duration) int {
	t.Helper()
	cmd := p.Cmd
	done := make(chan error, 1)
	go func() {
		if p.read != nil {
			<-p.read // Wait closes the pipe: read it all first
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running %v after the signal", limit)
		return -1
	}
}

// TestSIGTERMSavesTraining: what timeout, systemd and container runtimes
// send stops training after the current step, with the run saved (exit
// 143); the same command with -resume continues from there.
func TestSIGTERMSavesTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	args := trainArgs(src, out, "-steps", "100000", "-save-every", "100000", "-eval-every", "100000")
	terminate := func(args []string) int {
		cmd, stdout, stderr := startUntil(t, "model:", args...)
		time.Sleep(500 * time.Millisecond) // a few steps
		cmd.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, cmd, 30*time.Second); code != 143 {
			t.Fatalf("exit %d, want 143\n%s%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout.String(), "checkpoint saved") {
			t.Errorf("no word of the save:\n%s", stdout)
		}
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("temporary %s left", e.Name())
			}
		}
		return checkpointStep(t, out)
	}
	first := terminate(args)
	if first < 1 {
		t.Fatalf("checkpoint at step %d after a SIGTERM", first)
	}
	if second := terminate(append(args, "-resume")); second <= first {
		t.Errorf("resumed to step %d from %d", second, first)
	}
}

// TestCtrlCStopsBench: a long measurement stops soon after SIGINT (after
// the run in progress), with exit 130.
func TestCtrlCStopsBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// bench runs measurement after measurement for minutes and prints
	// only at the end
	cmd := exec.Command(binary(t), "bench", "-max-n", "4096", "-seconds", "5", "-torch=false", "-memory=false")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, &proc{Cmd: cmd}, 10*time.Second); code != 130 {
		t.Errorf("bench: exit %d, want 130\n%s%s", code, stdout.String(), stderr.String())
	}
	t.Logf("bench stopped %v after SIGINT", time.Since(start))
}
