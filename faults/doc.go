// Package faults is a registry of deliberately broken implementations: the
// negative controls. Each is a correct implementation with one piece replaced
// by a small function holding one bug of the kind the design notes warn
// about (for attention: the reference with one stage of attention.Stages
// replaced). Every fault must be caught
// by at least one check of package checks; the lab reports which.
//
// Some faults keep forward and backward consistent with each other (a wrong
// mask used in both, a wrong head mapping used in both). Finite differences
// cannot see those: they prove that the backward is the derivative of the
// forward as written, not that the forward computes the right thing. Only a
// semantic check catches them, and the registry marks them FDBlind so that
// tests can assert exactly that.
package faults

// Fault is one named bug in an implementation of type I.
type Fault[I any] struct {
	Name    string
	Breaks  string // what is wrong, one line
	Note    string // why the checks that catch it can, and why the others cannot; "" when Breaks says it all
	FDBlind bool   // forward and backward stay consistent: finite differences pass
	Impl    I
}

// with returns a copy of the correct implementation ref with edit applied:
// one piece of it replaced by a broken one.
func with[I any](ref I, edit func(*I)) I {
	edit(&ref)
	return ref
}
