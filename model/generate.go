package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"unsafe"

	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/internal/vec"
)

// Sampling chooses the next token from logits. The zero value is greedy.
type Sampling struct {
	Temperature       float64 // 0: greedy (argmax); else logits are divided by it
	TopK              int     // keep the K most likely tokens (0: all)
	TopP              float64 // keep the smallest set whose probability reaches P (0 or 1: all)
	RepetitionPenalty float64 // > 1 discourages tokens seen in the window (CTRL's rule: positive logits divided, negative multiplied); 0 or 1: off
	RepetitionWindow  int     // how many recent tokens the penalty looks at (0: all)
	// NoRepeatNGram > 0 bans a token that would complete an n-gram of
	// that many tokens already in the row (prompt and new tokens), as
	// Hugging Face's no_repeat_ngram_size: a loop of N tokens or more
	// cannot start over. 0: off.
	NoRepeatNGram int
	Seed          uint64 // each row draws from its own generator seeded with Seed and the row
}

// Validate reports a setting out of range, naming the flag-like field.
func (s Sampling) Validate() error {
	switch {
	case !(s.Temperature >= 0) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("model: temperature %v, want a finite value >= 0", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("model: top-k %d, want >= 0", s.TopK)
	case !(s.TopP >= 0 && s.TopP <= 1):
		return fmt.Errorf("model: top-p %v, want 0..1", s.TopP)
	case !(s.RepetitionPenalty >= 0) || math.IsInf(s.RepetitionPenalty, 0):
		return fmt.Errorf("model: repetition penalty %v, want a finite value >= 0", s.RepetitionPenalty)
	case s.RepetitionWindow < 0:
		return fmt.Errorf("model: repetition window %d, want >= 0", s.RepetitionWindow)
	case s.NoRepeatNGram < 0 || s.NoRepeatNGram == 1:
		return fmt.Errorf("model: no-repeat n-gram %d, want 0 (off) or >= 2", s.NoRepeatNGram)
	}
	return nil
}

// Pick returns the next token for one row's logits, given the row's tokens
// so far (for the repetition penalty). It does not modify logits.
func (s Sampling) Pick(logits []float64, history []int, r *rand.Rand) int {
	z := slices.Clone(logits)
	if s.RepetitionPenalty > 0 && s.RepetitionPenalty != 1 {
		recent := history
		if s.RepetitionWindow > 0 && len(recent) > s.RepetitionWindow {
			recent = recent[len(recent)-s.RepetitionWindow:]
		}
		seen := map[int]bool{}
		for _, t := range recent {
			if t >= 0 && t < len(z) && !seen[t] {
				seen[t] = true
				if z[t] > 0 {
					z[t] /= s.RepetitionPenalty
				} else {
					z[t] *= s.RepetitionPenalty
				}
			}
		}
	}
	if s.NoRepeatNGram > 0 {
		banNGrams(z, history, s.NoRepeatNGram)
	}
	if s.Temperature == 0 {
		best := 0
		for i, v := range z {
			if v > z[best] {
				best = i
			}
		}
		return best
	}
	// Candidates by decreasing logit (ties by id, so the draw is
	// reproducible), then top-k, softmax at the temperature, top-p.
	ids := make([]int, len(z))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return z[ids[a]] > z[ids[b]] })
	if s.TopK > 0 && s.TopK < len(ids) {
		ids = ids[:s.TopK]
	}
	probs := make([]float64, len(ids))
	var sum float64
	for i, id := range ids {
		probs[i] = math.Exp((z[id] - z[ids[0]]) / s.Temperature)
		sum += probs[i]
	}
	if s.TopP > 0 && s.TopP < 1 {
		var acc float64
		for i, p := range probs {
			acc += p / sum
			if acc >= s.TopP {
				ids, probs = ids[:i+1], probs[:i+1]
				break
			}
		}
		sum = 0
		for _, p := range probs {
			sum += p
		}
	}
	u := r.Float64() * sum
	for i, p := range probs {
		u -= p
		if u < 0 {
			return ids[i]
		}
	}
	return ids[len(ids)-1]
}

// banNGrams sets to −∞ the logit of every token that would complete an
// n-gram already in history, unless that leaves no finite logit (then z is
// left as it was: a ban never leaves nothing to choose).
func banNGrams(z []float64, history []int, n int) {
	if len(history) < n {
		return
	}
	suffix := history[len(history)-(n-1):]
	var banned []int
	for i := 0; i+n-1 < len(history); i++ {
		if t := history[i+n-1]; t >= 0 && t < len(z) && !math.IsInf(z[t], -1) && slices.Equal(history[i:i+n-1], suffix) {
			banned = append(banned, t)
		}
	}
	if len(banned) == 0 {
		return
	}
	saved := make([]float64, len(banned))
	for i, t := range banned {
		saved[i], z[t] = z[t], math.Inf(-1)
	}
	if slices.ContainsFunc(z, func(v float64) bool { return !math.IsInf(v, -1) && !math.IsNaN(v) }) {
		return
	}
	for i, t := range banned {
		z[t] = saved[i]
	}
}

// GenerateOptions configures Generate.
type GenerateOptions struct {
	MaxNew   int // tokens to generate per row at most
	EOS      int // a row stops after producing this token; -1: none
	Sampling Sampling
	// First, when not nil, holds for each row the ids its first new token
	// must be one of (an empty or nil row: any): the others are left out
	// before sampling, as if their logits were −∞. Token healing takes a
	// prompt's last token back and asks for a first token that begins with
	// its text (tokenizer.Tokenizer.Extending).
	First [][]int
	// Stop, when not nil, is called after emit with each new token of a
	// row, the last included; true ends the row there (a stop string
	// appeared in its text).
	Stop func(row, token int) bool
}

// CheckGenerate returns the error of Generate for prompts continued by
// maxNew tokens, before any work: an empty prompt, a row that would pass
// max_position_embeddings, or a KV cache and logits that do not fit in the
// memory available.
func (m *Model[T]) CheckGenerate(prompts [][]int, maxNew int) error {
	c, L := m.Config, 0
	for r, pr := range prompts {
		if len(pr) == 0 {
			return fmt.Errorf("model: generate: prompt %d is empty", r)
		}
		if len(pr)+maxNew > c.MaxPositionEmbeddings {
			return fmt.Errorf("model: generate: prompt %d has %d tokens; with %d new ones it passes max_position_embeddings = %d",
				r, len(pr), maxNew, c.MaxPositionEmbeddings)
		}
		L = max(L, len(pr))
	}
	var z T
	B, capacity := len(prompts), L+max(maxNew-1, 0)
	cache := memlimit.Mul(2, c.NumHiddenLayers, B, c.NumKeyValueHeads, capacity, c.Head())
	// the prefill's logits and activations: a forward of B·L tokens
	need := memlimit.Mul(memlimit.Add(cache, c.ActsSize(B, L, true)), int(unsafe.Sizeof(z)))
	return memlimit.Check(fmt.Sprintf("model: generate: %d prompts of up to %d tokens and %d new ones", B, L, maxNew), need, "KV cache and activations")
}

// ErrNonFinite is wrapped by the errors of a computation whose values turned
// NaN or infinite from finite weights and inputs (Load refuses weights that
// are not finite): float32 overflowed somewhere.
var ErrNonFinite = errors.New("the computation is not finite (finite weights overflow)")

// Generate continues each prompt by up to o.MaxNew tokens, all rows at once:
// the prompts are left-padded to one length, prefilled in one chunk, then
// decoded one token per step through a KV cache. emit, when not nil, is
// called with each new token as it is chosen (streaming). Rows draw from
// their own random generators, so a row's continuation does not depend on
// the other rows of the batch. It returns the new tokens of every row; when
// ctx is done it stops before the next token and returns those so far with
// ctx's error. Logits that are not finite stop it the same way, with an
// error wrapping ErrNonFinite that names the row, the step and the token id
// (sampling from them would choose garbage).
func (m *Model[T]) Generate(ctx context.Context, p *Params[T], prompts [][]int, o GenerateOptions, emit func(row, token int)) ([][]int, error) {
	if err := o.Sampling.Validate(); err != nil {
		return nil, err
	}
	if len(prompts) == 0 || o.MaxNew < 0 {
		return nil, fmt.Errorf("model: generate: %d prompts, %d new tokens", len(prompts), o.MaxNew)
	}
	B, L := len(prompts), 0
	if o.First != nil && len(o.First) != B {
		return nil, fmt.Errorf("model: generate: first-token sets for %d rows, want %d", len(o.First), B)
	}
	for r, ids := range o.First {
		for _, id := range ids {
			if id < 0 || id >= m.Config.VocabSize {
				return nil, fmt.Errorf("model: generate: row %d: first-token id %d outside the vocabulary [0, %d)", r, id, m.Config.VocabSize)
			}
		}
	}
	if err := m.CheckGenerate(prompts, o.MaxNew); err != nil {
		return nil, err
	}
	for _, pr := range prompts {
		L = max(L, len(pr))
	}
	tokens, valid := make([]int, B*L), make([]bool, B*L)
	for r, pr := range prompts {
		copy(tokens[r*L+L-len(pr):], pr)
		for t := L - len(pr); t < L; t++ {
			valid[r*L+t] = true
		}
	}
	V := m.Config.VocabSize
	cache := m.NewCache(B, L+max(o.MaxNew-1, 0))
	// the prompt's logits at its last positions only (StepLast)
	tail := LastRows(L)
	logits := make([]T, B*tail*V)
	if err := m.StepLast(logits, cache, p, tokens, valid, L); err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, B)
	history := make([][]int, B)
	for r := range rngs {
		rngs[r] = rand.New(rand.NewPCG(o.Sampling.Seed, uint64(r)))
		history[r] = slices.Clone(prompts[r])
	}
	out := make([][]int, B)
	done := make([]bool, B)
	last := make([]float64, V)
	next, nextValid := make([]int, B), make([]bool, B)
	for step := range o.MaxNew {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		M := tail // positions per row in logits
		if step > 0 {
			M = 1
		}
		live := 0
		for r := range B {
			next[r], nextValid[r] = 0, false
			if done[r] {
				continue
			}
			row := logits[(r*M+M-1)*V : (r*M+M)*V] // the row's last position
			if i := vec.NonFinite(row); i >= 0 {
				return out, fmt.Errorf("model: generate: row %d, new token %d: the logit of token id %d is %v: %w", r, step+1, i, row[i], ErrNonFinite)
			}
			for i, v := range row {
				last[i] = float64(v)
			}
			pick := last
			if step == 0 && o.First != nil && len(o.First[r]) > 0 {
				pick = make([]float64, V)
				for i := range pick {
					pick[i] = math.Inf(-1)
				}
				for _, id := range o.First[r] {
					pick[id] = last[id]
				}
			}
			tok := o.Sampling.Pick(pick, history[r], rngs[r])
			out[r] = append(out[r], tok)
			history[r] = append(history[r], tok)
			if emit != nil {
				emit(r, tok)
			}
			stop := o.Stop != nil && o.Stop(r, tok)
			if tok == o.EOS || len(out[r]) == o.MaxNew || stop {
				done[r] = true
				continue
			}
			next[r], nextValid[r] = tok, true
			live++
		}
		if live == 0 {
			break
		}
		logits = logits[:B*V]
		if err := m.Step(logits, cache, p, next, nextValid, 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}
