//go:build race

package conform

// raceEnabled: the race detector slows the checks tenfold, so the
// property tests draw fewer cases under it.
const raceEnabled = true
