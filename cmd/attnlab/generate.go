package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/readlimit"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
)

var generateCmd = register(&command{
	name:  "generate",
	usage: "[-model DIR] -prompt TEXT | -prompt-file FILE|- [-n N] [-stop S]... [-temp T] [-topk K] [-topp P] [-repeat-penalty R -repeat-window W] [-no-repeat-ngram N] [-truncate] [-seed S] [-heal=false] [-stats] [-json]",
	short: "continue a prompt with a language model, streaming the tokens",
	long: `Generate loads a checkpoint directory (config.json, model.safetensors and
tokenizer.json, as attnlab train writes them; without -model, the language
model attnlab ships, pretrained on Go source), encodes the prompt, and
continues it token by token through a KV cache, printing the prompt and
then each token as it is chosen. It stops at the end-of-text token, after
-n tokens, or at a -stop string.

The prompt is -prompt TEXT, or the contents of -prompt-file FILE (-prompt-file
- reads standard input), taken exactly, a final newline included.

-stop S ends the generation where the text it writes first contains S,
which is not printed (as llama.cpp's and OpenAI's stop sequences); give it
more than once for several. \n, \t and \\ in S are a newline, a tab and a
backslash: -stop '\n}\n' stops at the end of a top-level function.

Context: the prompt and the -n new tokens must fit in the model's
positions (max_position_embeddings, 512 for the shipped model). A prompt
that does not fit is refused before any generation, saying by how much;
with -truncate its first tokens are dropped instead, keeping its last ones
(a note on stderr says how many were dropped).

-temp 0 is greedy decoding; otherwise logits are divided by the
temperature, cut to the -topk most likely tokens and to the smallest set
reaching probability -topp, and sampled with -seed.

Repetition: -repeat-penalty > 1 discourages tokens seen in the last
-repeat-window tokens (CTRL's rule), and -no-repeat-ngram N bans a token
that would repeat a sequence of N tokens already in the text (prompt
included), so that no loop of N tokens or more can start over. By default
both are on (1.1 and 8); -repeat-penalty 1 turns both off unless
-no-repeat-ngram is given, so -temp 0 -repeat-penalty 1 is plain argmax
decoding. Measured with go run ./scripts/looprate on 192 prompts cut from
held-out standard-library files, 96 new tokens each: greedy decoding loops
(a block of tokens three times in a row) in 47% of them with the penalty
alone and in none with the ban added (which forbids such a loop; the
generated lines that repeat an earlier one go from 56% to 20%), and the
functions that close and parse go from 40% to 46%; sampled at the default
temperature, loops go from 6% to none, closing and parsing from 51% to 47%.

Token healing (-heal, the default): a prompt's last token is taken back and
the first generated token must begin with its text. A prompt that stops
inside what the model learned as one token ("{" where it saw "{\n\t") would
otherwise read as text the model rarely saw; healed, it continues as if
the prompt's end had been tokenised with what follows.

-stats prints the times on stderr after the text: loading the model, the
prefill (the prompt in one pass, to the first new token) and the decode
(each further token), with tokens per second. -json prints one JSON object
instead of the stream: the prompt, the text, the token counts, why it
stopped (eos, length, stop) and the same times.

Example: attnlab generate -prompt "// Reverse returns s with its runes in reverse order." -temp 0 -n 60
         attnlab generate -prompt-file main.go -stop '\n}\n' -stats
         git show HEAD:cmd/main.go | attnlab generate -prompt-file - -truncate -json`,
	streams: true,
})

// The defaults of the repetition guards, measured with scripts/looprate
// on prompts from held-out standard-library files (see -h).
const (
	defaultRepeatPenalty = 1.1
	defaultNoRepeatNGram = 8
)

// MaxPromptBytes bounds a prompt file (or standard input): a larger one,
// or a stream that does not end, is refused naming it.
const MaxPromptBytes = 16 << 20

// stdin is what -prompt-file - reads. A variable for the tests.
var stdin io.Reader = os.Stdin

type generateOpts struct {
	model, prompt, promptFile string
	n                         int
	heal, truncate            bool
	stats, asJSON             bool
	stops                     stopFlag
	s                         model.Sampling
}

// stopFlag is a repeatable -stop.
type stopFlag []string

func (f *stopFlag) String() string { return strings.Join(*f, ", ") }
func (f *stopFlag) Set(v string) error {
	s := unescape(v)
	if s == "" {
		return errors.New("empty stop string")
	}
	*f = append(*f, s)
	return nil
}

// unescape reads \n, \t and \\ in s.
func unescape(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t").Replace(s)
}

func init() {
	generateCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &generateOpts{}
		fs.StringVar(&o.model, "model", "", "checkpoint directory (default: the shipped language model)")
		fs.StringVar(&o.prompt, "prompt", "", "text to continue")
		fs.StringVar(&o.promptFile, "prompt-file", "", "file holding the text to continue (-: standard input), instead of -prompt")
		fs.IntVar(&o.n, "n", 100, "tokens to generate at most")
		fs.Var(&o.stops, "stop", "end where the new text contains this string, which is not printed (repeatable; \\n, \\t, \\\\ read as newline, tab, backslash)")
		fs.BoolVar(&o.truncate, "truncate", false, "drop the first tokens of a prompt too long for the context (with -n new tokens) instead of refusing it")
		fs.Float64Var(&o.s.Temperature, "temp", 0.8, "temperature (0: greedy)")
		fs.IntVar(&o.s.TopK, "topk", 40, "keep the K most likely tokens (0: all)")
		fs.Float64Var(&o.s.TopP, "topp", 0.95, "keep the smallest set reaching this probability (1: all)")
		fs.Float64Var(&o.s.RepetitionPenalty, "repeat-penalty", defaultRepeatPenalty, "repetition penalty (1: none)")
		fs.IntVar(&o.s.RepetitionWindow, "repeat-window", 64, "tokens the repetition penalty looks back on (0: all)")
		fs.IntVar(&o.s.NoRepeatNGram, "no-repeat-ngram", defaultNoRepeatNGram, "ban a token that would repeat a sequence of this many tokens (0: off; off by default with -repeat-penalty 1)")
		fs.Uint64Var(&o.s.Seed, "seed", 1, "sampling seed")
		fs.BoolVar(&o.heal, "heal", true, "token healing: take the prompt's last token back and begin with a token that extends its text")
		fs.BoolVar(&o.stats, "stats", false, "print load, prefill and decode times and tokens per second on stderr")
		fs.BoolVar(&o.asJSON, "json", false, "print one JSON object (prompt, text, tokens, stop reason, times) instead of the stream")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if !givenFlags(fs)["no-repeat-ngram"] && (o.s.RepetitionPenalty == 1 || o.s.RepetitionPenalty == 0) {
				o.s.NoRepeatNGram = 0 // -repeat-penalty 1: no repetition guard
			}
			return runGenerate(ctx, o, stdout)
		}
	}
}

// generateResult is what -json prints.
type generateResult struct {
	Model        string        `json:"model"`
	Prompt       string        `json:"prompt"`
	PromptTokens int           `json:"prompt_tokens"`         // the tokens of the prompt the model read, a healed one included
	Dropped      int           `json:"prompt_tokens_dropped"` // -truncate
	Text         string        `json:"text"`
	Tokens       int           `json:"tokens"`
	IDs          []int         `json:"token_ids"`   // the new tokens, end-of-text included
	Stop         string        `json:"stop_reason"` // eos, length, stop
	StopString   string        `json:"stop_string,omitempty"`
	Stats        generateStats `json:"stats"`
}

// generateStats are the times of a generation.
type generateStats struct {
	LoadSeconds            float64 `json:"load_seconds"`
	PrefillTokens          int     `json:"prefill_tokens"`
	PrefillSeconds         float64 `json:"prefill_seconds"` // to the first new token
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeTokens           int     `json:"decode_tokens"` // the new tokens after the first
	DecodeSeconds          float64 `json:"decode_seconds"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
	TotalSeconds           float64 `json:"total_seconds"`
}

func runGenerate(ctx context.Context, o *generateOpts, stdout io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	text, err := o.readPrompt(ctx)
	if err != nil {
		return err
	}
	if o.model == "" {
		dir, err := shippedModel(models.LM)
		if err != nil {
			return err
		}
		o.model = dir
	}
	start := time.Now()
	lm, err := model.LoadLM[float32](o.model)
	if err != nil {
		return err
	}
	res := &generateResult{Model: o.model, Prompt: text, Stats: generateStats{LoadSeconds: time.Since(start).Seconds()}}
	co := model.CompleteOptions{MaxNew: o.n, Sampling: o.s, Heal: o.heal, Truncate: o.truncate, Stops: o.stops}
	prompt, err := o.fit(lm, text, co, res)
	if err != nil {
		return err
	}
	if err := lm.CheckComplete(prompt, co); err != nil {
		return usagef("-prompt of %d tokens and -n %d: %v", len(prompt), o.n, err)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	var stream func([]byte)
	if !o.asJSON {
		w.WriteString(text)
		w.Flush()
		stream = func(b []byte) {
			w.Write(b)
			w.Flush() // streaming: each token as it comes
		}
	}
	c, err := lm.Complete(ctx, prompt, co, stream)
	if errors.Is(err, model.ErrNonFinite) {
		w.WriteString("\n")
		return fmt.Errorf("%s: %w", o.model, err)
	}
	if err != nil {
		return err
	}
	res.Text, res.IDs, res.Tokens, res.Stop, res.StopString = c.Text, c.IDs, c.Tokens, c.Stop, c.StopString
	res.Stats.times(c, start)
	return o.finish(w, res)
}

// check refuses flags that do not go together, before any work.
func (o *generateOpts) check() error {
	switch {
	case o.prompt == "" && o.promptFile == "":
		return usageError{"-prompt or -prompt-file is required"}
	case o.prompt != "" && o.promptFile != "":
		return usageError{"-prompt and -prompt-file: choose one"}
	case o.n < 0:
		return usagef("-n %d: want >= 0", o.n)
	}
	if err := o.s.Validate(); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// readPrompt returns the prompt: -prompt, or the contents of -prompt-file
// (standard input for -), which an interrupt stops reading.
func (o *generateOpts) readPrompt(ctx context.Context) (string, error) {
	if o.promptFile == "" {
		return o.prompt, nil
	}
	b, err := await(ctx, func() ([]byte, error) {
		if o.promptFile == "-" {
			return readlimit.All(stdin, "standard input", MaxPromptBytes)
		}
		return readlimit.File(o.promptFile, MaxPromptBytes)
	})
	if err != nil {
		return "", fmt.Errorf("-prompt-file: %w", err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("-prompt-file %s is empty: nothing to continue", o.promptFile)
	}
	return string(b), nil
}

// fit returns the prompt's tokens (model.FitPrompt), its errors in the
// flags' words, saying on stderr how many tokens -truncate dropped.
func (o *generateOpts) fit(lm *model.LM[float32], text string, co model.CompleteOptions, res *generateResult) ([]int, error) {
	prompt, dropped, err := lm.FitPrompt(text, co)
	var fe *model.FitError
	switch {
	case errors.Is(err, model.ErrEmptyPrompt):
		return nil, usageError{err.Error()}
	case errors.As(err, &fe) && fe.Truncate:
		return nil, usagef("-n %d: the model has %d positions, and -truncate keeps at least one for the prompt", o.n, fe.Positions)
	case errors.As(err, &fe):
		return nil, usagef("a prompt of %d tokens and -n %d need %d positions, the model has %d: a shorter prompt, a lower -n, or -truncate to keep the prompt's last tokens",
			fe.PromptTokens, o.n, fe.Need, fe.Positions)
	case err != nil:
		return nil, err
	}
	if dropped > 0 {
		fmt.Fprintf(progressOut, "attnlab generate: -truncate: dropped the prompt's first %d of %d tokens to fit %d positions with -n %d\n",
			dropped, len(prompt)+dropped, lm.Config.MaxPositionEmbeddings, o.n)
	}
	res.PromptTokens, res.Dropped = len(prompt), dropped
	return prompt, nil
}

// times fills s from the completion's clock: the generation's start and
// its first and last tokens; start is before the model was loaded.
func (s *generateStats) times(c *model.Completion, start time.Time) {
	s.TotalSeconds = time.Since(start).Seconds()
	t := c.Timing()
	s.PrefillTokens, s.PrefillSeconds, s.PrefillTokensPerSecond = t.PrefillTokens, t.PrefillSeconds, t.PrefillTokensPerSecond
	s.DecodeTokens, s.DecodeSeconds, s.DecodeTokensPerSecond = t.DecodeTokens, t.DecodeSeconds, t.DecodeTokensPerSecond
}

// finish ends the output: the JSON object, or the stream's newline, and
// the times with -stats.
func (o *generateOpts) finish(w *bufio.Writer, res *generateResult) error {
	if o.asJSON {
		return writeJSON(w, res)
	}
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		return err
	}
	if o.stats {
		s := res.Stats
		fmt.Fprintf(progressOut, "load     %.3f s\n", s.LoadSeconds)
		fmt.Fprintf(progressOut, "prefill  %d tokens in %.3f s (%.1f tokens/s)\n", s.PrefillTokens, s.PrefillSeconds, s.PrefillTokensPerSecond)
		fmt.Fprintf(progressOut, "decode   %d tokens in %.3f s (%.1f tokens/s)\n", s.DecodeTokens, s.DecodeSeconds, s.DecodeTokensPerSecond)
		fmt.Fprintf(progressOut, "total    %.3f s; stopped: %s\n", s.TotalSeconds, res.Stop)
	}
	return nil
}
