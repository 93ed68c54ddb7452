package model

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/tokenizer"
)

// tinyLM is a language model of random weights with a byte-level BPE
// tokenizer trained on a little Go, its vocabulary the model's.
func tinyLM(t *testing.T, positions int) *LM[float32] {
	t.Helper()
	text := []byte(strings.Repeat("func (b *Buffer) Len() int { return len(b.buf) }\n// Reset empties the buffer.\n", 20))
	tok, err := tokenizer.Train([][]byte{text}, 300, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(true)
	cfg.VocabSize, cfg.MaxPositionEmbeddings = tok.VocabSize(), positions
	m, err := New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.5, 3)
	return &LM[float32]{Model: m, Params: p, Tok: tok}
}

// TestFitPrompt: a prompt that fits is kept whole; one that does not is a
// *FitError saying by how much, or with Truncate loses its first tokens,
// the healed token counted once; an empty prompt is ErrEmptyPrompt.
func TestFitPrompt(t *testing.T) {
	const P = 128
	lm := tinyLM(t, P)
	text := strings.Repeat("func (b *Buffer) Len() int ", 6)
	all := lm.Tok.Encode([]byte(text))
	if len(all) < 20 || len(all) > P-10 {
		t.Fatalf("the text encodes to %d tokens; the test wants 20 to %d", len(all), P-10)
	}
	o := CompleteOptions{MaxNew: P - len(all) + 1, Heal: true} // fits only because the healed token counts once
	if p, dropped, err := lm.FitPrompt(text, o); err != nil || dropped != 0 || !slices.Equal(p, all) {
		t.Errorf("fitting prompt: %d tokens, %d dropped, %v", len(p), dropped, err)
	}
	o.Heal = false
	var fe *FitError
	if _, _, err := lm.FitPrompt(text, o); !errors.As(err, &fe) || fe.Need != P+1 || fe.Positions != P || fe.PromptTokens != len(all) || fe.Truncate {
		t.Errorf("one position too many: %v (%+v)", err, fe)
	}
	o.Truncate = true
	if p, dropped, err := lm.FitPrompt(text, o); err != nil || dropped != 1 || !slices.Equal(p, all[1:]) {
		t.Errorf("-truncate: %d tokens, %d dropped, %v", len(p), dropped, err)
	}
	o.MaxNew = P
	if _, _, err := lm.FitPrompt(text, o); !errors.As(err, &fe) || !fe.Truncate {
		t.Errorf("truncating to no prompt at all: %v", err)
	}
	if _, _, err := lm.FitPrompt("", o); !errors.Is(err, ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
}

// TestCompleteIsGenerate: Complete streams the text of Generate's tokens
// (the healed token's text once), cut at a stop string, and counts and
// times what it generated.
func TestCompleteIsGenerate(t *testing.T) {
	lm := tinyLM(t, 64)
	prompt := lm.Tok.Encode([]byte("func (b *Buffer) "))
	eos := lm.Tok.Special(tokenizer.EndOfText)
	o := CompleteOptions{MaxNew: 20, Sampling: Sampling{RepetitionPenalty: 1}}
	var streamed []byte
	c, err := lm.Complete(context.Background(), prompt, o, func(b []byte) { streamed = append(streamed, b...) })
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lm.Generate(context.Background(), lm.Params, [][]int{prompt}, GenerateOptions{MaxNew: 20, EOS: eos, Sampling: o.Sampling}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := rows[0]
	if n := len(want); n > 0 && want[n-1] == eos {
		want = want[:n-1]
	}
	if !slices.Equal(c.IDs, rows[0]) || c.Text != string(lm.Tok.Decode(want)) || string(streamed) != c.Text {
		t.Fatalf("Complete: ids %v text %q streamed %q; Generate: %v", c.IDs, c.Text, streamed, rows[0])
	}
	if c.Tokens != len(rows[0]) || c.Prefilled != len(prompt) || c.First.Before(c.Start) || c.Last.Before(c.First) {
		t.Errorf("counts and times: %+v", c)
	}
	if len(c.Text) < 4 {
		t.Skipf("the random model wrote only %q: no stop string to cut", c.Text)
	}
	stop := c.Text[2:4]
	o.Stops = []string{stop}
	s, err := lm.Complete(context.Background(), prompt, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Text != c.Text[:strings.Index(c.Text, stop)] || s.Stop != "stop" || s.StopString != stop {
		t.Errorf("stop %q: text %q, reason %q %q; without it %q", stop, s.Text, s.Stop, s.StopString, c.Text)
	}
	// healing: the prompt's last token is taken back and its text is not repeated
	o.Stops, o.Heal = nil, true
	h, err := lm.Complete(context.Background(), prompt, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Prefilled != len(prompt)-1 || len(h.IDs) == 0 {
		t.Fatalf("healed: prefilled %d of %d, %d new", h.Prefilled, len(prompt), len(h.IDs))
	}
	last := lm.Tok.Decode(prompt[len(prompt)-1:])
	if first := lm.Tok.Decode(h.IDs[:1]); !strings.HasPrefix(string(first), string(last)) || !strings.HasPrefix(string(first), string(last)+h.Text[:min(len(h.Text), len(first)-len(last))]) {
		t.Errorf("healed: first token %q does not begin with the prompt's last %q, or the text %q repeats it", first, last, h.Text)
	}
}

// TestCompletionTiming: prefill counts the prompt's tokens up to the first
// new one, decode the new tokens after it, each with its rate; a rate with
// no time is 0, and a completion without tokens has the zero Timing.
func TestCompletionTiming(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := &Completion{Tokens: 5, Prefilled: 20, Start: t0, First: t0.Add(2 * time.Second), Last: t0.Add(4 * time.Second)}
	want := Timing{PrefillTokens: 20, PrefillSeconds: 2, PrefillTokensPerSecond: 10, DecodeTokens: 4, DecodeSeconds: 2, DecodeTokensPerSecond: 2}
	if got := c.Timing(); got != want {
		t.Errorf("Timing = %+v, want %+v", got, want)
	}
	one := &Completion{Tokens: 1, Prefilled: 3, Start: t0, First: t0, Last: t0}
	if got := one.Timing(); got != (Timing{PrefillTokens: 3}) {
		t.Errorf("one token at once: %+v", got)
	}
	if got := (&Completion{Prefilled: 3, Start: t0}).Timing(); got != (Timing{}) {
		t.Errorf("no tokens: %+v", got)
	}
}
