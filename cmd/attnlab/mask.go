package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/attention"
)

var maskCmd = register(&command{
	name:  "mask",
	usage: "-past P -new M [-pad left:K|right:K] [-segments IDS] [-window W] [-convention NAME] [-causal=false] [-all]",
	short: "print the visibility matrix of a chunk of queries against a cache",
	long: `Mask prints which keys each query may read (1) for a chunk of M new tokens
after a cache of P past tokens, the way the mask rule decides it: by logical
positions, validity and segments, not by array indices. Columns are keys
(old = cached, new = the chunk), rows are the chunk's queries, each labelled
with its position.

-pad left:K makes the first K tokens padding (positions then count real
tokens only); -pad right:K makes the last K tokens padding. -segments gives a
segment id per token (P+M of them); positions restart in each segment, as
for packed documents. -all prints the three causal conventions side by side.

Example: attnlab mask -past 3 -new 2`,
})

var (
	maskPast     = maskCmd.flags.Int("past", 3, "tokens already in the cache")
	maskNew      = maskCmd.flags.Int("new", 2, "tokens in the new chunk (queries)")
	maskPad      = maskCmd.flags.String("pad", "", "padding: left:K or right:K")
	maskSegments = maskCmd.flags.String("segments", "", "comma-separated segment id per token (past+new of them)")
	maskWindow   = maskCmd.flags.Int("window", 0, "sliding window: key needs qpos − kpos < W (0 = none)")
	maskConv     = maskCmd.flags.String("convention", "position", "causal convention: position, bottom-right or top-left")
	maskCausal   = maskCmd.flags.Bool("causal", true, "causal mask")
	maskAll      = maskCmd.flags.Bool("all", false, "print all three causal conventions")
)

func init() { maskCmd.run = runMask }

// maskConfig builds the single-sequence configuration the flags describe.
func maskConfig() (*attention.Config, error) {
	P, M := *maskPast, *maskNew
	if P < 0 {
		return nil, usageError{fmt.Sprintf("-past %d: want >= 0", P)}
	}
	if M < 1 {
		return nil, usageError{fmt.Sprintf("-new %d: want >= 1", M)}
	}
	N := P + M
	valid := make([]bool, N)
	for i := range valid {
		valid[i] = true
	}
	if *maskPad != "" {
		side, num, ok := strings.Cut(*maskPad, ":")
		k, err := strconv.Atoi(num)
		if !ok || err != nil || k < 0 || k > N || (side != "left" && side != "right") {
			return nil, usageError{fmt.Sprintf("-pad %q: want left:K or right:K with 0 <= K <= %d", *maskPad, N)}
		}
		for x := range k {
			if side == "left" {
				valid[x] = false
			} else {
				valid[N-1-x] = false
			}
		}
	}
	var seg []int
	if *maskSegments != "" {
		parts := strings.Split(*maskSegments, ",")
		if len(parts) != N {
			return nil, usageError{fmt.Sprintf("-segments has %d ids, want past+new = %d", len(parts), N)}
		}
		for _, p := range parts {
			id, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, usageError{fmt.Sprintf("-segments: %q is not an integer", p)}
			}
			seg = append(seg, id)
		}
	}
	conv, err := attention.ParseConvention(*maskConv)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	// Positions count real tokens, restarting in each segment.
	pos := make([]int, N)
	n := 0
	for t := range N {
		if seg != nil && t > 0 && seg[t] != seg[t-1] {
			n = 0
		}
		pos[t] = n
		if valid[t] {
			n++
		}
	}
	c := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: M, N: N, D: 1, Dv: 1,
		Causal: *maskCausal, Convention: conv, Window: *maskWindow,
		KPos: pos, QPos: pos[P:], KValid: valid, QValid: valid[P:]}
	if seg != nil {
		c.KSeg, c.QSeg = seg, seg[P:]
	}
	if err := c.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

func runMask(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	c, err := maskConfig()
	if err != nil {
		return err
	}
	convs := []attention.Convention{c.Convention}
	if *maskAll {
		convs = []attention.Convention{attention.Positions, attention.BottomRight, attention.TopLeft}
	}
	var b strings.Builder
	for x, conv := range convs {
		if x > 0 {
			b.WriteByte('\n')
		}
		d := *c
		d.Convention = conv
		writeMask(&b, &d)
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// writeMask draws the matrix like the tables of the design notes.
func writeMask(b *strings.Builder, c *attention.Config) {
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
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
