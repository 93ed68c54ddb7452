package gradcheck

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestContextStops: each check stops within an evaluation or two of ctx's
// cancellation, with ctx's error and every parameter restored bit for bit.
func TestContextStops(t *testing.T) {
	for name, run := range map[string]func(ctx context.Context, loss func() float64, ps []Param) error{
		"Check": func(ctx context.Context, loss func() float64, ps []Param) error {
			_, err := CheckContext(ctx, loss, ps, Options{})
			return err
		},
		"Check fixed": func(ctx context.Context, loss func() float64, ps []Param) error {
			_, err := CheckContext(ctx, loss, ps, Options{Fixed: true, Precise: true})
			return err
		},
		"Directional": func(ctx context.Context, loss func() float64, ps []Param) error {
			_, err := DirectionalContext(ctx, loss, ps, 1000, Options{})
			return err
		},
		"Sweep": func(ctx context.Context, loss func() float64, ps []Param) error {
			_, err := SweepContext(ctx, loss, ps, Decades(1e-1, 1e-12, 2), Options{})
			return err
		},
	} {
		for _, after := range []int{0, 3, 40} {
			x := make([]float64, 500)
			for i := range x {
				x[i] = float64(i) / 7
			}
			orig := slices.Clone(x)
			grad := make([]float64, len(x))
			for i := range grad {
				grad[i] = 2 * x[i]
			}
			ps := []Param{{Name: "x", X: x, Grad: grad}}
			ctx, cancel := context.WithCancel(context.Background())
			evals, atCancel := 0, -1
			loss := func() float64 {
				evals++
				if evals == after+1 {
					cancel()
					atCancel = evals
				}
				var l float64
				for _, v := range x {
					l += v * v
				}
				return l
			}
			if after == 0 {
				cancel()
				atCancel = 0
			}
			err := run(ctx, loss, ps)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s, cancelled after %d evaluations: error %v", name, after, err)
			}
			if extra := evals - atCancel; extra > 6 {
				t.Errorf("%s: %d evaluations after the cancellation", name, extra)
			}
			if !slices.Equal(x, orig) {
				t.Errorf("%s: parameters not restored", name)
			}
			cancel()
		}
	}
}
