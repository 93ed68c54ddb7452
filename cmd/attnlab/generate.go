package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/tokenizer"
)

var generateCmd = register(&command{
	name:  "generate",
	usage: "-model DIR -prompt TEXT [-n N] [-temp T] [-topk K] [-topp P] [-repeat-penalty R -repeat-window W] [-seed S]",
	short: "continue a prompt with a trained checkpoint, streaming the tokens",
	long: `Generate loads a checkpoint directory (config.json, model.safetensors and
tokenizer.json, as attnlab train writes them), encodes the prompt, and
continues it token by token through a KV cache, printing each token as it
is chosen. It stops at the end-of-text token or after -n tokens.

-temp 0 is greedy decoding; otherwise logits are divided by the
temperature, cut to the -topk most likely tokens and to the smallest set
reaching probability -topp, and sampled with -seed. -repeat-penalty > 1
discourages tokens seen in the last -repeat-window tokens.

Example: attnlab generate -model run1/checkpoint -prompt "func main() {" -n 80`,
})

var (
	genModel   = generateCmd.flags.String("model", "", "checkpoint directory")
	genPrompt  = generateCmd.flags.String("prompt", "", "text to continue")
	genN       = generateCmd.flags.Int("n", 100, "tokens to generate at most")
	genTemp    = generateCmd.flags.Float64("temp", 0.8, "temperature (0: greedy)")
	genTopK    = generateCmd.flags.Int("topk", 40, "keep the K most likely tokens (0: all)")
	genTopP    = generateCmd.flags.Float64("topp", 0.95, "keep the smallest set reaching this probability (1: all)")
	genPenalty = generateCmd.flags.Float64("repeat-penalty", 1.1, "repetition penalty (1: none)")
	genWindow  = generateCmd.flags.Int("repeat-window", 64, "tokens the repetition penalty looks back on (0: all)")
	genSeed    = generateCmd.flags.Uint64("seed", 1, "sampling seed")
)

func init() { generateCmd.run = runGenerate }

func runGenerate(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if *genModel == "" {
		return usageError{"-model is required"}
	}
	if *genPrompt == "" {
		return usageError{"-prompt is required"}
	}
	if *genN < 0 {
		return usageError{fmt.Sprintf("-n %d: want >= 0", *genN)}
	}
	s := model.Sampling{Temperature: *genTemp, TopK: *genTopK, TopP: *genTopP, RepetitionPenalty: *genPenalty,
		RepetitionWindow: *genWindow, Seed: *genSeed}
	if err := s.Validate(); err != nil {
		return usageError{err.Error()}
	}
	m, p, err := model.Load[float32](*genModel)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(filepath.Join(*genModel, "tokenizer.json"))
	if err != nil {
		return err
	}
	if tok.VocabSize() != m.Config.VocabSize {
		return fmt.Errorf("%s: tokenizer has %d tokens, the model %d", *genModel, tok.VocabSize(), m.Config.VocabSize)
	}
	prompt := tok.Encode([]byte(*genPrompt))
	eos := tok.Special(tokenizer.EndOfText)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	w.WriteString(*genPrompt)
	w.Flush()
	_, err = m.Generate(p, [][]int{prompt}, model.GenerateOptions{MaxNew: *genN, EOS: eos, Sampling: s}, func(_, id int) {
		if id != eos {
			w.Write(tok.Decode([]int{id}))
			w.Flush() // streaming: each token as it comes
		}
	})
	if err != nil {
		return err
	}
	w.WriteString("\n")
	return nil
}
