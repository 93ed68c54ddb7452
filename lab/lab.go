// Package lab runs the attnlab laboratory. For every operation it runs each
// check on the correct implementation (all must pass) and on every
// registered fault (each fault must be caught by at least one check), and it
// sweeps the finite-difference step ε. It returns a Report; printing is the
// caller's business, except the sweep plot, written when Options.PlotPath is
// set.
package lab

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/internal/plots"
)

// Options configures a lab run.
type Options struct {
	PlotPath string   // where to write the ε-sweep PNG; "" writes none
	Ops      []string // run only these operations; nil runs all
}

// CheckOutcome is one check run on the correct implementation.
type CheckOutcome struct {
	checks.Result
	Kind  checks.Kind `json:"kind"`
	Claim string      `json:"claim"`
	Limit string      `json:"limit"`
}

// FaultOutcome is one fault run through every check of its operation.
type FaultOutcome struct {
	Name     string              `json:"name"`
	Breaks   string              `json:"breaks"`
	FDBlind  bool                `json:"fd_blind"` // the registry says finite differences cannot see it
	CaughtBy []string            `json:"caught_by"`
	Results  []checks.Result     `json:"results"`
	Kinds    map[checks.Kind]int `json:"caught_by_kind"` // catches by measurement, not by error, per kind
	// FDErrored is set when a finite-difference check failed because the
	// implementation returned an error, not by measuring a gradient.
	FDErrored bool `json:"fd_errored,omitempty"`
}

// Caught reports whether at least one check failed on the fault.
func (f FaultOutcome) Caught() bool { return len(f.CaughtBy) > 0 }

// OpReport is the outcome for one operation.
type OpReport struct {
	Op     string         `json:"op"`
	Impl   string         `json:"implementation"`
	Checks []CheckOutcome `json:"checks"`
	Faults []FaultOutcome `json:"faults"`
}

// Report is the outcome of a lab run.
type Report struct {
	Ops     []OpReport   `json:"ops"`
	Sweep   checks.Sweep `json:"eps_sweep"`
	Plot    string       `json:"plot,omitempty"`
	Seconds float64      `json:"seconds"`
}

// OK reports whether every check passed on every correct implementation and
// every fault was caught.
func (r *Report) OK() bool {
	for _, op := range r.Ops {
		for _, c := range op.Checks {
			if !c.Pass {
				return false
			}
		}
		for _, f := range op.Faults {
			if !f.Caught() {
				return false
			}
		}
	}
	return true
}

// Suite is one operation's correct implementation, checks and faults.
type Suite[I any] struct {
	Op        string
	Impl      string // what the correct implementation is
	Reference I
	Checks    []checks.Check[I]
	Faults    []faults.Fault[I]
}

// Runner is a Suite of any implementation type.
type Runner interface {
	Name() string
	Run() OpReport
	RunFaults() []FaultOutcome
}

// Name returns the operation's name.
func (s Suite[I]) Name() string { return s.Op }

// Run runs every check on the reference and on every fault.
func (s Suite[I]) Run() OpReport {
	r := OpReport{Op: s.Op, Impl: s.Impl}
	for _, c := range s.Checks {
		res := c.Run(s.Reference)
		res.Check = c.Name
		r.Checks = append(r.Checks, CheckOutcome{Result: res, Kind: c.Kind, Claim: c.Claim, Limit: c.Limit})
	}
	r.Faults = s.RunFaults()
	return r
}

// RunFaults runs every check on every fault, spread over the CPUs.
func (s Suite[I]) RunFaults() []FaultOutcome {
	out := make([]FaultOutcome, len(s.Faults))
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for x := range work {
				out[x] = runFault(s.Faults[x], s.Checks)
			}
		})
	}
	for x := range s.Faults {
		work <- x
	}
	close(work)
	wg.Wait()
	return out
}

func runFault[I any](f faults.Fault[I], all []checks.Check[I]) FaultOutcome {
	fo := FaultOutcome{Name: f.Name, Breaks: f.Breaks, FDBlind: f.FDBlind, Kinds: map[checks.Kind]int{}}
	for _, c := range all {
		res := c.Run(f.Impl)
		res.Check = c.Name
		fo.Results = append(fo.Results, res)
		if !res.Pass {
			fo.CaughtBy = append(fo.CaughtBy, c.Name)
			if !res.Errored { // an error is a catch, but not one of this kind of evidence
				fo.Kinds[c.Kind]++
			} else if c.Kind == checks.Gradient {
				fo.FDErrored = true
			}
		}
	}
	return fo
}

// Suites returns every operation's suite, in the order the lab runs them.
func Suites() []Runner {
	return []Runner{
		Suite[checks.Impl]{Op: "attention", Impl: "reference attention, float64",
			Reference: attention.Reference[float64]().Run, Checks: checks.All(), Faults: faults.Attention()},
		Suite[checks.Impl]{Op: "attention-flash", Impl: "fused FlashAttention-2 style kernel (attention.FlashRun), float64",
			Reference: attention.FlashRun[float64],
			Checks:    append(checks.All(), checks.AgreesWith("reference", attention.Reference[float64]().Run))},
		Suite[checks.RMSNormImpl]{Op: "rmsnorm", Impl: "nn.RMSNorm, float64",
			Reference: checks.RMSNormReference, Checks: checks.RMSNorm(), Faults: faults.RMSNorm()},
		Suite[checks.RoPEImpl]{Op: "rope", Impl: "nn.RoPE, float64",
			Reference: checks.RoPEReference, Checks: checks.RoPE(), Faults: faults.RoPE()},
		Suite[checks.SwiGLUImpl]{Op: "swiglu", Impl: "nn.SwiGLU, float64",
			Reference: checks.SwiGLUReference, Checks: checks.SwiGLU(), Faults: faults.SwiGLU()},
		Suite[checks.CrossEntropyImpl]{Op: "crossentropy", Impl: "nn.CrossEntropy, float64, ignore index −100",
			Reference: checks.CrossEntropyReference, Checks: checks.CrossEntropy(), Faults: faults.CrossEntropy()},
		Suite[checks.LinearImpl]{Op: "linear", Impl: "nn.Linear, float64",
			Reference: checks.LinearReference, Checks: checks.Linear(), Faults: faults.Linear()},
		Suite[checks.EmbeddingImpl]{Op: "embedding", Impl: "nn.Embedding, float64",
			Reference: checks.EmbeddingReference, Checks: checks.Embedding(), Faults: faults.Embedding()},
		Suite[checks.LayerImpl]{Op: "attention-layer", Impl: "attention.Layer (projections, RoPE, GQA attention), float64",
			Reference: checks.LayerReference, Checks: checks.Layer(), Faults: faults.Layer()},
		Suite[checks.BlockImpl]{Op: "block", Impl: "model.Block (RMSNorm, attention layer, SwiGLU, residuals), float64",
			Reference: checks.BlockReference, Checks: checks.Block(), Faults: faults.Block()},
		Suite[checks.DecoderImpl]{Op: "decoder", Impl: "model.Model: training pass and KV-cache decoding, float64",
			Reference: checks.DecoderReference, Checks: checks.Decoder(), Faults: faults.Decoder()},
		Suite[checks.InfoNCEImpl]{Op: "infonce", Impl: "retrieve.MeanPool, L2Norm, InfoNCE: the contrastive head of a dual encoder, float64", Reference: checks.InfoNCEReference, Checks: checks.InfoNCE(), Faults: faults.InfoNCE()},
		Suite[checks.ListwiseImpl]{Op: "listwise", Impl: "retrieve.PairPool and Listwise: the pooling, scoring head and listwise loss of a cross-encoder reranker, float64",
			Reference: checks.ListwiseReference, Checks: checks.Listwise(), Faults: faults.Listwise()},
	}
}

// SweepSteps are the steps of the ε sweep: 1e-1 down to 1e-12, two per decade.
var SweepSteps = gradcheck.Decades(1e-1, 1e-12, 2)

// Run runs the lab.
func Run(opt Options) (*Report, error) {
	start := time.Now()
	r := &Report{}
	for _, s := range Suites() {
		if opt.Ops != nil && !slices.Contains(opt.Ops, s.Name()) {
			continue
		}
		r.Ops = append(r.Ops, s.Run())
	}
	sweep, err := checks.EpsSweep(attention.Reference[float64]().Run, SweepSteps)
	if err != nil {
		return nil, fmt.Errorf("lab: ε sweep: %w", err)
	}
	r.Sweep = sweep
	if opt.PlotPath != "" {
		if err := plotSweep(opt.PlotPath, sweep); err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
		r.Plot = opt.PlotPath
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

func plotSweep(path string, s checks.Sweep) error {
	series := func(name string, rows gradcheck.SweepRows) plots.Series {
		sr := plots.Series{Name: name}
		for _, row := range rows {
			sr.X = append(sr.X, row.Eps)
			sr.Y = append(sr.Y, row.MaxAbs)
		}
		return sr
	}
	return plots.EpsSweepPNG(path, "Finite-difference error of attention gradients against the step",
		[]plots.Series{series("central (2-point)", s.Central), series("4-point", s.Precise)})
}
