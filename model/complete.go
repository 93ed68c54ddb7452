package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/attnlab/attnlab/tokenizer"
)

// CompleteOptions describe the completion of one text prompt, as attnlab
// generate makes it.
type CompleteOptions struct {
	MaxNew   int // new tokens at most
	Sampling Sampling
	// Heal takes the prompt's last token back and makes the first new
	// token begin with its text (token healing), so that a prompt that
	// stops inside what the tokenizer learned as one token reads as if it
	// had been tokenised with what follows.
	Heal bool
	// Truncate drops the prompt's first tokens when the prompt and MaxNew
	// do not fit in the model's positions; without it such a prompt is a
	// *FitError.
	Truncate bool
	Stops    []string // the generation ends where its text first contains one (StopStrings)
}

// healing reports whether o heals a prompt of n tokens: a token taken back
// must leave one, and there must be a new token to replace it.
func (o CompleteOptions) healing(n int) bool { return o.Heal && n > 1 && o.MaxNew > 0 }

// ErrEmptyPrompt is the error of FitPrompt for a text that encodes to no
// token.
var ErrEmptyPrompt = errors.New("the prompt is empty: nothing to continue")

// FitError is the error of FitPrompt for a prompt that does not fit in the
// model's positions with the new tokens.
type FitError struct {
	PromptTokens, MaxNew int
	Need, Positions      int  // positions needed (the healed token counted once), and the model's
	Truncate             bool // truncation was asked, but MaxNew leaves no position for the prompt
}

func (e *FitError) Error() string {
	if e.Truncate {
		return fmt.Sprintf("%d new tokens: the model has %d positions, and truncation keeps at least one for the prompt", e.MaxNew, e.Positions)
	}
	return fmt.Sprintf("a prompt of %d tokens and %d new ones need %d positions, the model has %d", e.PromptTokens, e.MaxNew, e.Need, e.Positions)
}

// FitPrompt encodes text and fits it in the model's positions with
// o.MaxNew new tokens: the prompt's tokens, and how many of its first
// tokens o.Truncate dropped. A prompt that does not fit without
// truncation is a *FitError, an empty one ErrEmptyPrompt.
func (lm *LM[T]) FitPrompt(text string, o CompleteOptions) (prompt []int, dropped int, err error) {
	prompt = lm.Tok.Encode([]byte(text))
	if len(prompt) == 0 {
		return nil, 0, ErrEmptyPrompt
	}
	positions := lm.Config.MaxPositionEmbeddings
	need := len(prompt) + o.MaxNew
	if o.healing(len(prompt)) {
		need-- // the token taken back is generated again
	}
	if need <= positions {
		return prompt, 0, nil
	}
	fe := &FitError{PromptTokens: len(prompt), MaxNew: o.MaxNew, Need: need, Positions: positions}
	if !o.Truncate {
		return nil, 0, fe
	}
	if o.MaxNew >= positions {
		fe.Truncate = true
		return nil, 0, fe
	}
	dropped = need - positions
	return prompt[dropped:], dropped, nil
}

// CheckComplete returns the error of Complete for prompt, before any work
// (Model.CheckGenerate's, the healed token taken back).
func (lm *LM[T]) CheckComplete(prompt []int, o CompleteOptions) error {
	if o.healing(len(prompt)) {
		prompt = prompt[:len(prompt)-1]
	}
	return lm.CheckGenerate([][]int{prompt}, o.MaxNew)
}

// Completion is what Complete generated.
type Completion struct {
	Text   string // the new text, without the stop string and what followed it
	IDs    []int  // the new tokens, the healed token's replacement first
	Tokens int    // tokens emitted, the end-of-text token included
	// Prefilled is the prompt's tokens read before the first new one: all
	// of them, less the token healing took back.
	Prefilled int
	// Stop says why the generation ended (StopReason): "eos", "length" or
	// "stop", with StopString the stop string found.
	Stop, StopString string
	// Start is when the generation began; First and Last when its first
	// and last tokens were chosen (zero without any).
	Start, First, Last time.Time
}

// Timing is a completion's speed: prefill, the prompt's tokens read before
// the first new token and the time to it; decode, the new tokens after the
// first and the time they took. A rate is 0 when its time is.
type Timing struct {
	PrefillTokens          int
	PrefillSeconds         float64
	PrefillTokensPerSecond float64
	DecodeTokens           int
	DecodeSeconds          float64
	DecodeTokensPerSecond  float64
}

// Timing returns c's speed from its clock; the zero Timing for a
// completion without tokens.
func (c *Completion) Timing() Timing {
	if c.Tokens == 0 {
		return Timing{}
	}
	t := Timing{PrefillTokens: c.Prefilled, PrefillSeconds: c.First.Sub(c.Start).Seconds(),
		DecodeTokens: c.Tokens - 1, DecodeSeconds: c.Last.Sub(c.First).Seconds()}
	if t.PrefillSeconds > 0 {
		t.PrefillTokensPerSecond = float64(t.PrefillTokens) / t.PrefillSeconds
	}
	if t.DecodeSeconds > 0 {
		t.DecodeTokensPerSecond = float64(t.DecodeTokens) / t.DecodeSeconds
	}
	return t
}

// Complete continues prompt (FitPrompt's tokens) by up to o.MaxNew tokens
// through the KV cache, healing its last token with o.Heal and stopping
// at the end-of-text token or at one of o.Stops. out, when not nil, is
// called with each piece of new text as soon as it is known not to begin
// a stop string (streaming). An interrupt (ctx done) or logits that are not
// finite (ErrNonFinite) stop it with the error and the completion so far.
func (lm *LM[T]) Complete(ctx context.Context, prompt []int, o CompleteOptions, out func([]byte)) (*Completion, error) {
	if err := lm.CheckComplete(prompt, o); err != nil {
		return nil, err
	}
	c := &Completion{}
	eos := lm.Tok.Special(tokenizer.EndOfText)
	gen := GenerateOptions{MaxNew: o.MaxNew, EOS: eos, Sampling: o.Sampling}
	var healed []byte // the text of the token taken back
	if o.healing(len(prompt)) {
		healed = lm.Tok.Decode(prompt[len(prompt)-1:])
		prompt = prompt[:len(prompt)-1]
		gen.First = [][]int{lm.Tok.Extending(healed)}
	}
	st := &StopStrings{Stops: o.Stops, Out: func(b []byte) {
		c.Text += string(b)
		if out != nil {
			out(b)
		}
	}}
	gen.Stop = func(_, id int) bool {
		c.Last = time.Now()
		if c.First.IsZero() {
			c.First = c.Last
		}
		c.Tokens++
		if id == eos {
			return false
		}
		b := lm.Tok.Decode([]int{id})
		if healed != nil { // the first token begins with the text taken back
			b, healed = b[len(healed):], nil
		}
		return st.Add(b)
	}
	c.Prefilled = len(prompt)
	c.Start = time.Now()
	rows, err := lm.Generate(ctx, lm.Params, [][]int{prompt}, gen, nil)
	if err != nil {
		return c, err
	}
	st.Flush()
	c.IDs = rows[0]
	c.Stop, c.StopString = StopReason(rows[0], eos, st.Hit)
	return c, nil
}
