//go:build race

package model

// raceEnabled: the race detector makes sync.Pool drop entries at random,
// so the tests that count allocations skip under it.
const raceEnabled = true
