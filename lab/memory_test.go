package lab

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/checks"
)

// TestFootprints: every operation has an estimate, and at sizes where
// allocation dominates it is at least what building the instance and its
// analytic gradients allocates. The allocation counter is the process's,
// so the measurement runs in a child process of its own: what earlier
// tests left running is not counted.
func TestFootprints(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are its own as much as the code's")
	}
	if os.Getenv("LAB_FOOTPRINTS_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFootprints$", "-test.v")
		cmd.Env = append(os.Environ(), "LAB_FOOTPRINTS_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the measuring process: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	for _, info := range Catalog() {
		if _, ok := footprints[info.Op]; !ok {
			t.Errorf("%s has no memory estimate", info.Op)
		}
	}
	for _, s := range []checks.Sizes{
		{B: 2, Hq: 4, Hkv: 2, M: 48, N: 96, D: 16, Dv: 8, T: 32, Dim: 64, F: 96, Causal: true},
		{B: 3, Hq: 2, Hkv: 1, M: 16, N: 16, D: 64, Dv: 32, T: 96, Dim: 32, F: 200, Causal: false},
		{B: 2, Hq: 4, Hkv: 2, M: 128, N: 128, D: 32, Dv: 32, T: 128, Dim: 128, F: 256, Causal: true}, // the scratch negligible
	} {
		for _, info := range Catalog() {
			fp, ok := footprints[info.Op]
			if !ok {
				continue
			}
			op, _ := Find(info.Op)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c64, _, err := op.Instance("", s, 1, false)
			if err != nil {
				t.Errorf("%s: %v", info.Op, err)
				continue
			}
			if _, _, err := checks.Prepare(c64, nil, 1); err != nil {
				t.Errorf("%s: %v", info.Op, err)
				continue
			}
			runtime.ReadMemStats(&after)
			got, est := int(after.TotalAlloc-before.TotalAlloc), (fp.elems(s)+scratch)*8
			if got > est {
				t.Errorf("%s at %+v: allocated %d bytes, estimated %d", info.Op, s, got, est)
			}
			t.Logf("%s: allocated %d bytes, estimated %d (%.1f×)", info.Op, got, est, float64(est)/float64(got))
		}
	}
}

// TestGradOptionsMemory: sizes within MaxSize whose instance cannot fit in
// memory are refused by Validate, naming the operation's flags; beyond
// MaxSize the flag is refused alone.
func TestGradOptionsMemory(t *testing.T) {
	base := GradOptions{Op: "attention", Sizes: checks.Sizes{B: 2, Hq: 4, Hkv: 2, M: 3, N: 7, D: 8, Dv: 8, T: 4, Dim: 16, F: 24}}
	for _, c := range []struct {
		set  func(*GradOptions)
		want string
	}{
		{func(o *GradOptions) { o.Sizes.M, o.Sizes.N = 100000, 100000 }, "-op attention at -b 2 -hq 4 -hkv 2 -m 100000 -n 100000 -d 8 -dv 8 needs"},
		{func(o *GradOptions) { o.Op, o.Sizes.Dim, o.Sizes.T = "rmsnorm", 100000, 100000 }, "-op rmsnorm at -b 2 -t 100000 -dim 100000 needs"},
		{func(o *GradOptions) { o.Op, o.Sizes.Dim = "linear", 1<<20 }, "-op linear at -b 2 -t 4 -dim 1048576 needs"},
		{func(o *GradOptions) { o.Sizes.M = MaxSize + 1 }, "-m 1048577: want in [1, 1048576]"},
		{func(o *GradOptions) { o.Sizes.F = 1e12 }, "-f 1000000000000: want in [1, 1048576]"},
	} {
		o := base
		c.set(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
