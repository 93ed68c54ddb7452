package attention

import (
	"fmt"
	"strings"
)

// Table draws the visibility of batch item 0 as a text matrix, like the
// tables of the design notes: a row per query labelled with its position,
// a column per key (old = cached, new = the chunk, pad = invalid), 1 where
// the query may read the key; a valid row that sees nothing is marked as
// the error it is.
func (c *Config) Table() string {
	var sb strings.Builder
	b := &sb
	past := c.N - c.M
	label := func(t int) string {
		switch {
		case !c.KeyValid(0, t):
			return "pad"
		case t < past:
			return fmt.Sprintf("old%d", c.KeyPos(0, t))
		default:
			return fmt.Sprintf("new%d", c.KeyPos(0, t))
		}
	}
	fmt.Fprintf(b, "%d new after %d cached; causal=%v, convention=%s", c.M, past, c.Causal, c.Convention)
	if c.Window > 0 {
		fmt.Fprintf(b, ", window=%d", c.Window)
	}
	b.WriteString("; 1 = may read\n")
	w := 4
	for t := range c.N {
		w = max(w, len(label(t)))
	}
	fmt.Fprintf(b, "%-*s", w+2, "")
	for t := range c.N {
		fmt.Fprintf(b, " %*s", w, label(t))
	}
	if c.KSeg != nil {
		fmt.Fprintf(b, "\n%-*s", w+2, "seg")
		for t := range c.N {
			fmt.Fprintf(b, " %*d", w, c.KSeg[t])
		}
	}
	b.WriteByte('\n')
	for i, row := range c.Visibility(0) {
		fmt.Fprintf(b, "%-*s", w+2, label(past+i))
		for _, v := range row {
			fmt.Fprintf(b, " %*d", w, b2i(v))
		}
		if c.QueryValid(0, i) && !strings.Contains(fmt.Sprint(row), "true") {
			b.WriteString("   ← sees nothing: rejected as an error")
		}
		b.WriteByte('\n')
	}
	return sb.String()
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
