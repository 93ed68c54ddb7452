// Command ggml-lm continues a prompt with attnlab's language model run by
// ggml: the checkpoint's safetensors (attnlab's shipped model by default)
// loaded into ggml tensors, one ggml graph for the prompt and one per new
// token through a KV cache, greedy decoding, as attnlab generate -temp 0
// -repeat-penalty 1 does (token healing included), so that the two print
// the same text and choose the same token ids:
//
//	ggml-lm [-model DIR] -prompt TEXT [-n N] [-threads N] [-flash=true|false] [-kv f32|f16] [-heal=true|false] [-json]
//
// It prints the prompt and its continuation, and on standard error the
// prefill and decode times: the prompt's graph (built, computed, its last
// logits read and the token picked) and the n − 1 one-token steps after it,
// in tokens per second. -json prints those with the prompt's and the new
// token ids instead.
//
// With -compare R it runs one untimed generation on each side, then R
// rounds, each generating with ggml and then with
// attnlab's own model (model.Generate, in this process, GOMAXPROCS set to
// -threads), checks that both chose the same tokens, and prints each side's
// median prefill and decode rates and the median of the per-round ratios
// with their range: a busy neighbour slows both sides of a round alike.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/tokenizer"
)

type options struct {
	model, prompt string
	n, threads    int
	flash, heal   bool
	kv            string
	json          bool
	compare       int
}

// run is one generation: the prompt's ids after healing, the new ids, and
// the times.
type run struct {
	Prompt         []int   `json:"prompt_tokens"`
	Tokens         []int   `json:"tokens"`
	PrefillSeconds float64 `json:"prefill_seconds"`
	DecodeSeconds  float64 `json:"decode_seconds"` // the n − 1 steps after the first new token
}

func (r run) prefillRate() float64 { return float64(len(r.Prompt)) / r.PrefillSeconds }
func (r run) decodeRate() float64 {
	if len(r.Tokens) < 2 {
		return math.NaN()
	}
	return float64(len(r.Tokens)-1) / r.DecodeSeconds
}

// job is what both sides generate from.
type job struct {
	prompt []int
	first  []int // the first new token must be one of these (token healing); nil: any
	healed []byte
	n, eos int
}

func main() {
	var o options
	flag.StringVar(&o.model, "model", "", "checkpoint directory (default: attnlab's shipped language model)")
	flag.StringVar(&o.prompt, "prompt", "", "text to continue")
	flag.IntVar(&o.n, "n", 100, "tokens to generate at most")
	flag.IntVar(&o.threads, "threads", runtime.NumCPU(), "ggml's CPU threads (and attnlab's GOMAXPROCS with -compare)")
	flag.BoolVar(&o.flash, "flash", true, "attention by ggml_flash_attn_ext (llama.cpp's default on a CPU); false: mul_mat → soft_max_ext → mul_mat")
	flag.StringVar(&o.kv, "kv", "f32", "KV cache type: f32, or f16 (llama.cpp's default)")
	flag.BoolVar(&o.heal, "heal", true, "token healing, as attnlab generate: take the prompt's last token back and begin with a token that extends its text")
	flag.BoolVar(&o.json, "json", false, "print the token ids and times as JSON")
	flag.IntVar(&o.compare, "compare", 0, "rounds of ggml against attnlab's own model, interleaved (0: ggml only)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := mainErr(ctx, &o)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "ggml-lm:", err)
		fmt.Fprintln(os.Stderr, "usage: ggml-lm [-model DIR] -prompt TEXT [-n N] [-threads N] [-flash=true|false] [-kv f32|f16] [-heal=true|false] [-json] [-compare R]")
		os.Exit(2)
	case ctx.Err() != nil:
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "ggml-lm:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func mainErr(ctx context.Context, o *options) error {
	switch {
	case flag.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", flag.Arg(0))}
	case o.prompt == "":
		return usageError{"-prompt is required"}
	case o.n < 0:
		return usageError{fmt.Sprintf("-n %d: want >= 0", o.n)}
	case o.threads < 1:
		return usageError{fmt.Sprintf("-threads %d: want >= 1", o.threads)}
	case o.compare < 0:
		return usageError{fmt.Sprintf("-compare %d: want >= 0", o.compare)}
	}
	kv, err := ggml.ParseType(o.kv)
	if err != nil {
		return usageError{"-kv: " + err.Error()}
	}
	if o.model == "" {
		if o.model, err = models.Dir(models.LM); err != nil {
			return fmt.Errorf("no -model given, and this build ships no language model: %w", err)
		}
	}
	// the checkpoint with its tokenizer, both checked (kind, vocabulary)
	lm, err := model.LoadLM[float32](o.model)
	if err != nil {
		return err
	}
	m, p, tok := lm.Model, lm.Params, lm.Tok
	// the prompt as attnlab generate prepares it
	j := job{prompt: tok.Encode([]byte(o.prompt)), n: o.n, eos: tok.Special(tokenizer.EndOfText)}
	if o.heal && len(j.prompt) > 1 && o.n > 0 {
		j.healed = tok.Decode(j.prompt[len(j.prompt)-1:])
		j.prompt = j.prompt[:len(j.prompt)-1]
		j.first = tok.Extending(j.healed)
	}
	if err := m.CheckGenerate([][]int{j.prompt}, o.n); err != nil {
		return usageError{fmt.Sprintf("-prompt of %d tokens and -n %d: %v", len(j.prompt), o.n, err)}
	}
	d, err := newDecoder(m, p, len(j.prompt)+max(o.n-1, 0), o.flash, kv, o.threads)
	if err != nil {
		return fmt.Errorf("%s: %w", o.model, err)
	}
	defer d.close()
	if o.compare > 0 {
		return compare(ctx, o, d, m, p, j)
	}
	r, err := d.generate(ctx, j)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if o.json {
		return json.NewEncoder(w).Encode(struct {
			run
			PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
			DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second,omitempty"`
			Threads                int     `json:"threads"`
			Flash                  bool    `json:"flash"`
			KV                     string  `json:"kv"`
			Version                string  `json:"version"`
			Build                  string  `json:"build"`
		}{r, r.prefillRate(), finite(r.decodeRate()), o.threads, o.flash, o.kv, ggml.Version(), ggml.BuildFlags})
	}
	writeText(w, o.prompt, j, r.Tokens, tok)
	fmt.Fprintf(os.Stderr, "ggml-lm: prefill %d tokens in %.2f ms (%.0f tokens/s); decode %d tokens in %.2f ms (%.0f tokens/s); %d threads, flash %v, KV %s\n",
		len(r.Prompt), 1e3*r.PrefillSeconds, r.prefillRate(), max(len(r.Tokens)-1, 0), 1e3*r.DecodeSeconds, r.decodeRate(), o.threads, o.flash, o.kv)
	return nil
}

// writeText prints what attnlab generate prints: the prompt, the new
// tokens' text (the end-of-text token left out, the healed text not
// repeated) and a newline.
func writeText(w io.Writer, prompt string, j job, tokens []int, tok *tokenizer.Tokenizer) {
	io.WriteString(w, prompt)
	healed := j.healed
	for _, id := range tokens {
		if id == j.eos {
			continue
		}
		text := tok.Decode([]int{id})
		if healed != nil {
			text, healed = text[len(healed):], nil
		}
		w.Write(text)
	}
	io.WriteString(w, "\n")
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// generate continues j greedily: the prompt's graph, then one step per new
// token until j.n tokens or the end-of-text token, as model.Generate does.
func (d *decoder) generate(ctx context.Context, j job) (run, error) {
	r := run{Prompt: j.prompt}
	if j.n == 0 {
		return r, nil
	}
	start := time.Now()
	logits, err := d.step(j.prompt, 0)
	if err != nil {
		return r, err
	}
	for {
		id, err := greedy(logits, len(r.Tokens) == 0, j.first)
		if err != nil {
			return r, fmt.Errorf("new token %d: %w", len(r.Tokens)+1, err)
		}
		r.Tokens = append(r.Tokens, id)
		if len(r.Tokens) == 1 {
			r.PrefillSeconds = time.Since(start).Seconds()
			start = time.Now()
		}
		if id == j.eos || len(r.Tokens) == j.n {
			break
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if logits, err = d.step([]int{id}, len(j.prompt)+len(r.Tokens)-1); err != nil {
			return r, err
		}
	}
	r.DecodeSeconds = time.Since(start).Seconds()
	return r, nil
}

// greedy is model.Sampling's argmax at temperature 0 with no repetition
// penalty: the first of the largest logits, among first when it is the
// first new token and first is not empty.
func greedy(logits []float32, isFirst bool, first []int) (int, error) {
	best := -1
	consider := func(i int) {
		if best < 0 || logits[i] > logits[best] {
			best = i
		}
	}
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("the logit of token id %d is %v", i, v)
		}
	}
	if isFirst && len(first) > 0 {
		for _, i := range slices.Sorted(slices.Values(first)) {
			consider(i)
		}
	} else {
		for i := range logits {
			consider(i)
		}
	}
	return best, nil
}
