package checks

// OpGuide explains one operation: what it computes and how the gradient
// flows back through it, for attnlab explain and the report.
type OpGuide struct {
	What     string
	Forward  []Step
	Backward []Step
	Notes    []string // consequences the checks rely on
}

// Step is one equation of an operation's forward or backward pass.
type Step struct {
	Path  string // the gradient path the step belongs to ("V path"), or ""
	Eq    string // the equation, in the notation of the design notes
	Shape string // the shapes it combines
	Why   string // why it has this form
}

// Suite is what package checks holds for one operation whose
// implementations have type I: the long form of the operation, its checks,
// and the builders of one instance of it at chosen sizes (for attnlab
// gradcheck), from an implementation's float64 and float32 paths.
type Suite[I any] struct {
	Guide  OpGuide
	Checks []Check[I]
	At     func(impl I, s Sizes, seed uint64) Case[float64]
	At32   func(impl I, s Sizes, seed uint64) Case[float32]
	Reads  string // what At reads of Sizes, in words: "B·T rows of width Dim"
}

// Check returns the check called name; ok is false when there is none.
func (s Suite[I]) Check(name string) (c Check[I], ok bool) {
	for _, c := range s.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return c, false
}
