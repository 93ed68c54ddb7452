package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/attnlab/attnlab/internal/vec"
)

// streamSize is the byte size of the arrays of the stream rows: 256 MiB,
// or eight times the largest CPU cache when that is more, so that the data
// comes from memory and not from a cache.
func streamSize() int {
	size := 256 << 20
	if c := largestCache(); 8*c > size {
		size = 8 * c
	}
	return size
}

// largestCache returns the size in bytes of CPU 0's largest cache as Linux
// reports it, or 0.
func largestCache() int {
	paths, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*/size")
	best := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			s, mult = strings.TrimSuffix(s, "K"), 1<<10
		case strings.HasSuffix(s, "M"):
			s, mult = strings.TrimSuffix(s, "M"), 1<<20
		}
		if n, err := strconv.Atoi(s); err == nil {
			best = max(best, n*mult)
		}
	}
	return best
}

// streamArrays are the source and destination of the stream rows.
type streamArrays struct{ x, y []float32 }

func newStreamArrays(size int) *streamArrays {
	s := &streamArrays{x: make([]float32, size/4), y: make([]float32, size/4)}
	for i := range s.x {
		s.x[i] = 1 // touch every page, so the first timed run does not fault them in
	}
	copy(s.y, s.x)
	return s
}

// streamSink keeps the sums of the read runs alive.
var streamSink [64]float32

// runner returns one stream run over the whole array, split into threads
// contiguous parts run at once: "read" sums the squares of x with vec.Dot32
// (x against itself: the SIMD kernel reads each element from memory once),
// "copy" is Go's copy from x into y.
func (s *streamArrays) runner(op string, threads int) func() {
	n := len(s.x)
	bounds := make([]int, threads+1)
	for t := range bounds {
		bounds[t] = n * t / threads / 16 * 16 // 64-byte boundaries: no cache line shared
	}
	bounds[threads] = n
	part := func(t int) {
		lo, hi := bounds[t], bounds[t+1]
		if op == "copy" {
			copy(s.y[lo:hi], s.x[lo:hi])
			return
		}
		streamSink[t%len(streamSink)] = vec.Dot32(s.x[lo:hi], s.x[lo:hi])
	}
	return func() {
		if threads == 1 {
			part(0)
			return
		}
		var wg sync.WaitGroup
		for t := range threads {
			wg.Go(func() { part(t) })
		}
		wg.Wait()
	}
}
