package main

import (
	"context"
	"flag"
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

type maskOpts struct {
	past, new, window   int
	pad, segments, conv string
	causal, all         bool
}

// maxMaskTokens caps past+new: a wider table is unreadable, and drawing
// one of 100,000² cells would take gigabytes.
const maxMaskTokens = 1024

func init() {
	maskCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &maskOpts{}
		fs.IntVar(&o.past, "past", 3, "tokens already in the cache")
		fs.IntVar(&o.new, "new", 2, "tokens in the new chunk (queries)")
		fs.StringVar(&o.pad, "pad", "", "padding: left:K or right:K")
		fs.StringVar(&o.segments, "segments", "", "comma-separated segment id per token (past+new of them)")
		fs.IntVar(&o.window, "window", 0, "sliding window: key needs qpos − kpos < W (0 = none)")
		fs.StringVar(&o.conv, "convention", "position", "causal convention: position, bottom-right or top-left")
		fs.BoolVar(&o.causal, "causal", true, "causal mask")
		fs.BoolVar(&o.all, "all", false, "print all three causal conventions")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runMask(ctx, o, stdout)
		}
	}
}

// maskConfig builds the single-sequence configuration the flags describe.
func maskConfig(o *maskOpts) (*attention.Config, error) {
	P, M := o.past, o.new
	if P < 0 {
		return nil, usageError{fmt.Sprintf("-past %d: want >= 0", P)}
	}
	if M < 1 {
		return nil, usageError{fmt.Sprintf("-new %d: want >= 1", M)}
	}
	if P+M > maxMaskTokens {
		return nil, usageError{fmt.Sprintf("-past %d -new %d: a table of %d keys is too wide to read; want past+new <= %d", P, M, P+M, maxMaskTokens)}
	}
	if o.window < 0 {
		return nil, usageError{fmt.Sprintf("-window %d: want >= 0", o.window)}
	}
	N := P + M
	valid := make([]bool, N)
	for i := range valid {
		valid[i] = true
	}
	if o.pad != "" {
		side, num, ok := strings.Cut(o.pad, ":")
		k, err := strconv.Atoi(num)
		if !ok || err != nil || k < 0 || k > N || (side != "left" && side != "right") {
			return nil, usageError{fmt.Sprintf("-pad %q: want left:K or right:K with 0 <= K <= %d", o.pad, N)}
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
	if o.segments != "" {
		parts := strings.Split(o.segments, ",")
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
	conv, err := attention.ParseConvention(o.conv)
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
		Causal: o.causal, Convention: conv, Window: o.window,
		KPos: pos, QPos: pos[P:], KValid: valid, QValid: valid[P:]}
	if seg != nil {
		c.KSeg, c.QSeg = seg, seg[P:]
	}
	if err := c.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

func runMask(ctx context.Context, o *maskOpts, stdout io.Writer) error {
	c, err := maskConfig(o)
	if err != nil {
		return err
	}
	convs := []attention.Convention{c.Convention}
	if o.all {
		convs = []attention.Convention{attention.Positions, attention.BottomRight, attention.TopLeft}
	}
	var b strings.Builder
	for x, conv := range convs {
		if x > 0 {
			b.WriteByte('\n')
		}
		d := *c
		d.Convention = conv
		b.WriteString(d.Table())
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}
