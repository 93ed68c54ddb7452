// Package lab runs the attnlab laboratory. Its registry (Ops) holds one row
// per operation: the correct implementation, its checks and long form, its
// faults, its oracle. For every operation the lab runs each check on the
// correct implementation (all must pass) and on every registered fault
// (each fault must be caught by at least one check), and it sweeps the
// finite-difference step ε. It returns a Report; package report renders it.
package lab

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
	"github.com/attnlab/attnlab/gradcheck"
)

// Options configures a lab run.
type Options struct {
	Ops []string // run only these operations; nil runs all
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

// Counts are the numbers of a report's summary line.
type Counts struct {
	Passed, Checks, Caught, Faults, FDBlind, Ops int
}

// Counts counts the report's checks, faults and operations.
func (r *Report) Counts() Counts {
	c := Counts{Ops: len(r.Ops)}
	for _, op := range r.Ops {
		for _, x := range op.Checks {
			c.Checks++
			if x.Pass {
				c.Passed++
			}
		}
		for _, f := range op.Faults {
			c.Faults++
			if f.Caught() {
				c.Caught++
			}
			if f.FDBlind {
				c.FDBlind++
			}
		}
	}
	return c
}

// CheckInfo describes one check of an operation without running it.
type CheckInfo struct {
	Name  string      `json:"name"`
	Kind  checks.Kind `json:"kind"`
	Claim string      `json:"claim"`
	Limit string      `json:"limit"`
	Long  checks.Long `json:"-"`
}

// FaultInfo describes one fault of an operation without running it.
type FaultInfo struct {
	Name    string `json:"name"`
	Breaks  string `json:"breaks"`
	Note    string `json:"-"`
	FDBlind bool   `json:"fd_blind"`
}

// OpInfo describes an operation of the registry without running it.
type OpInfo struct {
	Op     string         `json:"op"`
	Impl   string         `json:"implementation"`
	Oracle string         `json:"oracle,omitempty"`
	Reads  string         `json:"-"` // what its sized instance reads of checks.Sizes
	Guide  checks.OpGuide `json:"-"`
	Checks []CheckInfo    `json:"checks"`
	Faults []FaultInfo    `json:"faults"`
}

// Check returns the check called name; ok is false when there is none.
func (o OpInfo) Check(name string) (CheckInfo, bool) {
	i := slices.IndexFunc(o.Checks, func(c CheckInfo) bool { return c.Name == name })
	if i < 0 {
		return CheckInfo{}, false
	}
	return o.Checks[i], true
}

// Fault returns the fault called name; ok is false when there is none.
func (o OpInfo) Fault(name string) (FaultInfo, bool) {
	i := slices.IndexFunc(o.Faults, func(f FaultInfo) bool { return f.Name == name })
	if i < 0 {
		return FaultInfo{}, false
	}
	return o.Faults[i], true
}

// Runner is a row of the registry, whatever its implementation type.
type Runner interface {
	Info() OpInfo
	// Run runs every check on the correct implementation and on every
	// fault; when ctx is done it stops after the check in progress with
	// ctx's error.
	Run(ctx context.Context) (OpReport, error)
	// RunFaults runs every check on every fault, spread over the CPUs;
	// when ctx is done it stops after the checks in progress with ctx's
	// error.
	RunFaults(ctx context.Context) ([]FaultOutcome, error)
	// RunFault runs every check on the fault called name; ok is false when
	// the operation has no such fault.
	RunFault(name string) (fo FaultOutcome, ok bool)
	// Instance builds the operation at sizes s on the correct
	// implementation, or on the fault called fault: its float64 case and,
	// with float32, the same case on the float32 path.
	Instance(fault string, s checks.Sizes, seed uint64, float32 bool) (checks.Case[float64], *checks.Case[float32], error)
}

// Info describes the row.
func (o Op[I]) Info() OpInfo {
	info := OpInfo{Op: o.Name, Impl: o.Impl, Oracle: o.Oracle, Reads: o.Suite.Reads, Guide: o.Suite.Guide}
	for _, c := range o.Suite.Checks {
		info.Checks = append(info.Checks, CheckInfo{Name: c.Name, Kind: c.Kind, Claim: c.Claim, Limit: c.Limit, Long: c.Long})
	}
	for _, f := range o.Faults {
		info.Faults = append(info.Faults, FaultInfo{Name: f.Name, Breaks: f.Breaks, Note: f.Note, FDBlind: f.FDBlind})
	}
	return info
}

// Run runs every check on the reference and on every fault.
func (o Op[I]) Run(ctx context.Context) (OpReport, error) {
	r := OpReport{Op: o.Name, Impl: o.Impl}
	for _, c := range o.Suite.Checks {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		res := c.Run(o.Reference)
		res.Check = c.Name
		r.Checks = append(r.Checks, CheckOutcome{Result: res, Kind: c.Kind, Claim: c.Claim, Limit: c.Limit})
	}
	var err error
	r.Faults, err = o.RunFaults(ctx)
	return r, err
}

// RunFaults runs every check on every fault, spread over the CPUs.
func (o Op[I]) RunFaults(ctx context.Context) ([]FaultOutcome, error) {
	out := make([]FaultOutcome, len(o.Faults))
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for x := range work {
				out[x] = runFault(ctx, o.Faults[x], o.Suite.Checks)
			}
		})
	}
	for x := range o.Faults {
		if ctx.Err() != nil {
			break
		}
		work <- x
	}
	close(work)
	wg.Wait()
	return out, ctx.Err()
}

// RunFault runs every check on the fault called name.
func (o Op[I]) RunFault(name string) (FaultOutcome, bool) {
	for _, f := range o.Faults {
		if f.Name == name {
			return runFault(context.Background(), f, o.Suite.Checks), true
		}
	}
	return FaultOutcome{}, false
}

// Instance builds the operation at sizes s.
func (o Op[I]) Instance(fault string, s checks.Sizes, seed uint64, float32 bool) (c64 checks.Case[float64], c32 *checks.Case[float32], err error) {
	impl := o.Reference
	if fault != "" {
		i := slices.IndexFunc(o.Faults, func(f faults.Fault[I]) bool { return f.Name == fault })
		if i < 0 {
			var names []string
			for _, f := range o.Faults {
				names = append(names, f.Name)
			}
			return c64, nil, fmt.Errorf("%s has no fault %q (faults: %s)", o.Name, fault, strings.Join(names, ", "))
		}
		impl = o.Faults[i].Impl
	}
	if o.Suite.At == nil {
		return c64, nil, fmt.Errorf("%s has no instance at chosen sizes", o.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s at these sizes: %v", o.Name, r)
		}
	}()
	c64 = o.Suite.At(impl, s, seed)
	if float32 {
		c := o.Suite.At32(impl, s, seed)
		c32 = &c
	}
	return c64, c32, nil
}

// runFault runs the checks all on f, up to the first check after ctx is
// done.
func runFault[I any](ctx context.Context, f faults.Fault[I], all []checks.Check[I]) FaultOutcome {
	fo := FaultOutcome{Name: f.Name, Breaks: f.Breaks, FDBlind: f.FDBlind, Kinds: map[checks.Kind]int{}}
	for _, c := range all {
		if ctx.Err() != nil {
			break
		}
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

// Find returns the registry row called name.
func Find(name string) (Runner, bool) {
	for _, r := range Ops() {
		if r.Info().Op == name {
			return r, true
		}
	}
	return nil, false
}

// Catalog describes every operation of the registry, in the lab's order.
func Catalog() []OpInfo {
	var out []OpInfo
	for _, r := range Ops() {
		out = append(out, r.Info())
	}
	return out
}

// Names lists the operations of the registry, in the lab's order.
func Names() []string {
	var out []string
	for _, r := range Ops() {
		out = append(out, r.Info().Op)
	}
	return out
}

// SweepSteps are the steps of the ε sweep: 1e-1 down to 1e-12, two per decade.
var SweepSteps = gradcheck.Decades(1e-1, 1e-12, 2)

// Run runs the lab. An unknown name in opt.Ops is an error. When ctx is
// done, Run stops after the operation in progress and returns ctx's error.
func Run(ctx context.Context, opt Options) (*Report, error) {
	for _, name := range opt.Ops {
		if _, ok := Find(name); !ok {
			return nil, fmt.Errorf("lab: unknown operation %q (operations: %s)", name, strings.Join(Names(), ", "))
		}
	}
	start := time.Now()
	r := &Report{}
	for _, o := range Ops() {
		if opt.Ops != nil && !slices.Contains(opt.Ops, o.Info().Op) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		or, err := o.Run(ctx)
		if err != nil {
			return nil, err
		}
		r.Ops = append(r.Ops, or)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sweep, err := checks.EpsSweep(checks.AttentionReference, SweepSteps)
	if err != nil {
		return nil, fmt.Errorf("lab: ε sweep: %w", err)
	}
	r.Sweep = sweep
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}
