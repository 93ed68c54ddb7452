package bench

import (
	"strings"
	"testing"
)

// TestReportWriteText: the header with the peers, the table beside PyTorch
// with its cells only where they apply, the table beside the peers with
// each peer's value and ratio or a note saying why it has none, and the
// legend.
func TestReportWriteText(t *testing.T) {
	d := 1e-7
	r := &Report{CPU: "Test CPU", Threads: 2, Torch: "PyTorch 2.0", Model: "a model",
		Peers: []PeerInfo{{Name: "ggml", Error: "not run: not built"}, {Name: "onnxruntime", Version: "ort 1", Build: "npm", Threads: 2}},
		Rows: []Row{
			{Group: "gemm", Case: "float32 n=256", Unit: "GFLOP/s", Ours: 92.74, Torch: 80, Ratio: 1.159, Efficiency: 0.97},
			{Group: "stream", Case: "read float32 256 MiB, 1 thread", Unit: "GB/s", Ours: 23.2},
			{Group: "ceiling", Case: "L2 read bandwidth: best L2 stream read row", Unit: "GB/s"},
			{Group: "attention fwd+bwd", Case: "float32 n=256", Unit: "GFLOP/s", Ours: 49.9, Executed: 29.1, Efficiency: 0.3,
				Torch: 40, Ratio: 1.25, TorchExecuted: 40, TorchEfficiency: 0.42},
			{Group: "blas check", Case: "sgemm n=1024", Unit: "GFLOP/s", Ours: 180, Peers: map[string]*PeerCell{
				"onnxruntime": {Value: 60, Ratio: 3, RatioMin: 2.5, RatioMax: 3.5, Warning: "slow BLAS"}}},
			{Group: "attention fwd", Case: "float32 n=512 D=64 causal", Unit: "GFLOP/s", Ours: 100.04, Executed: 50, Efficiency: 0.25,
				Peers: map[string]*PeerCell{"onnxruntime": {Value: 80, Ratio: 1.25, RatioMin: 1.1, RatioMax: 1.4, MaxDiff: &d}}},
			{Group: "attention fwd", Case: "float32 n=512 D=64 full", Unit: "GFLOP/s", Ours: 90,
				Peers: map[string]*PeerCell{"onnxruntime": {Error: "refused"}}},
			{Group: "decode", Case: "float32 context=256", Unit: "µs/token", Ours: 25.8, Torch: 51.6, Ratio: 2, Bandwidth: 40.7, Efficiency: 0.75, Level: "L3",
				Peers: map[string]*PeerCell{"onnxruntime": {Error: "refused"}}},
		}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `attnlab bench on Test CPU, 2 threads; PyTorch 2.0
ggml: not run: not built
onnxruntime: ort 1 (npm), 2 threads
generate: a model

              group                            case     unit  attnlab  PyTorch  ratio  attnlab of ceiling  PyTorch of ceiling
               gemm                   float32 n=256  GFLOP/s     92.7     80.0  1.16×                 97%                    
             stream  read float32 256 MiB, 1 thread     GB/s     23.2                                                        
  attention fwd+bwd                   float32 n=256  GFLOP/s     49.9     40.0  1.25×   29.1 GFLOP/s  30%   40.0 GFLOP/s  42%

          group                       case      unit  attnlab  PyTorch  ratio  onnxruntime        ratio (min–max)    attnlab of ceiling
     blas check               sgemm n=1024   GFLOP/s    180.0                         60.0  3.00× (2.50–3.50) [1]                      
  attention fwd  float32 n=512 D=64 causal   GFLOP/s    100.0                         80.0      1.25× (1.10–1.40)     50.0 GFLOP/s  25%
  attention fwd    float32 n=512 D=64 full   GFLOP/s     90.0                            —                    [2]                      
         decode        float32 context=256  µs/token     25.8     51.6  2.00×            —                    [2]  40.7 GB/s  75% of L3
[1] onnxruntime: slow BLAS
[2] onnxruntime: refused

ratio > 1: attnlab faster`
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", got, want)
	}
	for _, s := range []string{"only these ratios hold from run to run", "neither ggml's flash_attn_ext nor\n  ONNX Runtime's attention ops have a backward"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the legend lacks %q", s)
		}
	}

	r.Model, r.Peers = "", nil
	b.Reset()
	r.WriteText(&b)
	if lines := strings.SplitN(b.String(), "\n", 3); lines[1] != "" {
		t.Errorf("without a model and peers, line 2 is %q", lines[1])
	}
}
