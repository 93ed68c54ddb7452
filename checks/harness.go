package checks

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/attnlab/attnlab/attention"
)

// Impl is an attention implementation in float64, the precision every check
// runs in. It computes o (B, Hq, M, Dv) and lse (B, Hq, M) from q, k and v;
// when do is not nil it then adds the gradients into dq, dk and dv. Layout and
// semantics are those of package attention; attention.Stages.Run has this
// signature.
type Impl func(o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error

// Kind groups checks by the sort of evidence they give.
type Kind string

const (
	// Gradient checks compare the backward with finite differences of the
	// forward. They prove agreement with the forward as implemented, not that
	// the forward computes the right thing.
	Gradient Kind = "finite-difference"
	// Semantic checks test properties the task requires (what may be seen,
	// what must not change) that finite differences cannot see.
	Semantic Kind = "semantic"
	// Contract checks test the calling contract: accumulation into gradient
	// buffers and the rejection of rows with nothing to attend to.
	Contract Kind = "contract"
)

// A Check tests one property of an implementation of type I (an Impl for
// attention; a pair of forward and backward functions for the other ops).
type Check[I any] struct {
	Name  string
	Kind  Kind
	Claim string // the equation or invariant tested, in one line
	Limit string // what a pass cannot prove
	Run   func(I) Result
}

// Result is the outcome of one check on one implementation.
type Result struct {
	Check  string  `json:"check"`
	Pass   bool    `json:"pass"`
	Detail string  `json:"detail"` // what was measured, one line
	Error  float64 `json:"error"`  // the worst measured error, where there is one
	// Errored is set when the check failed because the implementation
	// returned an error or panicked instead of computing.
	Errored bool `json:"errored,omitempty"`
}

func pass(format string, a ...any) Result {
	return Result{Pass: true, Detail: fmt.Sprintf(format, a...)}
}
func fail(format string, a ...any) Result { return Result{Detail: fmt.Sprintf(format, a...)} }

// errored is the failure of an implementation that returned an error (or
// panicked) where it should have computed; format ends in %v for err.
func errored(err error, format string, a ...any) Result {
	return Result{Errored: true, Detail: fmt.Sprintf(format, append(a, err)...)}
}

// tensors holds the inputs of one attention call.
type tensors struct {
	q, k, v, do []float64
}

// outputs holds what an implementation returned.
type outputs struct {
	o, lse, dq, dk, dv []float64
}

// random returns inputs for c drawn from N(0, 1) with a fixed seed; do is a
// fixed random G, so the scalar loss Σ O ⊙ G weighs every output element.
func random(c *attention.Config, seed uint64) tensors {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	return tensors{
		q:  fill(c.B * c.Hq * c.M * c.D),
		k:  fill(c.B * c.Hkv * c.N * c.D),
		v:  fill(c.B * c.Hkv * c.N * c.Dv),
		do: fill(c.B * c.Hq * c.M * c.Dv),
	}
}

// call runs impl on fresh zeroed buffers; do may be nil for a forward only.
// A panic inside impl is returned as an error, so a broken implementation
// fails its checks instead of stopping the run.
func call(impl Impl, c *attention.Config, t tensors) (out outputs, err error) {
	out = outputs{
		o:   make([]float64, c.B*c.Hq*c.M*c.Dv),
		lse: make([]float64, c.B*c.Hq*c.M),
		dq:  make([]float64, len(t.q)),
		dk:  make([]float64, len(t.k)),
		dv:  make([]float64, len(t.v)),
	}
	err = protect(func() error {
		return impl(out.o, out.lse, out.dq, out.dk, out.dv, t.q, t.k, t.v, t.do, c)
	})
	return out, err
}

func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return f()
}

// diff returns the worst mixed error |a-b| / (1 + max(|a|, |b|)) and its index;
// NaN anywhere counts as infinite error.
func diff(a, b []float64) (worst float64, at int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	for i := range a {
		if a[i] == b[i] { // equal infinities included
			continue
		}
		d := math.Abs(a[i]-b[i]) / (1 + max(math.Abs(a[i]), math.Abs(b[i])))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// pair names a computed tensor and the value it must match.
type pair struct {
	name      string
	got, want []float64
}

// compare checks every pair within tol and returns the worst error, and a
// message naming the first element beyond tol ("" when all agree).
func compare(tol float64, ps ...pair) (worst float64, msg string) {
	for _, p := range ps {
		d, at := diff(p.got, p.want)
		if d > worst {
			worst = d
		}
		if d > tol && msg == "" {
			msg = fmt.Sprintf("%s[%d] = %.6g, want %.6g (error %.2g > %.2g)", p.name, at, val(p.got, at), val(p.want, at), d, tol)
		}
	}
	return worst, msg
}

func val(a []float64, i int) float64 {
	if i < 0 || i >= len(a) {
		return math.NaN()
	}
	return a[i]
}

func clone(x []float64) []float64 { return append([]float64(nil), x...) }

// headRows copies rows [from, to) of every (batch, head) block of a tensor
// laid out (B, H, T, W) into a new (B, H, to-from, W) tensor.
func headRows(x []float64, B, H, T, W, from, to int) []float64 {
	out := make([]float64, 0, B*H*(to-from)*W)
	for bh := range B * H {
		out = append(out, x[(bh*T+from)*W:(bh*T+to)*W]...)
	}
	return out
}

// batchRows is headRows for per-token data laid out (B, T).
func batchRows[E any](x []E, B, T, from, to int) []E {
	if x == nil {
		return nil
	}
	out := make([]E, 0, B*(to-from))
	for b := range B {
		out = append(out, x[b*T+from:b*T+to]...)
	}
	return out
}
