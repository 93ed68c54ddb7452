package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as attnlab killed at a chosen step
// of a write (ATTNLAB_KILL_AT, see killedAt), as a conformance adapter
// (ATTNLAB_TEST_ADAPTER, see serveTestAdapter), or as attnlab itself
// (ATTNLAB_TEST_CLI=1, the attnlab of TestGuide's commands).
func TestMain(m *testing.M) {
	if os.Getenv("ATTNLAB_TEST_CLI") == "1" {
		main()
	}
	if what := os.Getenv("ATTNLAB_TEST_ADAPTER"); what != "" {
		os.Exit(serveTestAdapter(what))
	}
	if at := os.Getenv("ATTNLAB_KILL_AT"); at != "" {
		armed := false // once a first folder swap is done
		atomicfile.TestHook = func(step string) {
			if armed && step == at {
				os.Exit(9)
			}
			armed = armed || step == "dir:done"
		}
		args := strings.Split(os.Getenv("ATTNLAB_ARGS"), "\x1f")
		os.Exit(run(context.Background(), args, io.Discard, os.Stderr))
	}
	os.Exit(m.Run())
}

// killedAt runs attnlab args in a child process that ends, as a kill
// would, at the first time a write reaches step at after a first folder
// swap (a first checkpoint) is done; it returns the exit status (9 when
// killed there).
func killedAt(t *testing.T, at string, args ...string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATTNLAB_KILL_AT="+at, "ATTNLAB_ARGS="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() != 9 {
			t.Logf("not killed: %s", out)
		}
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	t.Logf("not killed: %s", out)
	return 0
}

// TestDoubleSIGTERMStillSaves: timeout and container runtimes may send
// SIGTERM twice; the second one waits for the save the first asked for,
// whenever it comes.
func TestDoubleSIGTERMStillSaves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	src := tinyCorpus(t)
	for _, gap := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond} {
		t.Run(fmt.Sprint(gap), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := trainArgs(src, out, "-steps", "100000", "-save-every", "100000", "-eval-every", "100000")
			cmd, stdout, stderr := startUntil(t, "model:", args...)
			time.Sleep(300 * time.Millisecond) // a few steps
			cmd.Process.Signal(syscall.SIGTERM)
			time.Sleep(gap)
			cmd.Process.Signal(syscall.SIGTERM)
			if code := waitExit(t, cmd, 30*time.Second); code != 143 {
				t.Fatalf("exit %d, want 143\n%s%s", code, stdout, stderr)
			}
			if step := checkpointStep(t, out); step < 1 {
				t.Errorf("checkpoint at step %d after two SIGTERMs", step)
			}
			// signals sent at once may arrive as one
			if gap > 10*time.Millisecond && !strings.Contains(stderr.String(), "finishing the save in progress first") {
				t.Errorf("no word of waiting for the save:\n%s", stderr)
			}
		})
	}
}

// TestOneWriterPerFolder: a second train into the folder a first one is
// writing is refused at once, naming the first one's pid; the first one
// goes on undisturbed.
func TestOneWriterPerFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	args := trainArgs(src, out, "-steps", "100000", "-save-every", "5", "-eval-every", "100000")
	first, stdout, stderr := startUntil(t, "model:", args...)
	for _, extra := range [][]string{nil, {"-force"}, {"-resume"}} {
		code, _, errOut := attnlab(t, append(args, extra...)...)
		want := fmt.Sprintf("%s is being written by another attnlab process (pid %d)", out, first.Process.Pid)
		if code != 1 || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") > 1 {
			t.Errorf("a second train %v: exit %d, stderr %q; want 1 and %q", extra, code, errOut, want)
		}
	}
	time.Sleep(500 * time.Millisecond) // a few steps
	first.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, first, 30*time.Second); code != 143 {
		t.Fatalf("the first train: exit %d\n%s%s", code, stdout, stderr)
	}
	if step := checkpointStep(t, out); step < 1 {
		t.Errorf("the first train saved step %d", step)
	}
	// the lock goes with the process: the folder can be resumed
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(time.Second, func() { cancel(interrupted{syscall.SIGTERM}) })
	if code, _, errOut := attnlabCtx(t, ctx, append(args, "-resume")...); code != 143 || strings.Contains(errOut, "being written") {
		t.Errorf("resume after the first ended: exit %d: %s", code, errOut)
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("beside the run folder: %d entries, want none but it (no lock file left)", len(entries)-1)
	}
}

// TestTrainNonFiniteSaysWhatIsKept: a loss that turns NaN stops the run
// with one line on stderr that tells the truth about the checkpoint; with
// none saved nothing of the run is left, so a plain rerun works.
func TestTrainNonFiniteSaysWhatIsKept(t *testing.T) {
	src := tinyCorpus(t)
	out := filepath.Join(t.TempDir(), "run")
	code, _, stderr := attnlab(t, trainArgs(src, out, "-steps", "10", "-lr", "1e30")...)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not finite") || !strings.Contains(stderr, "no checkpoint had been saved, so nothing of the run is kept") {
		t.Errorf("NaN before the first save: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the folder of a run that kept nothing is left: %v", err)
	}
	// a checkpoint every step: the last good one is step 1
	code, _, stderr = attnlab(t, trainArgs(src, out, "-steps", "10", "-lr", "1e30", "-save-every", "1")...)
	want := "the last good checkpoint, step 1, is kept in " + filepath.Join(out, "checkpoint") + ": -force starts over"
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("NaN after a save: exit %d, stderr %q, want %q", code, stderr, want)
	}
	if step := checkpointStep(t, out); step != 1 {
		t.Errorf("checkpoint at step %d, want 1", step)
	}
	// -force starts over with a sane rate; its NaN-free run replaces it
	if code, _, stderr := attnlab(t, trainArgs(src, out, "-steps", "2", "-force")...); code != 0 {
		t.Errorf("-force after the NaN: exit %d: %s", code, stderr)
	}
	// -resume with other flags names the flag, once, on one line
	code, _, stderr = attnlab(t, trainArgs(src, out, "-steps", "3", "-lr", "1e-3", "-resume")...)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "-steps 2 (now 3); -lr 0.003 (now 0.001)") || strings.Contains(stderr, "{") {
		t.Errorf("-resume with other flags: exit %d, stderr %q", code, stderr)
	}
}
