// Package gradcheck compares analytic gradients with finite-difference
// estimates.
//
// A hand-written backward pass (attention, RoPE, RMSNorm and so on) is
// checked by writing the forward pass as a scalar loss L(x) over its
// inputs, computing the analytic gradient dL/dx once with the backward pass,
// and comparing it with a numeric estimate obtained by evaluating L at
// perturbed inputs. Check and Directional return a Report instead of
// failing a test, so that a test can assert that a deliberately broken
// gradient is caught as well as that a correct one passes:
//
//	r := gradcheck.Check(loss, []gradcheck.Param{{Name: "q", X: q, Grad: dq}}, gradcheck.Options{})
//	if err := r.Err(); err != nil {
//		t.Fatal(err)
//	}
//
// # Estimators
//
// Check perturbs one element x_i of one Param at a time by a step h (the
// Eps option) and evaluates the loss at the perturbed points. The default
// estimator is the central difference
//
//	n_i = (L(x + h e_i) − L(x − h e_i)) / 2h
//
// and with Options.Precise it is the 4-point stencil
//
//	n_i = (L(x − 2h e_i) − 8 L(x − h e_i) + 8 L(x + h e_i) − L(x + 2h e_i)) / 12h.
//
// Each element costs 2 (or 4) evaluations of the loss, so Check can be
// restricted to a seeded sample of elements of each Param with
// Options.MaxPerParam; the first and last elements and the elements listed
// in Options.Always are always part of the sample, which is how a test makes
// sure that boundary elements (for instance the first masked key of a causal
// attention row) are covered.
//
// Directional is the fast check for tensors too large to be perturbed one
// element at a time: for a few seeded random unit directions u over the
// concatenation of all Params it compares the numeric directional derivative
// (L(x + hu) − L(x − hu)) / 2h with the analytic Σ_i Grad_i u_i. An error
// δ in gradient element i changes the analytic value by δu_i, where |u_i| is
// typically 1/√N for N elements in all, so a few directions expose any error
// well above √N times the tolerance; the price is that the report cannot say
// which element is wrong, only that one is.
//
// Every perturbation is undone by writing back the saved value, so the
// parameters are bit-for-bit unchanged after a check, and a loss that
// modifies its inputs makes the check panic instead of silently producing
// a meaningless estimate.
//
// # Error model
//
// The numeric estimate carries two errors of opposite behaviour in h.
// The truncation error of the stencil falls as h falls: it is about
// h²|∂³L|/6 for the central difference and h⁴|∂⁵L|/30 for the 4-point
// stencil. The rounding error grows as h falls: each evaluation of L is
// only correct to about u|L|, where u = 2⁻⁵³ ≈ 1.1e-16 is the unit
// roundoff of float64, and the difference of two nearly equal values divided
// by h magnifies that to about u|L|/h (1.5u|L|/h for the 4-point stencil).
// Balancing the two terms for a loss and derivatives of order one gives a
// best step near u^(1/3) ≈ 5e-6 for the central difference, with an error of
// about u^(2/3) ≈ 2e-11, and near u^(1/5) ≈ 7e-4 for the 4-point stencil,
// with an error of about u^(4/5) ≈ 2e-13. The default steps, 1e-6 and 1e-3,
// are close to those optima. Sweep measures the error over a range of steps (see
// Decades) and makes both regimes visible: on a log-log plot the error falls
// with slope 2 (or 4) at large steps and rises with slope −1 at small ones.
// SweepRows.Best and SweepRows.Slopes summarise such a sweep.
//
// The step is absolute, not relative to |x_i|, and the rounding term scales
// with |L|, so a loss much larger than one, or inputs much larger than one,
// call for a larger step. The default tolerance follows both terms (see
// Tolerances): it is estimated at the step in use.
//
// # Why float64
//
// Everything here is float64. In float32 the unit roundoff is 6e-8 and the
// best achievable central-difference error is about 1.5e-5 relative to |L|,
// too close to the size of the gradient errors a check must catch (a missing
// term in a softmax backward is often that small). Kernels written in float32
// are checked through a float64 reference implementation, or by computing
// the loss of the float32 kernel in float64 with a step and tolerance chosen
// for float32 rounding.
//
// # Tolerances
//
// An element passes when
//
//	|a − n| ≤ Abs + Rel·max(|a|, |n|) + 2·(T + R)
//
// where a is the analytic and n the numeric value, and T and R estimate the
// error of n itself at the step h actually used:
//
//   - T, truncation: the difference between n and the same derivative from
//     the next wider stencil on the same points, |D₂(h) − D₄(h)| for the
//     central difference and |D₄(h) − D₆(h)| for the 4-point stencil (D₆ the
//     6-point stencil on ±h, ±2h, ±3h). The wider stencil's own truncation
//     is smaller by a factor h², so the difference is n's truncation error
//     h²L‴/6 (or h⁴L⁽⁵⁾/30). It costs two more evaluations per element.
//   - R, rounding: g·η/h, where g is the stencil's gain Σ|wₖ|/den (1 for
//     the central difference, 3/2 for the 4-point stencil) and η the
//     rounding noise of one evaluation of L. η = max(3σ̂, u·|L(x)|), u = 2⁻⁵³,
//     with σ̂ measured once per check: L is evaluated at 11 points
//     x + k·10⁻³h·v, k = −5…5, along a random unit direction v; on that
//     scale L is a polynomial up to its rounding, so its 4th, 5th and 6th
//     differences are rounding alone, and σ̂ is the largest of
//     σ̂ₖ² = γₖ·mean((Δᵏ L)²), γₖ = (k!)²/(2k)! (Moré and Wild, "Estimating
//     computational noise", 2011). Measuring η instead of taking u·|L| covers
//     a loss that sums large terms of both signs, whose rounding is far
//     above u·|L|.
//
// The factor 2 is the safety margin of the estimates. A wrong gradient is
// wrong by an amount of the order of the gradient, far above T + R, so the
// estimate does not let real errors through; it removes the false alarms of
// a fixed tolerance (at h = 1e-6 the rounding term alone is about
// 1e-10·|L|, above 1e-7 relative for a gradient element of 1e-3).
//
// The defaults are Abs = 1e-10 and Rel = 1e-7. Options.Fixed drops 2(T + R)
// and its evaluations, for a caller that has chosen Abs and Rel from a Sweep
// of its own error regime. The comparison is written so that a NaN or
// infinite analytic or numeric value always fails. The report also gives, per Param
// and overall, the largest absolute difference, the largest elementwise
// relative difference, and the norm-wise relative error
// max|a − n| / max|a|, which is the most robust single number when some
// gradient elements are close to zero; Report.Noise is the η used, and
// each Element carries its T and R.
//
// # Building the scalar loss
//
// A layer maps inputs to an output tensor O, not to a scalar. Reduce it with
// a fixed random tensor G of the same shape,
//
//	L = Σ_k O_k G_k,
//
// so that dL/dO = G, and run the backward pass with G as the upstream
// gradient. G must be random (for instance Gaussian from a fixed seed), not
// all ones: with L = Σ O, errors that are constant along a reduced axis
// cancel, a softmax output sums to one so its gradient is identically zero,
// and an output element that is computed from the wrong input row still
// contributes the same total. A random G gives every output element its own
// weight, so every wrong term in the backward pass shows up in dL/dx.
package gradcheck
