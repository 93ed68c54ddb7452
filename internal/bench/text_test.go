package bench

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestReportWriteText: the header, one line per row with the PyTorch and
// ceiling cells only where they apply, and the legend.
func TestReportWriteText(t *testing.T) {
	r := &Report{CPU: "Test CPU", Torch: "PyTorch 2.0", Model: "a model", Rows: []Row{
		{Group: "gemm", Case: "float32 n=256", Unit: "GFLOP/s", Ours: 92.74, Torch: 80, Ratio: 1.159, Efficiency: 0.97},
		{Group: "stream", Case: "read float32 256 MiB, 1 thread", Unit: "GB/s", Ours: 23.2},
		{Group: "attention fwd+bwd", Case: "float32 n=256", Unit: "GFLOP/s", Ours: 49.9, Executed: 29.1, Efficiency: 0.3,
			Torch: 40, Ratio: 1.25, TorchExecuted: 40, TorchEfficiency: 0.42},
		{Group: "decode", Case: "float32 context=256", Unit: "µs/token", Ours: 25.8, Bandwidth: 40.7, Efficiency: 1.75},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if want := fmt.Sprintf("attnlab bench on Test CPU, %d threads; PyTorch 2.0", runtime.GOMAXPROCS(0)); lines[0] != want {
		t.Errorf("header %q, want %q", lines[0], want)
	}
	if lines[1] != "generate: a model" || lines[2] != "" {
		t.Errorf("model lines %q", lines[1:3])
	}
	// right-aligned columns, two spaces apart; empty cells where a row has
	// no PyTorch number or no ceiling
	table := []string{
		"              group                            case      unit  attnlab  PyTorch  ratio  attnlab of ceiling  PyTorch of ceiling",
		"               gemm                   float32 n=256   GFLOP/s     92.7     80.0  1.16×                 97%                    ",
		"             stream  read float32 256 MiB, 1 thread      GB/s     23.2                                                        ",
		"  attention fwd+bwd                   float32 n=256   GFLOP/s     49.9     40.0  1.25×   29.1 GFLOP/s  30%   40.0 GFLOP/s  42%",
		"             decode             float32 context=256  µs/token     25.8                      40.7 GB/s 175%                    ",
		"",
	}
	for i, want := range table {
		if lines[3+i] != want {
			t.Errorf("table line %d:\n%q\nwant\n%q", i, lines[3+i], want)
		}
	}
	if !strings.HasSuffix(b.String(), "\n  plain attention's in the same round (1.10 = 10% slower)\n") || !strings.Contains(b.String(), "\nratio > 1: attnlab faster") {
		t.Errorf("no legend:\n%s", b.String())
	}

	r.Model = ""
	b.Reset()
	r.WriteText(&b)
	if lines := strings.SplitN(b.String(), "\n", 3); lines[1] != "" {
		t.Errorf("without a model, line 2 is %q", lines[1])
	}
}
