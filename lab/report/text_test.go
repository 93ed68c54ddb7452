package report

import (
	"strings"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
)

// TestGradSweep: the table of attnlab gradcheck -sweep, with no slope on
// the first row, and the row of the smallest error as the best ε.
func TestGradSweep(t *testing.T) {
	rows := gradcheck.SweepRows{
		{Eps: 1e-2, MaxAbs: 1e-6, MaxRel: 2e-6},
		{Eps: 1e-3, MaxAbs: 1e-8, MaxRel: 3e-8}, // slope log(1e-2)/log(1e-1) = +2
		{Eps: 1e-4, MaxAbs: 1e-7, MaxRel: 4e-7}, // slope −1
		{Eps: 1e-5, MaxAbs: 0, MaxRel: 0},       // slope NaN: the error is zero
	}
	var b strings.Builder
	if err := GradSweep(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `         ε      max abs      max rel    slope
   1.0e-02     1.00e-06     2.00e-06         
   1.0e-03     1.00e-08     3.00e-08    +2.00
   1.0e-04     1.00e-07     4.00e-07    -1.00
   1.0e-05     0.00e+00     0.00e+00     +NaN
best ε = 1.0e-05 (max abs 0.00e+00)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
