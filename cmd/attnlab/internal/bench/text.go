package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// peerGroups are the groups of the table beside the peers.
var peerGroups = []string{"blas check", "attention fwd", "decode"}

// WriteText writes the report as the tables of attnlab bench: a header
// naming the CPU, the threads and PyTorch; the table of attnlab beside
// PyTorch, one line per row with both rates, their ratio and their share of
// the ceiling; the table beside the peers (the BLAS check, attention
// forward, decode), each peer's value and its ratio measured interleaved,
// with notes saying why a cell is empty; and a legend.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab bench on %s, %d threads; %s\n", r.CPU, r.Threads, r.Torch)
	for _, p := range r.Peers {
		if p.Error != "" {
			fmt.Fprintf(&b, "%s: %s\n", p.Name, p.Error)
		} else {
			fmt.Fprintf(&b, "%s: %s (%s), %d threads\n", p.Name, p.Version, p.Build, p.Threads)
		}
	}
	if r.Model != "" {
		fmt.Fprintf(&b, "generate: %s\n", r.Model)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\tattnlab of ceiling\tPyTorch of ceiling\t\n")
	for _, r := range r.Rows {
		if slices.Contains(peerGroups, r.Group) || r.Group == "ceiling" && r.Ours == 0 { // a ceiling a skipped section would give
			continue
		}
		torch, ratio := torchCells(r)
		ours := fmt.Sprintf("%.1f", r.Ours)
		if r.Group == "attention variants" { // a ratio to plain attention
			ours = fmt.Sprintf("%.2f", r.Ours)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Group, r.Case, r.Unit, ours, torch, ratio,
			ofCeiling(r.Group, r.Executed, r.Bandwidth, r.Efficiency, r.Level), ofCeiling(r.Group, r.TorchExecuted, r.TorchBandwidth, r.TorchEfficiency, r.Level))
	}
	tw.Flush()

	cols := r.peerColumns()
	var notes []string
	note := func(s string) int {
		if i := slices.Index(notes, s); i >= 0 {
			return i + 1
		}
		notes = append(notes, s)
		return len(notes)
	}
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\tratio (min–max)\t", c)
	}
	fmt.Fprintf(tw, "attnlab of ceiling\t\n")
	for _, r := range r.Rows {
		if !slices.Contains(peerGroups, r.Group) {
			continue
		}
		torch, ratio := torchCells(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t", r.Group, r.Case, r.Unit, r.Ours, torch, ratio)
		for _, c := range cols {
			cell := r.Peers[c]
			switch {
			case cell == nil:
				fmt.Fprintf(tw, "\t\t")
			case cell.Error != "":
				fmt.Fprintf(tw, "—\t[%d]\t", note(c+": "+cell.Error))
			default:
				mark := ""
				if cell.Warning != "" {
					mark = fmt.Sprintf(" [%d]", note(c+": "+cell.Warning))
				}
				fmt.Fprintf(tw, "%.1f\t%.2f× (%.2f–%.2f)%s\t", cell.Value, cell.Ratio, cell.RatioMin, cell.RatioMax, mark)
			}
		}
		fmt.Fprintf(tw, "%s\t\n", ofCeiling(r.Group, r.Executed, r.Bandwidth, r.Efficiency, r.Level))
	}
	tw.Flush()
	for i, n := range notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	b.WriteString(`
ratio > 1: attnlab faster (rates: attnlab/PyTorch; latency: PyTorch/attnlab)
of ceiling: gemm, rate / GEMM ceiling of the dtype; attention, executed GFLOP/s
  (fwd+bwd 14·n²·D·H, causal 7·n²·D·H, fwd 4·n²·D·H, causal 2·n²·D·H, for attnlab;
  12·n²·D·H for PyTorch) and their share of the SGEMM ceiling; decode, K+V bytes
  per token / time and their share of the read bandwidth of the level (L2, L3,
  DRAM) the K+V working set fits in
attention variants: the median over interleaved rounds of the variant's time over
  plain attention's in the same round (1.10 = 10% slower)
peers: each peer runs the same inputs on as many threads as attnlab, started once
  and timed interleaved with attnlab (attnlab, peer, attnlab, peer, … in rounds,
  each turn's first run untimed);
  a peer's value is the median of its round times in the row's unit, its ratio the
  median over rounds of its time / attnlab's time in the same round (> 1: attnlab
  faster) with the smallest and largest round; its output equals attnlab's before
  it is timed. The machine may be shared: only these ratios hold from run to run.
attention fwd+bwd is against PyTorch only: neither ggml's flash_attn_ext nor
  ONNX Runtime's attention ops have a backward
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// torchCells are a row's PyTorch value and ratio, empty without one.
func torchCells(r Row) (torch, ratio string) {
	if r.Torch > 0 {
		return fmt.Sprintf("%.1f", r.Torch), fmt.Sprintf("%.2f×", r.Ratio)
	}
	return "", ""
}

// peerColumns are the columns some row has a cell in: the run's peers in
// their order, ggml's F16 K/V column after ggml's, then any other, sorted.
func (r *Report) peerColumns() []string {
	seen := map[string]bool{}
	for _, row := range r.Rows {
		for c := range row.Peers {
			seen[c] = true
		}
	}
	var cols []string
	for _, p := range r.Peers {
		for _, c := range []string{p.Name, p.Name + " f16 K/V"} {
			if seen[c] {
				cols = append(cols, c)
				delete(seen, c)
			}
		}
	}
	var rest []string
	for c := range seen {
		rest = append(rest, c)
	}
	slices.Sort(rest)
	return append(cols, rest...)
}

// ofCeiling is a row's efficiency cell: the derived rate where the row has
// one, and its share of the ceiling (decode: of the level's read bandwidth).
func ofCeiling(group string, executed, bandwidth, eff float64, level string) string {
	if eff == 0 {
		return ""
	}
	switch group {
	case "attention fwd+bwd", "attention fwd":
		return fmt.Sprintf("%.1f GFLOP/s %3.0f%%", executed, 100*eff)
	case "decode":
		if level == "" {
			level = levelDRAM
		}
		return fmt.Sprintf("%.1f GB/s %3.0f%% of %s", bandwidth, 100*eff, level)
	}
	return fmt.Sprintf("%.0f%%", 100*eff)
}
