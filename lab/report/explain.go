package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/lab"
)

// explained is what Explain reads: the registry's descriptions and the rows
// that can run a fault.
type explained struct {
	infos []lab.OpInfo
	ops   []lab.Runner
}

func registry() explained {
	e := explained{ops: lab.Ops()}
	for _, o := range e.ops {
		e.infos = append(e.infos, o.Info())
	}
	return e
}

// UnknownNameError is the error of Explain for a name that is no
// operation, check or fault.
type UnknownNameError struct {
	Name string
	Ops  []string // every operation
	Near []string // names close to Name
}

func (e *UnknownNameError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown name %q: not an operation, check or fault", e.Name)
	if len(e.Near) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(e.Near, ", "))
	}
	fmt.Fprintf(&b, " (operations: %s; \"attnlab explain -list\" lists every check and fault)", strings.Join(e.Ops, ", "))
	return b.String()
}

// Explain writes the long form of name to w:
//
//   - an operation (attention, rope, …): what it computes and the gradient
//     path of its backward, with shapes, then its checks and faults;
//   - OP/CHECK: what the check tests, the shapes, what a pass proves and what
//     it cannot;
//   - a bare check name: the same when the check means one thing wherever it
//     runs, else what it means everywhere and the operations that run it;
//   - a fault or OP/FAULT: what it breaks, then every check of its operation
//     run on it, and which caught it.
//
// An unknown name gives an *UnknownNameError.
func Explain(w io.Writer, name string) error {
	e := registry()
	infos := e.infos
	find := func(op string) int {
		return slices.IndexFunc(infos, func(o lab.OpInfo) bool { return o.Op == op })
	}
	var b strings.Builder
	if op, rest, ok := strings.Cut(name, "/"); ok {
		if x := find(op); x >= 0 {
			if _, ok := infos[x].Check(rest); ok {
				explainCheck(&b, infos, op, rest)
				return explainFlush(w, &b)
			}
			if _, ok := infos[x].Fault(rest); ok {
				explainFault(&b, e.ops[x], infos[x], rest)
				return explainFlush(w, &b)
			}
		}
		return explainUnknown(name, infos)
	}
	if x := find(name); x >= 0 {
		explainOp(&b, infos[x])
		return explainFlush(w, &b)
	}
	for x, info := range infos {
		if _, ok := info.Fault(name); ok {
			explainFault(&b, e.ops[x], info, name)
			return explainFlush(w, &b)
		}
	}
	var ops []string
	for _, info := range infos {
		if _, ok := info.Check(name); ok {
			ops = append(ops, info.Op)
		}
	}
	switch {
	case len(ops) == 0:
		return explainUnknown(name, infos)
	case sameCheckEverywhere(infos, ops, name):
		explainCheck(&b, infos, ops[0], name)
	default:
		explainGenericCheck(&b, infos, ops, name)
	}
	return explainFlush(w, &b)
}

func explainFlush(w io.Writer, b *strings.Builder) error {
	_, err := io.WriteString(w, b.String())
	return err
}

// Names lists every operation with its checks and faults, the names
// Explain accepts.
func Names(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Names for \"attnlab explain\": an operation, OP/CHECK, a check, or a fault.\n")
	for _, info := range lab.Catalog() {
		fmt.Fprintf(&b, "\n%s — %s\n  checks: ", info.Op, info.Impl)
		for i, c := range info.Checks {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.Name)
		}
		b.WriteString("\n  faults: ")
		if len(info.Faults) == 0 {
			b.WriteString("(none of its own)")
		}
		for i, f := range info.Faults {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name)
		}
		b.WriteByte('\n')
	}
	return explainFlush(w, &b)
}

// sameCheckEverywhere reports whether the check called name has the same
// claim and long form on every op of ops (attention and attention-flash run
// the same checks).
func sameCheckEverywhere(infos []lab.OpInfo, ops []string, name string) bool {
	key := func(op string) string {
		c := checkOf(infos, op, name)
		return fmt.Sprint(c.Long) + "\x00" + c.Claim
	}
	for _, op := range ops[1:] {
		if key(op) != key(ops[0]) {
			return false
		}
	}
	return true
}

func checkOf(infos []lab.OpInfo, op, name string) lab.CheckInfo {
	for _, info := range infos {
		if info.Op == op {
			c, _ := info.Check(name)
			return c
		}
	}
	return lab.CheckInfo{}
}

func explainCheck(b *strings.Builder, infos []lab.OpInfo, op, name string) {
	c := checkOf(infos, op, name)
	fmt.Fprintf(b, "CHECK %s/%s — %s check: it %s\n", op, name, c.Kind, c.Kind.Text())
	var also []string
	for _, info := range infos {
		if _, ok := info.Check(name); ok && info.Op != op && sameCheckEverywhere(infos, []string{op, info.Op}, name) {
			also = append(also, info.Op)
		}
	}
	if len(also) > 0 {
		fmt.Fprintf(b, "(the same check runs on %s)\n", strings.Join(also, ", "))
	}
	b.WriteByte('\n')
	explainSection(b, "Claim", c.Claim)
	explainSection(b, "What it tests", c.Long.Tests)
	explainSection(b, "Shapes", c.Long.Shapes)
	explainSection(b, "What a pass proves", c.Long.Proves)
	explainSection(b, "What a pass cannot prove", explainSentence(c.Long.Cannot)+" In the check's own words: "+c.Limit+".")
	fmt.Fprintf(b, "Run \"attnlab explain %s\" for the operation's gradient path, \"attnlab faults\" for what this check catches.\n", op)
}

func explainGenericCheck(b *strings.Builder, infos []lab.OpInfo, ops []string, name string) {
	first := checkOf(infos, ops[0], name)
	fmt.Fprintf(b, "CHECK %s — %s check, run on %d operations: it %s\n\n", name, first.Kind, len(ops), first.Kind.Text())
	// common is the text most of the operations give, the first of equals:
	// the generic form, which a few operations sharpen.
	common := func(part func(lab.CheckInfo) string) string {
		count := map[string]int{}
		best := ""
		for _, op := range ops {
			t := part(checkOf(infos, op, name))
			if count[t]++; count[t] > count[best] {
				best = t
			}
		}
		return best
	}
	explainSection(b, "What it tests (on most operations; the shapes are each operation's)", common(func(c lab.CheckInfo) string { return c.Long.Tests }))
	explainSection(b, "What a pass proves", common(func(c lab.CheckInfo) string { return c.Long.Proves }))
	explainSection(b, "What a pass cannot prove", explainSentence(common(func(c lab.CheckInfo) string { return c.Long.Cannot })))
	b.WriteString("Where it runs (claim, then limit):\n")
	for _, op := range ops {
		c := checkOf(infos, op, name)
		fmt.Fprintf(b, "  %s/%s\n", op, name)
		explainWrap(b, c.Claim, "      ")
		explainWrap(b, "limit: "+c.Limit, "      ")
	}
	fmt.Fprintf(b, "\nRun \"attnlab explain %s/%s\" for one of them, with its shapes.\n", ops[0], name)
}

func explainFault(b *strings.Builder, op lab.Runner, info lab.OpInfo, name string) {
	f, _ := info.Fault(name)
	fmt.Fprintf(b, "FAULT %s — a deliberately broken %s\n", name, info.Op)
	if f.FDBlind {
		b.WriteString("(registered as invisible to finite differences: forward and backward stay consistent)\n")
	}
	b.WriteByte('\n')
	explainSection(b, "What it breaks", f.Breaks)
	explainSection(b, "Why the checks see it or not", f.Note)
	fo, _ := op.RunFault(name)
	fmt.Fprintf(b, "Every check of %s, run on it now:\n", info.Op)
	kinds := map[string]checks.Kind{}
	for _, c := range info.Checks {
		kinds[c.Name] = c.Kind
	}
	wName := 0
	for _, r := range fo.Results {
		wName = max(wName, len(r.Check))
	}
	for _, r := range fo.Results {
		mark := "passed"
		switch {
		case r.Errored:
			mark = "ERROR"
		case !r.Pass:
			mark = "CAUGHT"
		}
		fmt.Fprintf(b, "  %-6s  %-*s  %-17s  %s\n", mark, wName, r.Check, kinds[r.Check], r.Detail)
	}
	b.WriteByte('\n')
	switch {
	case !fo.Caught():
		b.WriteString("ESCAPED: no check caught it. The lab fails until one does.\n")
	default:
		fmt.Fprintf(b, "Caught by %d of %d checks: %s.\n", len(fo.CaughtBy), len(fo.Results), strings.Join(fo.CaughtBy, ", "))
		switch {
		case fo.Kinds[checks.Gradient] > 0:
			b.WriteString("Finite differences measure it: the backward is no longer the derivative of the forward.\n")
		case fo.FDErrored:
			b.WriteString("Finite differences fail only because the forward returns an error; they do not measure the bug.\n")
		default:
			b.WriteString("No finite-difference check sees it: only the semantic and contract checks do.\n")
		}
	}
	if slices.ContainsFunc(fo.Results, func(r checks.Result) bool { return r.Errored }) {
		b.WriteString("ERROR = caught because the implementation returned an error or panicked.\n")
	}
}

func explainOp(b *strings.Builder, info lab.OpInfo) {
	fmt.Fprintf(b, "OPERATION %s — %s\n\n", info.Op, info.Impl)
	if g := info.Guide; g.What != "" {
		explainWrap(b, g.What, "")
		b.WriteString("\nForward\n")
		explainSteps(b, g.Forward)
		b.WriteString("\nBackward: the gradient path\n")
		explainSteps(b, g.Backward)
		if len(g.Notes) > 0 {
			b.WriteString("\nWhat follows from it\n")
			for _, n := range g.Notes {
				explainHanging(b, "  - ", "    ", n)
			}
		}
	}
	fmt.Fprintf(b, "\nChecks (%d)\n", len(info.Checks))
	for _, c := range info.Checks {
		fmt.Fprintf(b, "  %s (%s)\n", c.Name, c.Kind)
		explainWrap(b, c.Claim, "      ")
	}
	fmt.Fprintf(b, "\nFaults (%d)\n", len(info.Faults))
	if len(info.Faults) == 0 {
		b.WriteString("  none of its own\n")
	}
	for _, f := range info.Faults {
		fmt.Fprintf(b, "  %s\n", f.Name)
		explainWrap(b, f.Breaks, "      ")
	}
	fmt.Fprintf(b, "\nRun \"attnlab explain %s/CHECK\" or \"attnlab explain FAULT\" for one of them.\n", info.Op)
}

func explainSteps(b *strings.Builder, steps []checks.Step) {
	path := ""
	for _, s := range steps {
		indent := "  "
		if s.Path != "" {
			if s.Path != path {
				fmt.Fprintf(b, "  %s\n", s.Path)
			}
			indent = "    "
		}
		path = s.Path
		fmt.Fprintf(b, "%s%s\n", indent, s.Eq)
		explainWrap(b, "shapes: "+s.Shape, indent+"    ")
		explainWrap(b, "why: "+s.Why, indent+"    ")
	}
}

func explainSection(b *strings.Builder, title, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	fmt.Fprintf(b, "%s\n", title)
	explainWrap(b, text, "  ")
	b.WriteByte('\n')
}

// explainSentence capitalises s and ends it with a full stop.
func explainSentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	r := []rune(s)
	r[0] = []rune(strings.ToUpper(string(r[0])))[0]
	s = string(r)
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}

// explainWrap writes text with every line prefixed by indent, broken at spaces so
// that lines stay within 80 columns where the words allow.
func explainWrap(b *strings.Builder, text, indent string) { explainHanging(b, indent, indent, text) }

// explainHanging is explainWrap with the first line prefixed by first and the
// others by indent.
func explainHanging(b *strings.Builder, first, indent, text string) {
	const width = 80
	line := first
	n := len([]rune(first))
	empty := true
	for _, word := range strings.Fields(text) {
		wn := len([]rune(word))
		if !empty && n+1+wn > width {
			b.WriteString(line + "\n")
			line, n, empty = indent, len([]rune(indent)), true
		}
		if !empty {
			line += " "
			n++
		}
		line += word
		n += wn
		empty = false
	}
	if !empty {
		b.WriteString(line + "\n")
	}
}

func explainUnknown(name string, infos []lab.OpInfo) error {
	e := &UnknownNameError{Name: name}
	type cand struct {
		name string
		d    int
	}
	var cands []cand
	seen := map[string]bool{}
	add := func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		base := name
		if _, rest, ok := strings.Cut(name, "/"); ok && !strings.Contains(n, "/") {
			base = rest
		}
		d := editDistance(base, n)
		if d <= max(2, len(base)/4) || (len(base) >= 4 && strings.Contains(n, base)) {
			cands = append(cands, cand{n, d})
		}
	}
	for _, info := range infos {
		e.Ops = append(e.Ops, info.Op)
		add(info.Op)
		for _, c := range info.Checks {
			add(c.Name)
		}
		for _, f := range info.Faults {
			add(f.Name)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].d != cands[j].d {
			return cands[i].d < cands[j].d
		}
		return cands[i].name < cands[j].name
	})
	for _, c := range cands[:min(len(cands), 3)] {
		e.Near = append(e.Near, c.name)
	}
	return e
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
