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
	best := 0
	for _, c := range cpuCaches() {
		best = max(best, c.size)
	}
	return best
}

// cacheSize returns the size in bytes of CPU 0's unified or data cache of
// the given level (2: per core here; 3: shared), or 0 when Linux does not
// say.
func cacheSize(level int) int {
	for _, c := range cpuCaches() {
		if c.level == level && c.kind != "Instruction" {
			return c.size
		}
	}
	return 0
}

type cpuCache struct {
	level, size int
	kind        string
}

// cpuCaches lists CPU 0's caches from /sys/devices/system/cpu/cpu0/cache.
func cpuCaches() []cpuCache {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	var out []cpuCache
	for _, d := range dirs {
		read := func(name string) string {
			data, _ := os.ReadFile(filepath.Join(d, name))
			return strings.TrimSpace(string(data))
		}
		s := read("size")
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			s, mult = strings.TrimSuffix(s, "K"), 1<<10
		case strings.HasSuffix(s, "M"):
			s, mult = strings.TrimSuffix(s, "M"), 1<<20
		}
		n, err := strconv.Atoi(s)
		level, err2 := strconv.Atoi(read("level"))
		if err == nil && err2 == nil {
			out = append(out, cpuCache{level: level, size: n * mult, kind: read("type")})
		}
	}
	return out
}

// The levels a working set lives in, from the caches' sizes: a set read by
// threads threads, each its own part, fits in L2 when each part takes at
// most three quarters of a core's L2, in L3 when the whole takes at most
// three quarters of it (the rest holds everything else), and comes from
// DRAM otherwise.
const (
	levelL2   = "L2"
	levelL3   = "L3"
	levelDRAM = "DRAM"
)

// cacheLevel returns the level a working set of bytes read by threads
// threads lives in (levelDRAM when the caches are unknown).
func cacheLevel(bytes float64, threads, l2, l3 int) string {
	switch {
	case l2 > 0 && bytes/float64(threads) <= 0.75*float64(l2):
		return levelL2
	case l3 > 0 && bytes <= 0.75*float64(l3):
		return levelL3
	}
	return levelDRAM
}

// levelSize is the array size of the stream read row of a cache level.
type levelSize struct {
	level string
	size  int
}

// cacheLevelSizes are the array sizes of the stream read rows that measure
// the bandwidth of the caches with threads threads: half of each core's L2
// per thread, and a quarter of L3 (the DRAM rows use streamSize). A level
// whose size Linux does not report has no row.
func cacheLevelSizes(threads int) []levelSize {
	var out []levelSize
	if l2 := cacheSize(2); l2 > 0 {
		out = append(out, levelSize{levelL2, threads * l2 / 2})
	}
	if l3 := cacheSize(3); l3 > 0 {
		out = append(out, levelSize{levelL3, l3 / 4})
	}
	return out
}

// streamPasses is the number of passes over an array of size bytes that
// one stream run makes: enough to read 64 MiB, so that a run of a cached
// array lasts a millisecond or more and the threads' start is noise.
func streamPasses(size int) int { return max(1, (64<<20)/size) }

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

// runner returns one stream run over the whole array, passes times, split
// into threads contiguous parts run at once (each thread reads its own
// part every pass, so a part that fits its core's cache stays there):
// "read" sums the squares of x with vec.Dot32 (x against itself: the SIMD
// kernel reads each element from memory once), "copy" is Go's copy from x
// into y.
func (s *streamArrays) runner(op string, threads, passes int) func() {
	n := len(s.x)
	bounds := make([]int, threads+1)
	for t := range bounds {
		bounds[t] = n * t / threads / 16 * 16 // 64-byte boundaries: no cache line shared
	}
	bounds[threads] = n
	part := func(t int) {
		lo, hi := bounds[t], bounds[t+1]
		for range passes {
			if op == "copy" {
				copy(s.y[lo:hi], s.x[lo:hi])
				continue
			}
			streamSink[t%len(streamSink)] += vec.Dot32(s.x[lo:hi], s.x[lo:hi])
		}
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
