package nn

import "fmt"

// Linear is a fully connected layer with its weight in the layout of
// PyTorch's nn.Linear and of Hugging Face checkpoints: w is (Out, In), one row
// per output feature, and the optional bias b is (Out).
type Linear[T Float] struct {
	In, Out int  // input and output features
	Bias    bool // whether the layer has a bias b
}

// Forward computes, for x (n, In) and y (n, Out),
//
//	y = x wᵀ + b        y[i,o] = Σ_k x[i,k]·w[o,k] + b[o]
//
// b must be nil (or empty) when l.Bias is false. y must not overlap x.
//
// In the (Out, In) layout both x[i,:] and w[o,:] are contiguous rows, so the
// inner loop is a dot product of two forward streams; no transpose is needed.
//
// It panics if In or Out is not positive, n is negative, or a slice has the
// wrong length.
func (l Linear[T]) Forward(y, x, w, b []T, n int) {
	l.check("Linear.Forward", "y", "b", y, x, w, b, n)
	In, Out := l.In, l.Out
	if n > 0 && gemm(false, true, n, Out, In, x, In, w, In, 0, y, Out) { // y = x wᵀ
		if l.Bias {
			for i := range n {
				yi := y[i*Out : (i+1)*Out]
				for o := range yi {
					yi[o] += b[o]
				}
			}
		}
		return
	}
	for i := range n {
		xi := x[i*In : (i+1)*In]
		yi := y[i*Out : (i+1)*Out]
		for o := range Out {
			wo := w[o*In : (o+1)*In]
			wo = wo[:len(xi)] // equal lengths let the compiler drop the bounds check on wo[k]
			var s T
			for k, xk := range xi {
				s += xk * wo[k]
			}
			if l.Bias {
				s += b[o]
			}
			yi[o] = s
		}
	}
}

// Backward adds the gradients of a scalar loss into dx (n, In), dw (Out, In)
// and db (Out), given dy = ∂L/∂y (n, Out):
//
//	dx += dy w      dw += dyᵀ x      db += Σ_i dy[i,:]
//
// Backward adds into dx, dw and db; callers zero them. db must be nil (or
// empty) when l.Bias is false. The gradient buffers must not overlap the
// inputs.
//
// The loop order is i, o, k: for each row i and output o the two updates are
// scaled copies of contiguous rows (dx[i,:] += g·w[o,:], dw[o,:] += g·x[i,:]),
// so every inner loop streams memory forward.
//
// It panics if In or Out is not positive, n is negative, or a slice has the
// wrong length.
func (l Linear[T]) Backward(dx, dw, db, dy, x, w []T, n int) {
	l.check("Linear.Backward", "dy", "db", dy, x, w, db, n)
	mustLen("Linear.Backward", "dx", len(dx), n*l.In, "n*In")
	mustLen("Linear.Backward", "dw", len(dw), l.Out*l.In, "Out*In")
	In, Out := l.In, l.Out
	if n > 0 && gemm(false, false, n, In, Out, dy, Out, w, In, 1, dx, In) { // dx += dy w
		gemm(true, false, Out, In, n, dy, Out, x, In, 1, dw, In) // dw += dyᵀ x
		if l.Bias {
			for i := range n {
				for o, g := range dy[i*Out : (i+1)*Out] {
					db[o] += g
				}
			}
		}
		return
	}
	for i := range n {
		xi := x[i*In : (i+1)*In]
		dxi := dx[i*In : (i+1)*In]
		dyi := dy[i*Out : (i+1)*Out]
		for o, g := range dyi {
			// forward was: y[i,o] = Σ_k x[i,k]·w[o,k] + b[o]
			wo := w[o*In : (o+1)*In]
			dwo := dw[o*In : (o+1)*In]
			dxi, wo, dwo = dxi[:len(xi)], wo[:len(xi)], dwo[:len(xi)] // equal lengths: no bounds checks
			// ∂y[i,o]/∂x[i,k] = w[o,k], so dx[i,:] += g·w[o,:]
			for k, wk := range wo {
				dxi[k] += g * wk
			}
			// ∂y[i,o]/∂w[o,k] = x[i,k], so dw[o,:] += g·x[i,:]
			for k, xk := range xi {
				dwo[k] += g * xk
			}
			if l.Bias {
				db[o] += g // ∂y[i,o]/∂b[o] = 1
			}
		}
	}
}

// check validates the sizes shared by Forward and Backward: out is y for the
// forward and dy for the backward (n, Out), bias is b or db.
func (l Linear[T]) check(op, outName, biasName string, out, x, w, bias []T, n int) {
	mustPositive(op, "In", l.In)
	mustPositive(op, "Out", l.Out)
	mustRows(op, n)
	mustLen(op, outName, len(out), n*l.Out, "n*Out")
	mustLen(op, "x", len(x), n*l.In, "n*In")
	mustLen(op, "w", len(w), l.Out*l.In, "Out*In")
	if l.Bias {
		mustLen(op, biasName, len(bias), l.Out, "Out")
	} else if len(bias) != 0 {
		panic(fmt.Sprintf("nn: %s: Bias is false but len(%s) = %d, want 0 (nil)", op, biasName, len(bias)))
	}
}
