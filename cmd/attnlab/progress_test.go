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
