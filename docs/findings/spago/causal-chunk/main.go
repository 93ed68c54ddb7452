// spaGO v1.1.0's causal self-attention with a key/value cache: a chunk of
// several new tokens after a cache does not see the cached tokens its
// positions allow, while one token at a time does. A causal
// selfattention.Model (random weights, seed 1) runs over 6 tokens three
// ways: in one pass; the first 3, then the last 3 as one chunk with the
// cache of the first pass; and one token at a time with the cache. Run
// from the repository:
//
//	go -C docs/findings/spago run ./causal-chunk
//
// It exits 1 while the chunk's outputs differ from the full pass's.
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/rand"
	"github.com/nlpodyssey/spago/nn/attention/selfattention"
)

const (
	size   = 4
	tokens = 6
	cached = 3
)

func main() {
	model := selfattention.New[float64](selfattention.Config{
		InputSize: size, QuerySize: size, KeySize: size, ValueSize: size,
		ScaleFactor: 1 / math.Sqrt(size), UseCausalMask: true,
	})
	model.Init(rand.NewLockedRand(1))
	r := rand.NewLockedRand(2)
	x := make([]mat.Tensor, tokens)
	for t := range x {
		v := make([]float64, size)
		for i := range v {
			v[i] = 2*r.Float64() - 1
		}
		x[t] = mat.NewDense[float64](mat.WithBacking(v))
	}

	full, _, _ := model.Forward(selfattention.Cache{}, x, x)

	// the first tokens, then the rest as one chunk after their cache
	_, _, cache := model.Forward(selfattention.Cache{}, x[:cached], x[:cached])
	chunk, _, _ := model.Forward(cache, x[cached:], x[cached:])

	// one token at a time
	var step selfattention.Cache
	stepped := make([]mat.Tensor, tokens)
	for t := range tokens {
		var out []mat.Tensor
		out, _, step = model.Forward(step, x[t:t+1], x[t:t+1])
		stepped[t] = out[0]
	}

	fmt.Printf("token  full pass                               chunk of %d after %d cached                one at a time\n", tokens-cached, cached)
	chunkErr, stepErr := 0.0, 0.0
	for t := range tokens {
		f, s := data(full[t]), data(stepped[t])
		stepErr = max(stepErr, diff(f, s))
		c := "(cached)"
		if t >= cached {
			cv := data(chunk[t-cached])
			chunkErr = max(chunkErr, diff(f, cv))
			c = fmt.Sprintf("%.4f", cv)
		}
		fmt.Printf("%5d  %.4f  %-38s  %.4f\n", t, f, c, s)
	}
	fmt.Printf("max |chunk − full| = %.3g, max |one at a time − full| = %.3g\n", chunkErr, stepErr)
	if chunkErr > 1e-9 {
		fmt.Printf("the chunk's query i sees keys 0..i of the cache, not 0..%d+i\n", cached)
		os.Exit(1)
	}
}

func data(t mat.Tensor) []float64 { return t.Value().Data().F64() }

func diff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}
