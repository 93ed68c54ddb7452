//go:build race

package lab

// raceEnabled: the race detector makes sync.Pool drop entries at random
// and allocates for itself, so the test that counts allocations skips
// under it.
const raceEnabled = true
