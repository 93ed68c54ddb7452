package train

import (
	"context"
	"errors"
	"testing"
)

// TestLoopSavesAStepGivenUp: a step that gives up on the interrupt (the
// run as before it) is not counted, and the loop saves the steps before it.
func TestLoopSavesAStepGivenUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	step, saves := 0, 0
	l := &Loop{Steps: 10, Columns: []string{"step"},
		Step: func() (Record, error) {
			if step == 2 {
				cancel()
				return nil, ctx.Err()
			}
			step++
			return Record{"step": float64(step)}, nil
		},
		Save: func() error { saves++; return nil }}
	r, err := l.Run(ctx, 0)
	if !errors.Is(err, context.Canceled) || r.To != 2 || saves != 1 {
		t.Errorf("to step %d, %d saves, error %v; want step 2, 1 save, canceled", r.To, saves, err)
	}
}
