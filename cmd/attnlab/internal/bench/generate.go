package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/python"
)

// The generation workload: greedy decoding of GenerateNew tokens after a
// prompt of GeneratePrompt tokens.
const (
	GeneratePrompt = 32
	GenerateNew    = 128
)

// promptText is encoded into the prompt when the checkpoint has a
// tokenizer; it is longer than GeneratePrompt tokens of any vocabulary
// attnlab trains.
const promptText = `// Package main prints the numbers from one to ten with their squares and cubes.
package main

import "fmt"

func main() {
	for i := 1; i <= 10; i++ {
		fmt.Println(i, i*i, i*i*i)
	}
}
`

// randomInitStd is the spread of the random weights of the default model.
// Speed does not depend on them, but the comparison of tokens does: at
// training's initial 0.02 a tied head sees mostly the input token's own
// embedding and greedy decoding repeats one token; at 0.1 the 128 tokens
// of the default model are over a hundred distinct ones.
const randomInitStd = 0.1

// genWork is a generation workload: the checkpoint directory both sides
// load, the model attnlab loaded from it, the prompt and the count.
type genWork struct {
	dir    string
	label  string // the checkpoint directory, or what the model is
	m      *model.Model[float32]
	p      *model.Params[float32]
	prompt []int
	new    int
}

// prepareGenerate loads the checkpoint at dir or, when dir is "", writes a
// model of config cfg with random weights (N(0, randomInitStd²), norms 1)
// into tmp: generation speed does not depend on the weights, and PyTorch
// needs a file to load. The prompt is GeneratePrompt tokens of promptText when
// the checkpoint has a tokenizer.json, else as many seeded random ids.
func prepareGenerate(dir string, cfg model.Config, tmp string, promptLen, newTokens int) (*genWork, error) {
	label := fmt.Sprintf("attnlab train's default model, random weights N(0, %g²)", randomInitStd)
	if dir == "" {
		m, err := model.New[float32](cfg)
		if err != nil {
			return nil, err
		}
		p := m.NewParams()
		m.Init(p, randomInitStd, 1)
		dir = filepath.Join(tmp, "model")
		if err := m.Save(dir, p, nil); err != nil {
			return nil, err
		}
	} else {
		label = dir
	}
	m, p, err := model.LoadKind[float32](dir, model.KindLM)
	if err != nil {
		return nil, err
	}
	c := m.Config
	if promptLen+newTokens > c.MaxPositionEmbeddings {
		return nil, fmt.Errorf("bench: %s: a prompt of %d and %d new tokens pass max_position_embeddings = %d", dir, promptLen, newTokens, c.MaxPositionEmbeddings)
	}
	var prompt []int
	if tok, err := model.LoadTokenizer(dir, c); err == nil {
		for len(prompt) < promptLen {
			prompt = tok.AppendEncode(prompt, []byte(promptText))
		}
		prompt = prompt[:promptLen]
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else {
		r := rand.New(rand.NewPCG(4, 0))
		for range promptLen {
			prompt = append(prompt, r.IntN(c.VocabSize))
		}
	}
	return &genWork{dir: dir, label: label, m: m, p: p, prompt: prompt, new: newTokens}, nil
}

// measureGenerate times attnlab's greedy generation (model.Generate: the
// prompt in one chunk, then one token per step through the KV cache; no
// end-of-text stop) and returns its row, tokens per second over the
// median run, and the tokens. A run whose tokens differ from the first's
// is an error of the row.
func measureGenerate(ctx context.Context, g *genWork, budget time.Duration) (Row, []int) {
	c := g.m.Config
	row := Row{Group: "generate", Unit: "tokens/s", DType: "float32",
		Case: fmt.Sprintf("float32 D=%d L=%d H=%d KVH=%d V=%d, %d+%d tokens",
			c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.VocabSize, len(g.prompt), g.new)}
	var (
		mu       sync.Mutex // the runs go on in a goroutine that may outlive an interrupt
		first    []int
		runError string
	)
	opt := model.GenerateOptions{MaxNew: g.new, EOS: -1}
	t := medianTimeCtx(ctx, budget, func() func() {
		return func() {
			out, err := g.m.Generate(ctx, g.p, [][]int{g.prompt}, opt, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if ctx.Err() == nil && runError == "" {
					runError = "attnlab: " + err.Error()
				}
			case first == nil:
				first = out[0]
			case !slices.Equal(first, out[0]) && runError == "":
				runError = "attnlab's tokens differ from one run to the next"
			}
		}
	})
	mu.Lock()
	defer mu.Unlock()
	row.Ours, row.Error = float64(g.new)/t, runError
	return row, slices.Clone(first)
}

// torchGenerate runs python/torch_generate.py on g for about seconds and
// returns its tokens, its run times and a description of PyTorch.
func torchGenerate(ctx context.Context, g *genWork, threads int, seconds float64) (tokens []int, times []float64, info string, err error) {
	if err := torchAvailable(); err != nil {
		return nil, nil, "", err
	}
	dir, err := os.MkdirTemp("", "attnlab-generate")
	if err != nil {
		return nil, nil, "", err
	}
	defer os.RemoveAll(dir)
	script, err := python.Extract(dir, "torch_generate.py")
	if err != nil {
		return nil, nil, "", err
	}
	spec, _ := json.Marshal(map[string]any{
		"checkpoint": g.dir, "prompt": g.prompt, "new": g.new, "threads": threads, "seconds": seconds,
	})
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		return nil, nil, "", err
	}
	cmd := exec.CommandContext(ctx, python.Interpreter, script, specPath)
	cmd.Env = torchEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, "", fmt.Errorf("torch_generate.py: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res struct {
		Torch   string    `json:"torch"`
		Threads int       `json:"threads"`
		Tokens  []int     `json:"tokens"`
		Seconds []float64 `json:"seconds"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, nil, "", fmt.Errorf("torch_generate.py output: %w", err)
	}
	if len(res.Seconds) == 0 {
		return nil, nil, "", fmt.Errorf("torch_generate.py: no timed run")
	}
	return res.Tokens, res.Seconds, fmt.Sprintf("PyTorch %s, %d threads", res.Torch, res.Threads), nil
}

// compareTokens returns an error naming the first new token where
// PyTorch's greedy continuation differs from attnlab's.
func compareTokens(ours, torch []int) error {
	for i := range min(len(ours), len(torch)) {
		if ours[i] != torch[i] {
			return fmt.Errorf("tokens differ from PyTorch's at new token %d of %d: attnlab %d, PyTorch %d", i, len(ours), ours[i], torch[i])
		}
	}
	if len(ours) != len(torch) {
		return fmt.Errorf("attnlab generated %d tokens, PyTorch %d", len(ours), len(torch))
	}
	return nil
}

// fillGenerate puts PyTorch's tokens per second, the ratio and, when the
// tokens differ, the error into the generate row.
func fillGenerate(row *Row, ours, torch []int, times []float64, newTokens int) {
	row.Torch = float64(newTokens) / median(times)
	if row.Ours > 0 {
		row.Ratio = row.Ours / row.Torch
	}
	if err := compareTokens(ours, torch); err != nil && row.Error == "" {
		row.Error = err.Error()
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
