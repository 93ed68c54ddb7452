// Package checks is the verification harness of attnlab: every property the
// lab proves of an operation is a Check here, and every operation has one
// Suite of them, with the long form of the operation (OpGuide) and a
// builder of one instance of it at chosen sizes (for attnlab gradcheck).
//
// # Implementations under test
//
// An operation's implementation type (Impl for attention, RMSNormImpl,
// DecoderImpl, …) holds its float64 path, which every check runs, and its
// float32 path, which the float32 check compares with the float64
// reference. The correct implementations are the …Reference variables;
// package faults holds broken copies of them, and package lab runs every
// check on both.
//
// # One harness
//
// An operation presents itself to the generic checks as Cases: one
// differentiable function at a fixed point, L = Σ out ⊙ G with a fixed
// random G, in either precision. From its cases every operation gets the
// same four checks: fd-elements (every element against the 4-point
// difference), fd-directions (random directions on a larger case),
// accumulates (the += contract of backward) and float32 (the float32 path
// against the float64 reference). Its semantic checks test what finite
// differences cannot see.
//
// # Self-describing checks
//
// A Check carries its Claim and Limit in one line each and a Long form:
// what it tests, the shapes (rendered from the configurations it runs on,
// never typed apart from them), what a pass proves and what it cannot.
// attnlab explain and the HTML report print them; a check without a
// complete long form fails package lab's tests.
package checks
