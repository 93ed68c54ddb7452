package rerank

import (
	"context"
	"errors"
	"math"
	"testing"
)

// countdown is a context whose Err turns to Canceled after n calls: an
// interrupt in the middle of whatever checks it.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestStepGivesUp: a step interrupted between two sequences returns the
// context's error and leaves the trainer as it was (weights, place in the
// data, the negatives' random state): the steps after it are those of a
// trainer never interrupted, bit for bit.
func TestStepGivesUp(t *testing.T) {
	ps := pairs(16)
	for _, after := range []int{0, 4, 11} {
		trainer := func() *Trainer {
			m := tinyReranker(t, ps)
			tr, err := NewTrainer(m, NewData(m, ps, allNegatives(len(ps))), options(4, 3, 4))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		want, got := trainer(), trainer()
		if _, err := got.TrainStepContext(&countdown{context.Background(), after}); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted after %d checks: %v", after, err)
		}
		for range 2 {
			if _, err := want.TrainStep(); err != nil {
				t.Fatal(err)
			}
			if _, err := got.TrainStep(); err != nil {
				t.Fatal(err)
			}
		}
		if got.Step != want.Step {
			t.Errorf("step %d, want %d", got.Step, want.Step)
		}
		for i := range want.params {
			for j, v := range want.params[i].X {
				if w := got.params[i].X[j]; math.Float32bits(w) != math.Float32bits(v) {
					t.Fatalf("interrupted after %d checks: %s[%d] = %g, want %g", after, want.params[i].Name, j, w, v)
				}
			}
		}
	}
}
