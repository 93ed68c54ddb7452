package vec

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// countTask counts how often each piece runs; with nested set, every piece
// makes a parallel call of its own.
type countTask struct {
	runs   []atomic.Int32
	nested bool
}

func (t *countTask) Run(i int) {
	t.runs[i].Add(1)
	if t.nested {
		inner := &countTask{runs: make([]atomic.Int32, 3)}
		Parallel(3, inner)
		for j := range inner.runs {
			if inner.runs[j].Load() != 1 {
				panic("inner piece not run once")
			}
		}
	}
}

func TestParallelRunsEachPieceOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 7, 100} {
			for _, nested := range []bool{false, true} {
				task := &countTask{runs: make([]atomic.Int32, n), nested: nested}
				Parallel(n, task)
				for i := range task.runs {
					if r := task.runs[i].Load(); r != 1 {
						t.Fatalf("GOMAXPROCS=%d n=%d nested=%v: piece %d ran %d times", procs, n, nested, i, r)
					}
				}
			}
		}
	}
}

// Calls from several goroutines at once: one gets the helpers, the others
// run their pieces themselves; each piece still runs once.
func TestParallelConcurrentCalls(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				task := &countTask{runs: make([]atomic.Int32, 17)}
				Parallel(17, task)
				for i := range task.runs {
					if r := task.runs[i].Load(); r != 1 {
						t.Errorf("piece %d ran %d times", i, r)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

type nopTask struct{ sum atomic.Int64 }

func (t *nopTask) Run(i int) { t.sum.Add(int64(i)) }

func TestParallelAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop entries: allocations are not counted")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	task := &nopTask{}
	Parallel(4, task) // start the helpers
	if a := testing.AllocsPerRun(100, func() { Parallel(4, task) }); a != 0 {
		t.Errorf("Parallel allocates %v times per call", a)
	}
}

// The skinny products (decoding's shapes) allocate nothing once warm, split
// across goroutines or not.
func TestSkinnyGemmAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop entries: allocations are not counted")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, b, c := make([]float32, 4*512), make([]float32, 4096*512), make([]float32, 4*4096)
	for _, f := range []func(){
		func() { Gemm32(false, true, 1, 4096, 512, 1, a, 512, b, 512, 0, c, 4096) },   // parallel dot form
		func() { Gemm32(false, true, 4, 64, 64, 1, a, 64, b, 64, 0, c, 64) },          // serial dot form
		func() { Gemm32(false, false, 4, 4096, 512, 1, a, 512, b, 4096, 1, c, 4096) }, // parallel axpy form
	} {
		f()
		if n := testing.AllocsPerRun(20, f); n != 0 {
			t.Errorf("skinny gemm allocates %v times per call", n)
		}
	}
}
