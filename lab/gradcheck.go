package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/gradcheck"
)

// GradOptions describe one finite-difference check of an operation of the
// registry at chosen sizes (attnlab gradcheck).
type GradOptions struct {
	Op         string       // an operation of the registry
	Fault      string       // one of its faults instead of the correct implementation ("" none)
	Sizes      checks.Sizes // the instance
	Float32    bool         // analytic gradients from the float32 path
	Directions int          // random directions instead of every element (0: every element)
	Sweep      bool         // the error against ε from 1e-1 to 1e-12 instead
	gradcheck.Options
}

// Validate checks o's numbers before any work, naming each by its flag of
// attnlab gradcheck: a step and a tolerance finite and >= 0 (0: the
// default), directions >= 0, every count of the sizes in [1, MaxSize], a
// window >= 0, query heads a multiple of the key/value heads, and the
// memory of the operation's instance within what the machine has.
func (o GradOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"-eps", o.Eps}, {"-rel", o.Rel}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s %g: want a finite number >= 0 (0: the default)", f.name, f.v)
		}
	}
	if o.Directions < 0 {
		return fmt.Errorf("-directions %d: want >= 0", o.Directions)
	}
	s := o.Sizes
	for _, v := range []struct {
		name string
		v    int
	}{{"-b", s.B}, {"-t", s.T}, {"-m", s.M}, {"-n", s.N}, {"-dim", s.Dim}, {"-hq", s.Hq}, {"-hkv", s.Hkv}, {"-d", s.D}, {"-dv", s.Dv}, {"-f", s.F}} {
		if v.v < 1 || v.v > MaxSize {
			return fmt.Errorf("%s %d: want in [1, %d]", v.name, v.v, MaxSize)
		}
	}
	if s.Window < 0 {
		return fmt.Errorf("-window %d: want >= 0", s.Window)
	}
	if s.Hq%s.Hkv != 0 {
		return fmt.Errorf("-hq %d is not a multiple of -hkv %d", s.Hq, s.Hkv)
	}
	return o.checkMemory()
}

// GradResult is what GradCheck measured.
type GradResult struct {
	Op, Case string // the operation and its instance, in words
	What     string // "the correct implementation" or "fault NAME"
	Report   gradcheck.Report
	Sweep    gradcheck.SweepRows // with Sweep
	// FaultErr is set when the fault failed to compute where the correct
	// implementation computes: the fault is then caught without a
	// measurement.
	FaultErr error
}

// A SizeError is a size the operation does not take, or a configuration in
// which a valid query sees no key: the caller's mistake, not a failure.
type SizeError struct{ Err error }

func (e *SizeError) Error() string { return e.Err.Error() }
func (e *SizeError) Unwrap() error { return e.Err }

// GradCheck runs the check o describes. It stops with ctx's error when ctx
// is done, between two evaluations of the loss.
func GradCheck(ctx context.Context, o GradOptions) (*GradResult, error) {
	op, ok := Find(o.Op)
	if !ok {
		return nil, &SizeError{fmt.Errorf("unknown operation %q (operations: %s)", o.Op, strings.Join(Names(), ", "))}
	}
	c64, c32, err := op.Instance(o.Fault, o.Sizes, o.Seed, o.Float32)
	if err != nil {
		return nil, &SizeError{err}
	}
	res := &GradResult{Op: o.Op, Case: c64.Name, What: "the correct implementation"}
	if o.Fault != "" {
		res.What = "fault " + o.Fault
	}
	loss, params, err := checks.Prepare(c64, c32, o.Seed)
	var empty *attention.EmptyRowError
	switch {
	case err == nil:
	case o.Fault != "":
		res.FaultErr = err // a fault may fail where the correct implementation computes
		return res, nil
	case errors.As(err, &empty):
		s := o.Sizes
		return nil, &SizeError{fmt.Errorf("-m %d -n %d -causal=%v -window %d: %v; with -causal the m queries follow a cache of n − m keys, so want -m <= -n, or -causal=false",
			s.M, s.N, s.Causal, s.Window, err)}
	default:
		return nil, &SizeError{fmt.Errorf("%s at these sizes: %v", o.Op, err)} // the correct implementation fails only on sizes it does not take
	}
	opt := o.Options
	if opt.Rel == 0 && o.Float32 {
		opt.Rel, opt.Abs = 1e-3, 1e-5
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case o.Sweep:
		res.Sweep, err = gradcheck.SweepContext(ctx, loss, params, gradcheck.Decades(1e-1, 1e-12, 2), opt)
	case o.Directions > 0:
		if opt.Abs == 0 { // a directional derivative is measured against ‖∇L‖
			opt.Abs = max(opt.Rel, gradcheck.DefaultRel) * checks.GradNorm(params)
		}
		res.Report, err = gradcheck.DirectionalContext(ctx, loss, params, o.Directions, opt)
	default:
		res.Report, err = gradcheck.CheckContext(ctx, loss, params, opt)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
