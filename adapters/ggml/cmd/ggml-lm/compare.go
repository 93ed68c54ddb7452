package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	"github.com/attnlab/attnlab/model"
)

// attnlabRun generates j with attnlab's own model as attnlab generate does
// (model.Generate, greedy, no repetition penalty), timing the prompt's
// prefill up to the first new token and the steps after it.
func attnlabRun(ctx context.Context, m *model.Model[float32], p *model.Params[float32], j job) (run, error) {
	r := run{Prompt: j.prompt}
	o := model.GenerateOptions{MaxNew: j.n, EOS: j.eos}
	if j.first != nil {
		o.First = [][]int{j.first}
	}
	var first, last time.Time
	start := time.Now()
	out, err := m.Generate(ctx, p, [][]int{j.prompt}, o, func(_, id int) {
		last = time.Now()
		if first.IsZero() {
			first = last
		}
	})
	if err != nil {
		return r, err
	}
	r.Tokens = out[0]
	if len(r.Tokens) > 0 {
		r.PrefillSeconds, r.DecodeSeconds = first.Sub(start).Seconds(), last.Sub(first).Seconds()
	}
	return r, nil
}

// side is one implementation's medians over the rounds.
type side struct {
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
}

// ratio is the median of the per-round ratios attnlab/ggml of a rate, with
// the smallest and largest.
type ratio struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type comparison struct {
	Rounds        int    `json:"rounds"`
	Threads       int    `json:"threads"`
	Flash         bool   `json:"flash"`
	KV            string `json:"kv"`
	PromptTokens  int    `json:"prompt_tokens"`
	NewTokens     int    `json:"new_tokens"`
	SameTokens    bool   `json:"same_tokens"`
	Tokens        []int  `json:"tokens"`
	GGML          side   `json:"ggml"`
	Attnlab       side   `json:"attnlab"`
	PrefillRatio  ratio  `json:"prefill_ratio"` // attnlab's rate over ggml's
	DecodeRatio   ratio  `json:"decode_ratio"`
	GGMLVersion   string `json:"ggml_version"`
	GGMLBuild     string `json:"ggml_build"`
	AttnlabThread string `json:"attnlab_threads"`
}

// compare runs o.compare rounds of ggml then attnlab on the same job.
func compare(ctx context.Context, o *options, d *decoder, m *model.Model[float32], p *model.Params[float32], j job) error {
	runtime.GOMAXPROCS(o.threads)
	// one untimed generation each first: page faults, ggml's tables,
	// OpenMP's thread team, Go's first allocations
	if _, err := d.generate(ctx, j); err != nil {
		return fmt.Errorf("ggml: %w", err)
	}
	if _, err := attnlabRun(ctx, m, p, j); err != nil {
		return fmt.Errorf("attnlab: %w", err)
	}
	var g, a []run
	for range o.compare {
		rg, err := d.generate(ctx, j)
		if err != nil {
			return fmt.Errorf("ggml: %w", err)
		}
		ra, err := attnlabRun(ctx, m, p, j)
		if err != nil {
			return fmt.Errorf("attnlab: %w", err)
		}
		if !slices.Equal(rg.Tokens, ra.Tokens) {
			return fmt.Errorf("ggml chose %v, attnlab %v: the two disagree, their times are not comparable", rg.Tokens, ra.Tokens)
		}
		g, a = append(g, rg), append(a, ra)
	}
	c := comparison{Rounds: o.compare, Threads: o.threads, Flash: o.flash, KV: o.kv, PromptTokens: len(j.prompt), NewTokens: len(g[0].Tokens),
		SameTokens: true, Tokens: g[0].Tokens, GGMLVersion: ggml.Version(), GGMLBuild: ggml.BuildFlags,
		AttnlabThread: fmt.Sprintf("GOMAXPROCS=%d", runtime.GOMAXPROCS(0))}
	rates := func(rs []run, f func(run) float64) []float64 {
		x := make([]float64, len(rs))
		for i, r := range rs {
			x[i] = f(r)
		}
		return x
	}
	c.GGML = side{median(rates(g, run.prefillRate)), median(rates(g, run.decodeRate))}
	c.Attnlab = side{median(rates(a, run.prefillRate)), median(rates(a, run.decodeRate))}
	ratios := func(f func(run) float64) ratio {
		x := make([]float64, len(g))
		for i := range g {
			x[i] = f(a[i]) / f(g[i])
		}
		return ratio{median(x), slices.Min(x), slices.Max(x)}
	}
	c.PrefillRatio, c.DecodeRatio = ratios(run.prefillRate), ratios(run.decodeRate)
	if o.json {
		return json.NewEncoder(os.Stdout).Encode(c)
	}
	fmt.Printf("%d rounds, ggml then attnlab, same %d tokens each (prompt %d tokens); %d threads; ggml flash %v, KV %s\n",
		c.Rounds, c.NewTokens, c.PromptTokens, c.Threads, c.Flash, c.KV)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tggml tokens/s\tattnlab tokens/s\tattnlab/ggml (median of rounds, range)")
	fmt.Fprintf(tw, "prefill\t%.0f\t%.0f\t%.2f× (%.2f…%.2f)\n", c.GGML.PrefillTokensPerSecond, c.Attnlab.PrefillTokensPerSecond, c.PrefillRatio.Median, c.PrefillRatio.Min, c.PrefillRatio.Max)
	fmt.Fprintf(tw, "decode\t%.0f\t%.0f\t%.2f× (%.2f…%.2f)\n", c.GGML.DecodeTokensPerSecond, c.Attnlab.DecodeTokensPerSecond, c.DecodeRatio.Median, c.DecodeRatio.Min, c.DecodeRatio.Max)
	return tw.Flush()
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	n := len(y)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}
