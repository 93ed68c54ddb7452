package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report as the table of attnlab bench: a header
// naming the CPU, the threads (GOMAXPROCS) and PyTorch, one line per row
// with attnlab's and PyTorch's rates, their ratio and their share of the
// ceiling, and a legend.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab bench on %s, %d threads; %s\n", r.CPU, runtime.GOMAXPROCS(0), r.Torch)
	if r.Model != "" {
		fmt.Fprintf(&b, "generate: %s\n", r.Model)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\tattnlab of ceiling\tPyTorch of ceiling\t\n")
	for _, r := range r.Rows {
		torch, ratio := "", ""
		if r.Torch > 0 {
			torch, ratio = fmt.Sprintf("%.1f", r.Torch), fmt.Sprintf("%.2f×", r.Ratio)
		}
		ours := fmt.Sprintf("%.1f", r.Ours)
		if r.Group == "attention variants" { // a ratio to plain attention
			ours = fmt.Sprintf("%.2f", r.Ours)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Group, r.Case, r.Unit, ours, torch, ratio,
			ofCeiling(r.Group, r.Executed, r.Bandwidth, r.Efficiency), ofCeiling(r.Group, r.TorchExecuted, r.TorchBandwidth, r.TorchEfficiency))
	}
	tw.Flush()
	b.WriteString(`
ratio > 1: attnlab faster (rates: attnlab/PyTorch; latency: PyTorch/attnlab)
of ceiling: gemm, rate / GEMM ceiling of the dtype; attention, executed GFLOP/s
  (14·n²·D·H, causal 7·n²·D·H, for attnlab; 12·n²·D·H for PyTorch) and their share
  of the GEMM ceiling; decode, K+V bytes per token / time and their share of the
  read bandwidth ceiling
attention variants: the median over interleaved rounds of the variant's time over
  plain attention's in the same round (1.10 = 10% slower)
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// ofCeiling is a row's efficiency cell: the derived rate where the row has
// one, and its share of the ceiling.
func ofCeiling(group string, executed, bandwidth, eff float64) string {
	if eff == 0 {
		return ""
	}
	switch group {
	case "attention fwd+bwd":
		return fmt.Sprintf("%.1f GFLOP/s %3.0f%%", executed, 100*eff)
	case "decode":
		return fmt.Sprintf("%.1f GB/s %3.0f%%", bandwidth, 100*eff)
	}
	return fmt.Sprintf("%.0f%%", 100*eff)
}
