//go:build race

package attention_test

// raceEnabled: the race detector makes sync.Pool drop entries at random,
// so the tests that count allocations skip under it.
const raceEnabled = true
