package checks

import (
	"fmt"
	"math"
	"strings"
)

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
	// Precision checks compare the float32 path of an implementation with
	// the float64 reference, within what float32 rounding explains.
	Precision Kind = "float32"
)

// Text says in a phrase what sort of evidence a kind of check gives.
func (k Kind) Text() string {
	switch k {
	case Gradient:
		return "compares the backward with finite differences of the forward"
	case Semantic:
		return "tests a property the task requires, which finite differences cannot see"
	case Contract:
		return "tests the calling contract"
	case Precision:
		return "compares the float32 path with the float64 reference"
	}
	return string(k)
}

// A Check tests one property of an implementation of type I (an Impl for
// attention; a struct of forward and backward functions for the other ops).
// It carries its own explanation: Claim and Limit in one line each, Long
// for the reader who wants the whole argument.
type Check[I any] struct {
	Name  string
	Kind  Kind
	Claim string // the equation or invariant tested, in one line
	Limit string // what a pass cannot prove, in one line
	Long  Long
	Run   func(I) Result
}

// Long is the long form of a check, printed by attnlab explain and the
// report. Shapes is rendered from the configurations the check runs on.
type Long struct {
	Tests  string // the equation or invariant tested, in full
	Shapes string // the shapes involved
	Proves string // what a pass proves
	Cannot string // what a pass cannot prove, beyond Limit
}

// Complete reports whether every part of the long form is written.
func (l Long) Complete() bool {
	return l.Tests != "" && l.Shapes != "" && l.Proves != "" && l.Cannot != ""
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

// measured sets the worst error of r.
func measured(r Result, e float64) Result {
	r.Error = e
	return r
}

// errored is the failure of an implementation that returned an error (or
// panicked) where it should have computed; format ends in %v for err.
func errored(err error, format string, a ...any) Result {
	return Result{Errored: true, Detail: fmt.Sprintf(format, append(a, err)...)}
}

// protect runs f, returning a panic inside it as an error, so that a broken
// implementation fails its checks instead of stopping the run.
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

// compared is the Result of a comparison measured by worst: a failure with
// the mismatch msg, or a pass described by the format ok and its arguments
// when msg is "".
func compared(worst float64, msg, ok string, a ...any) Result {
	if msg != "" {
		return measured(fail("%s", msg), worst)
	}
	return measured(pass(ok, a...), worst)
}

func val(a []float64, i int) float64 {
	if i < 0 || i >= len(a) {
		return math.NaN()
	}
	return a[i]
}

func clone(x []float64) []float64 { return append([]float64(nil), x...) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// list joins the values of xs as "a, b and c".
func list[E any](xs []E) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
