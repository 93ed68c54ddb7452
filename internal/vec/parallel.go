package vec

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A Task is work cut into pieces that may run concurrently.
type Task interface {
	// Run does piece i. Pieces must not depend on one another's order.
	Run(i int)
}

// Parallel calls t.Run(i) for every i in [0, n) on up to GOMAXPROCS
// goroutines, the caller's among them, and returns when every piece is
// done. Pieces are handed out in order to whichever goroutine is free.
//
// The helper goroutines are started once and kept, so that a call
// allocates nothing: decoding a token makes dozens of parallel calls, each
// a few microseconds long. One call at a time uses the helpers; a call made
// while another is in progress (from a piece of it, or from another
// goroutine) runs its pieces on its own goroutine, which gives the same
// results, since a piece's work does not depend on who runs it.
func Parallel(n int, t Task) {
	helpers := min(runtime.GOMAXPROCS(0), n) - 1
	if helpers <= 0 || !crew.busy.TryLock() {
		for i := range n {
			t.Run(i)
		}
		return
	}
	defer crew.busy.Unlock()
	crew.hire(helpers)
	crew.task, crew.n = t, int64(n)
	crew.next.Store(0)
	for _, w := range crew.workers[:helpers] {
		w.start <- struct{}{}
	}
	crew.work()
	for _, w := range crew.workers[:helpers] {
		<-w.done
	}
	crew.task = nil
}

// crew is the pool of helper goroutines behind Parallel; busy is held by
// the call that uses it.
var crew pool

type pool struct {
	busy    sync.Mutex
	workers []*worker
	task    Task
	n       int64
	next    atomic.Int64
}

type worker struct {
	start, done chan struct{}
}

// hire starts helpers until there are n.
func (p *pool) hire(n int) {
	for len(p.workers) < n {
		w := &worker{start: make(chan struct{}), done: make(chan struct{})}
		p.workers = append(p.workers, w)
		go func() {
			for range w.start {
				p.work()
				w.done <- struct{}{}
			}
		}()
	}
}

// work runs pieces until none is left.
func (p *pool) work() {
	for {
		i := p.next.Add(1) - 1
		if i >= p.n {
			return
		}
		p.task.Run(int(i))
	}
}
