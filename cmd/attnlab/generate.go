package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/tokenizer"
)

var generateCmd = register(&command{
	name:  "generate",
	usage: "[-model DIR] -prompt TEXT [-n N] [-temp T] [-topk K] [-topp P] [-repeat-penalty R -repeat-window W] [-seed S] [-heal=false]",
	short: "continue a prompt with a language model, streaming the tokens",
	long: `Generate loads a checkpoint directory (config.json, model.safetensors and
tokenizer.json, as attnlab train writes them; without -model, the language
model attnlab ships, pretrained on Go source), encodes the prompt, and
continues it token by token through a KV cache, printing each token as it
is chosen. It stops at the end-of-text token or after -n tokens.

-temp 0 is greedy decoding; otherwise logits are divided by the
temperature, cut to the -topk most likely tokens and to the smallest set
reaching probability -topp, and sampled with -seed. -repeat-penalty > 1
discourages tokens seen in the last -repeat-window tokens.

Token healing (-heal, the default): a prompt's last token is taken back and
the first generated token must begin with its text. A prompt that stops
inside what the model learned as one token ("{" where it saw "{\n\t") would
otherwise read as text the model rarely saw; healed, it continues as if
the prompt's end had been tokenised with what follows.

Example: attnlab generate -prompt "// Reverse returns s with its runes in reverse order." -temp 0 -n 60
         attnlab generate -model run1/checkpoint -prompt "func main() {" -n 80`,
	streams: true,
})

type generateOpts struct {
	model, prompt string
	n             int
	heal          bool
	s             model.Sampling
}

func init() {
	generateCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &generateOpts{}
		fs.StringVar(&o.model, "model", "", "checkpoint directory (default: the shipped language model)")
		fs.StringVar(&o.prompt, "prompt", "", "text to continue")
		fs.IntVar(&o.n, "n", 100, "tokens to generate at most")
		fs.Float64Var(&o.s.Temperature, "temp", 0.8, "temperature (0: greedy)")
		fs.IntVar(&o.s.TopK, "topk", 40, "keep the K most likely tokens (0: all)")
		fs.Float64Var(&o.s.TopP, "topp", 0.95, "keep the smallest set reaching this probability (1: all)")
		fs.Float64Var(&o.s.RepetitionPenalty, "repeat-penalty", 1.1, "repetition penalty (1: none)")
		fs.IntVar(&o.s.RepetitionWindow, "repeat-window", 64, "tokens the repetition penalty looks back on (0: all)")
		fs.Uint64Var(&o.s.Seed, "seed", 1, "sampling seed")
		fs.BoolVar(&o.heal, "heal", true, "token healing: take the prompt's last token back and begin with a token that extends its text")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runGenerate(ctx, o, stdout)
		}
	}
}

func runGenerate(ctx context.Context, o *generateOpts, stdout io.Writer) error {
	switch {
	case o.prompt == "":
		return usageError{"-prompt is required"}
	case o.n < 0:
		return usageError{fmt.Sprintf("-n %d: want >= 0", o.n)}
	}
	if err := o.s.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if o.model == "" {
		dir, err := shippedModel(models.LM)
		if err != nil {
			return err
		}
		o.model = dir
	}
	lm, err := model.LoadLM[float32](o.model)
	if err != nil {
		return err
	}
	m, p, tok := lm.Model, lm.Params, lm.Tok
	prompt := tok.Encode([]byte(o.prompt))
	eos := tok.Special(tokenizer.EndOfText)
	gen := model.GenerateOptions{MaxNew: o.n, EOS: eos, Sampling: o.s}
	var healed []byte // the text of the token taken back, printed with the prompt
	if o.heal && len(prompt) > 1 && o.n > 0 {
		healed = tok.Decode(prompt[len(prompt)-1:])
		prompt = prompt[:len(prompt)-1]
		gen.First = [][]int{tok.Extending(healed)}
	}
	if err := m.CheckGenerate([][]int{prompt}, o.n); err != nil {
		return usagef("-prompt of %d tokens and -n %d: %v", len(prompt), o.n, err)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	w.WriteString(o.prompt)
	w.Flush()
	_, err = m.Generate(ctx, p, [][]int{prompt}, gen, func(_, id int) {
		if id != eos {
			text := tok.Decode([]int{id})
			if healed != nil { // the first token begins with the text taken back
				text, healed = text[len(healed):], nil
			}
			w.Write(text)
			w.Flush() // streaming: each token as it comes
		}
	})
	if errors.Is(err, model.ErrNonFinite) {
		w.WriteString("\n")
		return fmt.Errorf("%s: %w", o.model, err)
	}
	if err != nil {
		return err
	}
	w.WriteString("\n")
	return nil
}
