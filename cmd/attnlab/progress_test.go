package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressTimeLeftAfterResume: a run resumed at step 50 of 100 that
// takes a second a step has 40 s left at step 60, not the 7 s a rate
// counted from step 0 would promise.
func TestProgressTimeLeftAfterResume(t *testing.T) {
	var out bytes.Buffer
	oldOut, oldEvery := progressOut, logEvery
	progressOut, logEvery = &out, 0
	defer func() { progressOut, logEvery = oldOut, oldEvery }()

	p := newProgress(100, "training", false)
	p.set(50, "")
	ago := time.Now().Add(-10 * time.Second)
	p.start, p.firstAt = ago, ago
	out.Reset()
	p.set(60, "")
	if line := out.String(); !strings.Contains(line, "about 40s left") {
		t.Errorf("progress line %q, want about 40s left", line)
	}
}

// TestHeartbeat: a command with no progress of its own says it is still
// running every heartbeatEvery; while its progress is being set, it does
// not.
func TestHeartbeat(t *testing.T) {
	var out bytes.Buffer
	oldOut, oldEvery := progressOut, heartbeatEvery
	progressOut, heartbeatEvery = &out, 10*time.Millisecond
	defer func() { progressOut, heartbeatEvery = oldOut, oldEvery }()

	stop := heartbeat("lab")
	time.Sleep(100 * time.Millisecond)
	stop()
	if n := strings.Count(out.String(), "attnlab lab: running, "); n < 2 || !strings.Contains(out.String(), "so far\n") {
		t.Errorf("a silent command for 10 intervals: %d heartbeat lines, want several:\n%s", n, out.String())
	}

	out.Reset()
	heartbeatEvery = 200 * time.Millisecond
	p := newProgress(1000, "working", true) // quiet: it prints nothing itself
	stop = heartbeat("lab")
	for i := range 250 {
		p.set(i, "")
		time.Sleep(2 * time.Millisecond)
	}
	stop()
	if out.Len() != 0 {
		t.Errorf("a command whose progress moves got heartbeat lines:\n%s", out.String())
	}
}

// TestRetrieverEvalProgress: retriever eval reports the queries of each
// system as it measures them, when stderr is not a terminal too.
func TestRetrieverEvalProgress(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 0
	data := retrieverData(t)
	code, stdout, stderr := attnlab(t, "retriever", "eval", "-data", data, "-model", "none")
	if code != 0 || !strings.Contains(stderr, "evaluating bm25 ") || !strings.Contains(stdout, "bm25") {
		t.Errorf("exit %d; want progress lines of the bm25 evaluation on stderr:\n%s\n%s", code, stderr, stdout)
	}
}
