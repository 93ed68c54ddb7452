package dense

import (
	"context"
	"errors"
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

// TestStepGivesUp: a step interrupted between two sequences, in the
// forward or in the backward, returns the context's error and leaves the
// trainer as it was: the steps after it are those of a trainer never
// interrupted, bit for bit.
func TestStepGivesUp(t *testing.T) {
	for _, chunk := range []int{0, 3} {
		for _, after := range []int{0, 5, 14} {
			want, got := chunkTrainer(t, 1, chunkOptions(chunk)), chunkTrainer(t, 1, chunkOptions(chunk))
			if _, err := got.TrainStepContext(&countdown{context.Background(), after}); !errors.Is(err, context.Canceled) {
				t.Fatalf("chunk %d, interrupted after %d checks: %v", chunk, after, err)
			}
			if got.Step != 0 {
				t.Errorf("chunk %d: the step given up counted: step %d", chunk, got.Step)
			}
			for range 2 {
				if _, err := want.TrainStep(); err != nil {
					t.Fatal(err)
				}
				if _, err := got.TrainStep(); err != nil {
					t.Fatal(err)
				}
			}
			if d := sameBits(want, got); d != "" {
				t.Errorf("chunk %d, interrupted after %d checks: %s", chunk, after, d)
			}
		}
	}
}
