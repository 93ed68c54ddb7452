// Package lab runs the attnlab laboratory: every check on the reference
// attention (which must pass), every check on every registered fault (each
// must be caught by at least one), and the finite-difference ε sweep. It
// returns a Report; printing and files are the caller's business, except the
// sweep plot, written when Options.PlotPath is set.
package lab

import (
	"fmt"
	"runtime"
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
	PlotPath string // where to write the ε-sweep PNG; "" writes none
}

// CheckOutcome is one check run on the reference implementation.
type CheckOutcome struct {
	checks.Result
	Kind  checks.Kind `json:"kind"`
	Claim string      `json:"claim"`
	Limit string      `json:"limit"`
}

// FaultOutcome is one fault run through every check.
type FaultOutcome struct {
	Name     string              `json:"name"`
	Breaks   string              `json:"breaks"`
	FDBlind  bool                `json:"fd_blind"` // the registry says finite differences cannot see it
	CaughtBy []string            `json:"caught_by"`
	Results  []checks.Result     `json:"results"`
	Kinds    map[checks.Kind]int `json:"caught_by_kind"`
}

// Caught reports whether at least one check failed on the fault.
func (f FaultOutcome) Caught() bool { return len(f.CaughtBy) > 0 }

// Report is the outcome of a lab run.
type Report struct {
	Impl    string         `json:"implementation"`
	Checks  []CheckOutcome `json:"checks"`
	Faults  []FaultOutcome `json:"faults"`
	Sweep   checks.Sweep   `json:"eps_sweep"`
	Plot    string         `json:"plot,omitempty"`
	Seconds float64        `json:"seconds"`
}

// OK reports whether every check passed on the reference and every fault was
// caught.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	for _, f := range r.Faults {
		if !f.Caught() {
			return false
		}
	}
	return true
}

// SweepSteps are the steps of the ε sweep: 1e-1 down to 1e-12, two per decade.
var SweepSteps = gradcheck.Decades(1e-1, 1e-12, 2)

// Run runs the lab.
func Run(opt Options) (*Report, error) {
	start := time.Now()
	ref := attention.Reference[float64]().Run
	all := checks.All()
	r := &Report{Impl: "reference attention, float64"}
	for _, c := range all {
		res := c.Run(ref)
		res.Check = c.Name
		r.Checks = append(r.Checks, CheckOutcome{Result: res, Kind: c.Kind, Claim: c.Claim, Limit: c.Limit})
	}
	r.Faults = RunFaults(faults.All(), all)
	sweep, err := checks.EpsSweep(ref, SweepSteps)
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

// RunFaults runs every check on every fault, spread over the CPUs.
func RunFaults(fs []faults.Fault, all []checks.Check) []FaultOutcome {
	out := make([]FaultOutcome, len(fs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for x := range work {
				out[x] = runFault(fs[x], all)
			}
		})
	}
	for x := range fs {
		work <- x
	}
	close(work)
	wg.Wait()
	return out
}

func runFault(f faults.Fault, all []checks.Check) FaultOutcome {
	fo := FaultOutcome{Name: f.Name, Breaks: f.Breaks, FDBlind: f.FDBlind, Kinds: map[checks.Kind]int{}}
	for _, c := range all {
		res := c.Run(f.Impl)
		res.Check = c.Name
		fo.Results = append(fo.Results, res)
		if !res.Pass {
			fo.CaughtBy = append(fo.CaughtBy, c.Name)
			fo.Kinds[c.Kind]++
		}
	}
	return fo
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
