package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// Linear returns the faults of Linear: nn.Linear with a broken backward.
func Linear() []Fault[checks.LinearImpl] {
	ref := checks.LinearReference
	backward := func(b func(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int)) checks.LinearImpl {
		return with(ref, func(i *checks.LinearImpl) { i.Backward = b })
	}
	return []Fault[checks.LinearImpl]{
		{Name: "linear-no-bias-grad", Impl: backward(linearNoBiasGrad),
			Breaks: "db never written: the bias is frozen at its initial value"},
		{Name: "linear-dx-uses-w-transposed", Impl: backward(linearDXWithWTransposed),
			Breaks: "dx = dy wᵀ instead of dy w: the slip only a square layer (In == Out) has the shapes to run"},
		{Name: "linear-dw-transposed", Impl: backward(linearDWTransposed),
			Breaks: "dw = xᵀ dy instead of dyᵀ x: x and dy exchanged, which only a square layer has the shapes to run"},
		{Name: "linear-grads-assigned", FDBlind: true, Impl: backward(linearGradsAssigned),
			Breaks: "dx, dw and db written with = instead of +=: a residual's or a micro-batch's gradient in the same buffers is lost"},
	}
}

func linearNoBiasGrad(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int) {
	l.Backward(dx, dw, make([]float64, len(db)), dy, x, w, n) // db goes to a buffer nobody reads
}

// linearDXWithWTransposed reads w[k,o] where w[o,k] belongs. A non-square
// layer has no such product, and gets the right one.
func linearDXWithWTransposed(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int) {
	if l.In != l.Out {
		l.Backward(dx, dw, db, dy, x, w, n)
		return
	}
	l.Backward(make([]float64, len(dx)), dw, db, dy, x, w, n) // dw and db as usual
	D := l.In
	for i := range n {
		for k := range D {
			for o := range D {
				dx[i*D+k] += dy[i*D+o] * w[k*D+o] // w[o*D+k] belongs here
			}
		}
	}
}

// linearDWTransposed accumulates x[i,o]·dy[i,k] into dw[o,k], where
// dy[i,o]·x[i,k] belongs. A non-square layer has no such product, and gets
// the right one.
func linearDWTransposed(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int) {
	if l.In != l.Out {
		l.Backward(dx, dw, db, dy, x, w, n)
		return
	}
	l.Backward(dx, make([]float64, len(dw)), db, dy, x, w, n) // dx and db as usual
	D := l.In
	for i := range n {
		for o := range D {
			for k := range D {
				dw[o*D+k] += x[i*D+o] * dy[i*D+k] // dy[i*D+o] * x[i*D+k] belongs here
			}
		}
	}
}

func linearGradsAssigned(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int) {
	clear(dx)
	clear(dw)
	clear(db)
	l.Backward(dx, dw, db, dy, x, w, n)
}
