//go:build unix

package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether process pid runs (a zombie does not: it has ended
// and waits only for its parent to reap it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// wrapper is a shell command line that starts a background sleep (the
// grandchild that must not outlive attnlab), writes its pid to a file and
// then runs body; pid waits for that file and returns the sleep's pid.
func wrapper(t *testing.T, body string) (command string, pid func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pid")
	script := "sleep 1000 & echo $! > " + file + "; " + body
	return "sh -c '" + script + "'", func() int {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			data, err := os.ReadFile(file)
			if n, err2 := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && err2 == nil && n > 0 {
				return n
			}
		}
		t.Fatal("the wrapper wrote no pid")
		return 0
	}
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the grandchild %d outlived the adapter", pid)
	}
}

// TestAdapterProcessGroupEnded: an adapter started through a wrapper
// leaves no process behind, whether it is closed after a good run, hangs
// past the timeout (with SIGTERM ignored, so only SIGKILL ends it), or is
// cancelled in the middle of a request.
func TestAdapterProcessGroupEnded(t *testing.T) {
	req := randomRequest(1, 1, 1, 1, 2, 2, 4)
	req.DType = "float64"
	t.Run("close", func(t *testing.T) {
		t.Setenv("ATTNLAB_TEST_ADAPTER", "reference")
		command, pid := wrapper(t, "exec "+os.Args[0])
		a, err := Start(context.Background(), command, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := a.Attention(req); err != nil || resp.Err != "" {
			t.Fatalf("%v %+v", err, resp)
		}
		p := pid()
		if !alive(p) {
			t.Fatal("the grandchild did not start")
		}
		if err := a.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		assertGone(t, p)
	})
	t.Run("timeout", func(t *testing.T) {
		command, pid := wrapper(t, "wait")
		command = strings.Replace(command, "sleep", `trap "" TERM; sleep`, 1)
		start := time.Now()
		a, err := Start(context.Background(), command, 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
			t.Errorf("Start: %v, %v; want no answer within 300ms", a, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v", d)
		}
		assertGone(t, pid())
	})
	t.Run("cancel", func(t *testing.T) {
		t.Setenv("ATTNLAB_TEST_ADAPTER", "misbehave:hang")
		command, pid := wrapper(t, os.Args[0]+"; exit 0")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, err := Start(ctx, command, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p := pid()
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err = a.Attention(req)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled request: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v to stop", d)
		}
		a.Close()
		assertGone(t, p)
		if groupAlive(a.cmd.Process.Pid) {
			t.Error("the adapter's process group still runs")
		}
	})
}

// TestAdapterExit: after its input closes an adapter must exit with
// status 0: status 5 is an adapter failure naming it, with its stderr; a
// slow clean exit is waited for and is not a failure; one that never
// exits is ended after CloseGrace and that is a failure.
func TestAdapterExit(t *testing.T) {
	t.Parallel() // after the fast tests, beside the other slow ones
	for _, c := range []struct {
		how, want string
		grace     time.Duration
		atLeast   time.Duration
	}{
		{"5", "it exited with status 5 after its input closed; its stderr ends: exiting with status 5 on purpose", 0, 0},
		{"slow", "", 0, 1500 * time.Millisecond},
		{"stay", "did not exit within 300ms", 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(c.how, func(t *testing.T) {
			a, err := startTestAdapter(t, "exit:"+c.how, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c.grace > 0 {
				a.CloseGrace = c.grace
			}
			start := time.Now()
			err = a.Close()
			d := time.Since(start)
			var ae *Error
			switch {
			case c.want == "" && err != nil:
				t.Errorf("close: %v, want none", err)
			case c.want != "" && (!errors.As(err, &ae) || ae.Request != "close" || !strings.Contains(err.Error(), c.want)):
				t.Errorf("close: %v, want an adapter error at close with %q", err, c.want)
			}
			if d < c.atLeast || d > c.atLeast+3*time.Second {
				t.Errorf("close took %v, want %v or a little more", d, c.atLeast)
			}
			if a.cmd.ProcessState == nil {
				t.Error("not reaped")
			}
		})
	}
}

// TestMalformedFraming: a stray blank line or line of text on the
// adapter's output is reported at once, quoting it, not after the 60 s
// timeout.
func TestMalformedFraming(t *testing.T) {
	req := randomRequest(1, 1, 1, 1, 2, 2, 4)
	req.DType = "float64"
	// a long line is quoted up to 64 bytes, all that is already waiting
	for how, want := range map[string]string{"blankline": `it wrote "\n`, "textline": `it wrote "loading weights\n`, "longline": fmt.Sprintf("it wrote %q;", longLine[:64])} {
		t.Run(how, func(t *testing.T) {
			a, err := startTestAdapter(t, "misbehave:"+how, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			start := time.Now()
			_, err = a.Attention(req)
			if err == nil || !strings.Contains(err.Error(), "malformed framing") || !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want malformed framing quoting %s", err, want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("reported after %v", d)
			}
		})
	}
}

// TestStderrTailAlways: the end of the adapter's stderr is part of every
// error of one that crashes, with its exit status (once it raced with the
// goroutine copying stderr and was missing now and then).
func TestStderrTailAlways(t *testing.T) {
	req := randomRequest(1, 1, 1, 1, 2, 2, 4)
	req.DType = "float64"
	for i := range 25 {
		a, err := startTestAdapter(t, "misbehave:crash", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Attention(req)
		a.Close()
		if err == nil || !strings.HasSuffix(err.Error(), "it exited with status 7; its stderr ends: misbehaving on purpose: crash") {
			t.Fatalf("run %d: %v, want the exit status and the stderr tail", i, err)
		}
	}
}
