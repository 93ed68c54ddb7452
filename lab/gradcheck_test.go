package lab

import (
	"math"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/gradcheck"
)

// TestGradOptionsValidate: each number out of range is named by its flag;
// valid options, zeros for the defaults included, pass.
func TestGradOptionsValidate(t *testing.T) {
	valid := GradOptions{Op: "attention", Sizes: checks.Sizes{B: 2, T: 4, M: 3, N: 7, Dim: 16, Hq: 4, Hkv: 2, D: 8, Dv: 8, F: 24}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		change func(o *GradOptions)
		want   string
	}{
		{func(o *GradOptions) { o.Eps = -1e-6 }, "-eps -1e-06: want a finite number >= 0 (0: the default)"},
		{func(o *GradOptions) { o.Eps = math.Inf(1) }, "-eps +Inf: want a finite number >= 0 (0: the default)"},
		{func(o *GradOptions) { o.Rel = math.NaN() }, "-rel NaN: want a finite number >= 0 (0: the default)"},
		{func(o *GradOptions) { o.Directions = -1 }, "-directions -1: want >= 0"},
		{func(o *GradOptions) { o.Sizes.B = 0 }, "-b 0: want in [1, 1048576]"},
		{func(o *GradOptions) { o.Sizes.T = 0 }, "-t 0: want in [1, 1048576]"},
		{func(o *GradOptions) { o.Sizes.Hkv = 0 }, "-hkv 0: want in [1, 1048576]"},
		{func(o *GradOptions) { o.Sizes.F = -2 }, "-f -2: want in [1, 1048576]"},
		{func(o *GradOptions) { o.Sizes.Window = -1 }, "-window -1: want >= 0"},
		{func(o *GradOptions) { o.Sizes.Hq = 3 }, "-hq 3 is not a multiple of -hkv 2"},
	} {
		o := valid
		o.Options = gradcheck.Options{}
		tc.change(&o)
		if err := o.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
