package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestBatchedGenerationEqualsOneByOne: left-padded batched decoding gives each
// row the continuation it gets alone, greedy and sampled.
func TestBatchedGenerationEqualsOneByOne(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 7)
	prompts := [][]int{{3, 9, 4}, {6, 1, 1, 8, 2}, {5}}
	for _, s := range []Sampling{{}, {Temperature: 0.8, TopK: 5, TopP: 0.9, RepetitionPenalty: 1.3, RepetitionWindow: 4, Seed: 11}} {
		o := GenerateOptions{MaxNew: 6, EOS: -1, Sampling: s}
		var streamed []string
		batch, err := m.Generate(context.Background(), p, prompts, o, func(r, tok int) { streamed = append(streamed, fmt.Sprint(r, ":", tok)) })
		if err != nil {
			t.Fatal(err)
		}
		if len(streamed) != 3*6 {
			t.Errorf("streamed %d tokens, want 18", len(streamed))
		}
		for r, pr := range prompts {
			// a row's generator is seeded by its index: generate it alone at
			// that index
			if s.Temperature != 0 && r != 0 {
				continue // a lone prompt draws from row 0's generator
			}
			alone, err := m.Generate(context.Background(), p, [][]int{pr}, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(alone[0]) != fmt.Sprint(batch[r]) {
				t.Errorf("sampling %+v, row %d: batched %v, alone %v", s, r, batch[r], alone[0])
			}
		}
	}
}

func TestSampledRowsAreIndependentOfTheBatch(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 7)
	s := Sampling{Temperature: 1, Seed: 3}
	o := GenerateOptions{MaxNew: 8, EOS: -1, Sampling: s}
	a, _ := m.Generate(context.Background(), p, [][]int{{3, 9, 4}, {5}}, o, nil)
	b, _ := m.Generate(context.Background(), p, [][]int{{3, 9, 4}, {6, 1, 1, 8, 2}}, o, nil)
	if fmt.Sprint(a[0]) != fmt.Sprint(b[0]) {
		t.Errorf("row 0 depends on row 1: %v vs %v", a[0], b[0])
	}
}

func TestGenerateStopsAtEOS(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 7)
	free, _ := m.Generate(context.Background(), p, [][]int{{3, 9, 4}}, GenerateOptions{MaxNew: 6, EOS: -1}, nil)
	eos := free[0][2]
	stopped, _ := m.Generate(context.Background(), p, [][]int{{3, 9, 4}}, GenerateOptions{MaxNew: 6, EOS: eos}, nil)
	want := free[0][:3]
	if i := indexOf(free[0], eos); i < 2 {
		want = free[0][:i+1]
	}
	if fmt.Sprint(stopped[0]) != fmt.Sprint(want) {
		t.Errorf("with EOS %d: %v, want %v", eos, stopped[0], want)
	}
}

func indexOf(s []int, x int) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

func TestGenerateErrors(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	long := make([]int, 60)
	for _, tc := range []struct {
		prompts [][]int
		o       GenerateOptions
		want    string
	}{
		{[][]int{long}, GenerateOptions{MaxNew: 10}, "passes max_position_embeddings = 64"},
		{[][]int{{1, 99}}, GenerateOptions{MaxNew: 1}, "outside the vocabulary"},
		{[][]int{{}}, GenerateOptions{MaxNew: 1}, "prompt 0 is empty"},
		{[][]int{{1}}, GenerateOptions{MaxNew: 1, Sampling: Sampling{TopP: 2}}, "top-p"},
	} {
		_, err := m.Generate(context.Background(), p, tc.prompts, tc.o, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestPickRespectsTopKAndPenalty(t *testing.T) {
	logits := []float64{0, 5, 4.9, -1}
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		if tok := (Sampling{Temperature: 1, TopK: 2}).Pick(logits, nil, r); tok != 1 && tok != 2 {
			t.Fatalf("top-k 2 picked %d", tok)
		}
	}
	if tok := (Sampling{RepetitionPenalty: 2}).Pick(logits, []int{1}, r); tok != 2 {
		t.Errorf("greedy with token 1 penalised picked %d, want 2", tok)
	}
}

// TestGenerateFirstTokenSets: a row's first new token is the most likely
// of its allowed set (greedy) or drawn from it (sampled), even when the
// unconstrained choice lies outside it; the tokens after it are free, and
// a row without a set is unchanged.
func TestGenerateFirstTokenSets(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 7)
	prompts := [][]int{{3, 9, 4}, {6, 1, 1, 8, 2}}
	free, err := m.Generate(context.Background(), p, prompts, GenerateOptions{MaxNew: 4, EOS: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the allowed set of row 0: every id but the free choice's, so the
	// first token must change
	var allowed []int
	for id := range m.Config.VocabSize {
		if id != free[0][0] {
			allowed = append(allowed, id)
		}
	}
	for _, s := range []Sampling{{}, {Temperature: 1, Seed: 5}} {
		got, err := m.Generate(context.Background(), p, prompts, GenerateOptions{MaxNew: 4, EOS: -1, Sampling: s, First: [][]int{allowed, nil}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got[0][0] == free[0][0] {
			t.Errorf("sampling %+v: row 0 began with %d, outside its allowed set", s, got[0][0])
		}
		if s.Temperature == 0 && fmt.Sprint(got[1]) != fmt.Sprint(free[1]) {
			t.Errorf("row 1 (no set): %v, want the unconstrained %v", got[1], free[1])
		}
	}
	// greedy within a one-id set: that id, then the model's own choices
	one, err := m.Generate(context.Background(), p, prompts[:1], GenerateOptions{MaxNew: 3, EOS: -1, First: [][]int{{7}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cont, err := m.Generate(context.Background(), p, [][]int{append([]int{3, 9, 4}, 7)}, GenerateOptions{MaxNew: 2, EOS: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if one[0][0] != 7 || fmt.Sprint(one[0][1:]) != fmt.Sprint(cont[0]) {
		t.Errorf("first token forced to 7: %v, want 7 then %v", one[0], cont[0])
	}
	if _, err := m.Generate(context.Background(), p, prompts, GenerateOptions{MaxNew: 2, EOS: -1, First: [][]int{{m.Config.VocabSize}, nil}}, nil); err == nil {
		t.Errorf("a first-token id outside the vocabulary: no error")
	}
}

// TestGenerateRefusesNonFiniteLogits: finite float32 weights whose product
// overflows give infinite logits; Generate stops with an error naming the
// row and the step instead of sampling a token from them.
func TestGenerateRefusesNonFiniteLogits(t *testing.T) {
	m, _ := New[float32](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	for i := range p.Norm {
		p.Norm[i] = 1e30 // the final norm's output ~1e30, the head's 1e30: 1e60 overflows float32
	}
	for i := range p.LMHead {
		p.LMHead[i] = 1e30
	}
	emitted := 0
	_, err := m.Generate(context.Background(), p, [][]int{{1, 2}, {3}}, GenerateOptions{MaxNew: 4}, func(int, int) { emitted++ })
	want := "model: generate: row 0, new token 1: the logit of token id 0 is"
	if !errors.Is(err, ErrNonFinite) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want an ErrNonFinite beginning %q", err, want)
	}
	if emitted != 0 {
		t.Errorf("%d tokens emitted from non-finite logits", emitted)
	}
}

// TestPickGreedyIsArgmax: temperature 0 without a penalty or an n-gram ban
// is exactly the argmax of the logits (first of equals), whatever the
// history.
func TestPickGreedyIsArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for trial := range 500 {
		logits := make([]float64, 1+r.IntN(50))
		for i := range logits {
			logits[i] = float64(r.IntN(7)) // ties on purpose
		}
		history := make([]int, r.IntN(20))
		for i := range history {
			history[i] = r.IntN(len(logits))
		}
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		for _, s := range []Sampling{{}, {RepetitionPenalty: 1, RepetitionWindow: 64, TopK: 3, TopP: 0.5}} {
			if got := s.Pick(logits, history, r); got != best {
				t.Fatalf("trial %d, %+v: picked %d, the argmax is %d", trial, s, got, best)
			}
		}
	}
}

// TestPickBansRepeatedNGrams: with NoRepeatNGram n, a token that would
// complete an n-gram already in the history is never picked, greedy or
// sampled; one that completes a new n-gram is; when the ban would leave
// nothing, it is lifted.
func TestPickBansRepeatedNGrams(t *testing.T) {
	logits := []float64{0, 1, 2, 9, 3} // 3 is the favourite, 4 the next
	history := []int{1, 2, 3, 0, 1, 2} // "1 2" was followed by 3
	if got := (Sampling{}).Pick(logits, history, nil); got != 3 {
		t.Fatalf("without the ban: %d, want 3", got)
	}
	if got := (Sampling{NoRepeatNGram: 3}).Pick(logits, history, nil); got != 4 {
		t.Errorf("3-gram ban: %d, want 4 (1 2 3 was seen)", got)
	}
	if got := (Sampling{NoRepeatNGram: 4}).Pick(logits, history, nil); got != 3 {
		t.Errorf("4-gram ban: %d, want 3 (0 1 2 3 was never seen)", got)
	}
	r := rand.New(rand.NewPCG(3, 3))
	for range 300 {
		if got := (Sampling{NoRepeatNGram: 2, Temperature: 2}).Pick(logits, history, r); got == 3 {
			t.Fatalf("sampled with a 2-gram ban: picked 3, which followed 2 before")
		}
	}
	// every candidate banned: the ban is lifted
	if got := (Sampling{NoRepeatNGram: 2}).Pick([]float64{1, 5}, []int{0, 1, 0, 0}, nil); got != 1 {
		t.Errorf("a ban of every token: %d, want the unbanned argmax 1", got)
	}
	if err := (Sampling{NoRepeatNGram: 1}).Validate(); err == nil {
		t.Error("a 1-gram ban (no token may ever repeat) was accepted")
	}
}

// TestGenerateStop: a row ends after the token Stop says so of, the other
// rows going on.
func TestGenerateStop(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 7)
	prompts := [][]int{{3, 9, 4}, {5}}
	free, _ := m.Generate(context.Background(), p, prompts, GenerateOptions{MaxNew: 6, EOS: -1}, nil)
	n := 0
	stop := func(row, tok int) bool {
		if row == 0 {
			n++
		}
		return row == 0 && n == 2
	}
	got, err := m.Generate(context.Background(), p, prompts, GenerateOptions{MaxNew: 6, EOS: -1, Stop: stop}, nil)
	if err != nil || fmt.Sprint(got[0]) != fmt.Sprint(free[0][:2]) || fmt.Sprint(got[1]) != fmt.Sprint(free[1]) {
		t.Errorf("stopped after row 0's second token: %v (%v), want %v and %v", got, err, free[0][:2], free[1])
	}
}
