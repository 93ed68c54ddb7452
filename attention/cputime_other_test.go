//go:build !unix

package attention_test

import "time"

// cpuTime is not measured here; the benchmarks then omit GFLOP/cpu-s.
func cpuTime() time.Duration { return 0 }
