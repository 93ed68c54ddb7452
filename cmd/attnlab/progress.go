package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/attnlab/attnlab/train"
)

// progressOut is where progress goes: stderr, so that stdout stays the
// result. A variable for the tests.
var progressOut io.Writer = os.Stderr

// logEvery is how often progress is printed as a line when stderr is not
// a terminal (a log file, CI): a long run still says where it is.
var logEvery = 30 * time.Second

// progress shows how far a long task is: a bar on a terminal, else a line
// every logEvery; nothing with quiet.
type progress struct {
	bar          *progressbar.ProgressBar
	what         string
	total        int
	start, last  time.Time
	quiet, lines bool
	term         *os.File // the terminal of the bar, made at the first set

	// The first progress reported and when: the rate, and so the time
	// left, counts from there (a resumed run starts far from 0).
	first   int
	firstAt time.Time
	seen    bool
}

func newProgress(total int, what string, quiet bool) *progress {
	p := &progress{what: what, total: total, start: time.Now(), last: time.Now(), quiet: quiet}
	if quiet {
		return p
	}
	if f, ok := progressOut.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.term = f
			return p
		}
	}
	p.lines = true
	return p
}

// set moves the progress to done, with a description of the state.
func (p *progress) set(done int, desc string) {
	lastProgress.Store(time.Now().UnixNano())
	if !p.seen {
		p.seen, p.first, p.firstAt = true, done, time.Now()
		if p.term != nil {
			// The bar's own estimate counts from 0: only a bar that starts
			// there predicts the time left.
			f := p.term
			p.bar = progressbar.NewOptions(p.total, progressbar.OptionSetWriter(f), progressbar.OptionSetWidth(24),
				progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(done == 0), progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionSetDescription(p.what), progressbar.OptionOnCompletion(func() { fmt.Fprintln(f) }))
		}
	}
	switch {
	case p.quiet:
	case p.bar != nil:
		if desc != "" {
			p.bar.Describe(p.what + " " + desc)
		}
		p.bar.Set(done)
	case p.lines && time.Since(p.last) >= logEvery:
		p.last = time.Now()
		elapsed := time.Since(p.start)
		eta := ""
		if done > p.first && done < p.total {
			rate := time.Since(p.firstAt) / time.Duration(done-p.first)
			eta = fmt.Sprintf(", about %s left", (rate * time.Duration(p.total-done)).Round(time.Second))
		}
		fmt.Fprintf(progressOut, "%s %d/%d %s(%s%s)\n", p.what, done, p.total, desc+" ", elapsed.Round(time.Second), eta)
	}
}

// func returns set as a callback of done alone.
func (p *progress) fn() func(done int) { return func(done int) { p.set(done, "") } }

// trainProgress is a loop's progress callback on p.
func (p *progress) trainProgress() func(train.Progress) {
	return func(pr train.Progress) {
		desc := fmt.Sprintf("loss %.3f", pr.Record["loss"])
		if acc, ok := pr.Record["accuracy"]; ok {
			desc += fmt.Sprintf("  acc %.2f", acc)
		}
		p.set(pr.Step, fmt.Sprintf("%s  %5.0f tok/s", desc, pr.TokensPerSec))
	}
}

// lastProgress is when a progress was last set (Unix nanoseconds): the
// heartbeat of a command stays silent while its own progress speaks.
var lastProgress atomic.Int64

// heartbeatEvery is how often a long command with no progress of its own
// says it is still running. A variable for the tests.
var heartbeatEvery = 30 * time.Second

// heartbeat prints "attnlab NAME: running, 1m30s so far" to progressOut
// every heartbeatEvery in which no progress was set, until stop is
// called: a long command (the lab, conform, bench…) is never silent for
// minutes, whatever stderr is.
func heartbeat(name string) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, lastProgress.Load())) >= heartbeatEvery {
					fmt.Fprintf(progressOut, "attnlab %s: running, %s so far\n", name, now.Sub(start).Round(time.Second))
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
