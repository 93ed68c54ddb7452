// Command ggml-peer is attnlab bench's ggml peer: a long-lived process that
// times ggml's CPU kernels on the requests attnlab sends, one JSON object
// per line on standard input, one answer per line on standard output
// (the protocol of attnlab bench's peers):
//
//	ggml-peer -threads N
//
// It prints a hello line naming ggml's version and build, then answers
//
//	{"op":"attn_fwd","b":1,"hq":8,"hkv":8,"m":2048,"n":2048,"d":64,"causal":true,
//	 "kv_dtype":"f32"|"f16","reps":3,"inputs":"in.safetensors","output":"out.safetensors"}
//	{"op":"decode", the same fields, m = 1}
//	{"op":"sgemm","m":…,"n":…,"k":…,"reps":…}
//
// with {"ok":true,"seconds":[…]} (each repetition's wall time on its own) or
// {"ok":false,"error":"…"}, and exits 0 when its input ends.
//
// What is timed is ggml_graph_compute of one graph, as llama.cpp runs it:
//
//   - attn_fwd and decode: one ggml_flash_attn_ext at GGML_PREC_F32, Q F32
//     [D, M, Hq, B], K and V [D, N, Hkv, B] in F32, or in F16 as llama.cpp's
//     default KV cache holds them (the kernel then converts each query row
//     to F16 and accumulates V·P in F16, as it does in llama.cpp), output
//     F32 in flash_attn_ext's own layout [D, Hq, M, B] (llama.cpp's next op
//     reads it so). GQA by ggml's broadcasting: query head h reads K/V head
//     h / (Hq/Hkv). Causal is an F16 additive mask of 0 and −∞ (query i sees
//     keys j ≤ i + N − M), the mask llama.cpp passes; full attention and
//     decode (one query row per head, every key visible) pass no mask;
//   - sgemm: one ggml_mul_mat of F32 A [k, m] and B [k, n], the product
//     llama.cpp runs for every weight matrix (llamafile's tinyBLAS on this
//     build): 2·m·n·k flops.
//
// Setup — allocating the graph's memory, building it, reading or drawing
// the inputs, converting K and V to F16 — is done on the first request of a
// shape and kept (the last shape only: a 32k-key cache is hundreds of MB);
// it is never timed. Without "inputs" the peer draws its own values
// (uniform in [−1, 1), a fixed seed); with them it reads q, k, v from the
// file on every request. "output" gets o [B, Hq, M, D] F32 of the last
// repetition, so that attnlab can check the peer before it trusts its
// times.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/safetensors"
)

// request is one line of attnlab's.
type request struct {
	Op      string `json:"op"`
	B       int    `json:"b"`
	Hq      int    `json:"hq"`
	Hkv     int    `json:"hkv"`
	M       int    `json:"m"`
	N       int    `json:"n"`
	D       int    `json:"d"`
	K       int    `json:"k"` // sgemm
	Causal  bool   `json:"causal"`
	KVDType string `json:"kv_dtype"`
	Reps    int    `json:"reps"`
	Inputs  string `json:"inputs"`
	Output  string `json:"output"`
}

type response struct {
	OK      bool      `json:"ok"`
	Seconds []float64 `json:"seconds,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// maxBytes bounds one setup's memory, so that a shape too big for the
// machine is an error answer, not a process killed mid-run.
const maxBytes = 8 << 30

// peer holds the runner and the setup of the last shape.
type peer struct {
	runner *ggml.Runner
	key    string
	attn   *ggml.Attn
	drawn  bool // the attention inputs are the peer's own values
	gemm   *gemm
}

type gemm struct {
	ctx   *ggml.Ctx
	graph *ggml.Graph
}

func (p *peer) free() {
	if p.attn != nil {
		p.attn.Free()
		p.attn = nil
	}
	if p.gemm != nil {
		p.gemm.ctx.Free()
		p.gemm = nil
	}
	p.key = ""
}

func (p *peer) serve(req *request) (*response, error) {
	if req.Reps < 1 {
		return nil, fmt.Errorf("reps %d: want at least 1", req.Reps)
	}
	switch req.Op {
	case "attn_fwd", "decode":
		return p.attention(req)
	case "sgemm":
		return p.sgemm(req)
	}
	return nil, fmt.Errorf("unknown op %q (want attn_fwd, decode or sgemm)", req.Op)
}

func (p *peer) attention(req *request) (*response, error) {
	if req.Op == "decode" {
		if req.M != 0 && req.M != 1 {
			return nil, fmt.Errorf("decode: m = %d, want 1 (one query row per head)", req.M)
		}
		req.M, req.Causal = 1, false // one query after the cache sees every key
	}
	if req.B < 1 || req.Hq < 1 || req.Hkv < 1 || req.M < 1 || req.N < 1 || req.D < 1 {
		return nil, fmt.Errorf("%s: b %d, hq %d, hkv %d, m %d, n %d, d %d: each must be at least 1", req.Op, req.B, req.Hq, req.Hkv, req.M, req.N, req.D)
	}
	if req.Hq%req.Hkv != 0 {
		return nil, fmt.Errorf("%s: hkv %d does not divide hq %d", req.Op, req.Hkv, req.Hq)
	}
	if req.Causal && req.M > req.N {
		return nil, fmt.Errorf("%s: causal with m %d > n %d leaves rows with no key", req.Op, req.M, req.N)
	}
	kv, err := ggml.ParseType(req.KVDType)
	if err != nil {
		return nil, fmt.Errorf("%s: kv_dtype: %v", req.Op, err)
	}
	s := ggml.AttnSpec{B: req.B, Hq: req.Hq, Hkv: req.Hkv, M: req.M, N: req.N, D: req.D, Dv: req.D,
		Flash: true, KV: kv, Mask: req.Causal, Scale: float32(1 / math.Sqrt(float64(req.D)))}
	if bytes := 4*req.B*(req.Hq*req.M*req.D*2+req.M*req.N) + 4*2*req.B*req.Hkv*req.N*req.D; bytes > maxBytes {
		return nil, fmt.Errorf("%s: %d MB of tensors, more than the peer's %d MB", req.Op, bytes>>20, maxBytes>>20)
	}
	key := fmt.Sprintf("attn %+v", s)
	if key != p.key {
		p.free()
		p.attn, p.key, p.drawn = ggml.NewAttn(s), key, false
		if req.Causal {
			p.attn.Mask.SetF32(causalMask(s))
		}
	}
	a := p.attn
	if req.Inputs != "" {
		if err := readInputs(a, req.Inputs); err != nil {
			return nil, fmt.Errorf("%s: inputs %s: %v", req.Op, req.Inputs, err)
		}
		p.drawn = false
	} else if !p.drawn {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, t := range []ggml.Tensor{a.Q, a.K, a.V} {
			t.SetF32(uniform(rng, t.Len()))
		}
		p.drawn = true
	}
	secs, err := p.time(req.Reps, a.Compute)
	if err != nil {
		return nil, err
	}
	if req.Output != "" {
		f := safetensors.New()
		f.SetF32("o", []int{s.B, s.Hq, s.M, s.Dv}, a.Output())
		data, err := f.MarshalBinary()
		if err == nil {
			err = atomicfile.WriteFile(req.Output, data, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: output: %v", req.Op, err)
		}
	}
	return &response{OK: true, Seconds: secs}, nil
}

func (p *peer) sgemm(req *request) (*response, error) {
	if req.M < 1 || req.N < 1 || req.K < 1 {
		return nil, fmt.Errorf("sgemm: m %d, n %d, k %d: each must be at least 1", req.M, req.N, req.K)
	}
	bytes := 4 * (req.K*req.M + req.K*req.N + req.M*req.N)
	if bytes > maxBytes {
		return nil, fmt.Errorf("sgemm: %d MB of matrices, more than the peer's %d MB", bytes>>20, maxBytes>>20)
	}
	key := fmt.Sprintf("sgemm %d %d %d", req.M, req.N, req.K)
	if key != p.key {
		p.free()
		c := ggml.NewCtx(bytes + 8*ggml.Overhead() + ggml.GraphOverhead(8) + 1<<16)
		a, b := c.New(ggml.F32, req.K, req.M), c.New(ggml.F32, req.K, req.N)
		rng := rand.New(rand.NewPCG(3, 4))
		a.SetF32(uniform(rng, a.Len()))
		b.SetF32(uniform(rng, b.Len()))
		p.gemm, p.key = &gemm{ctx: c, graph: c.NewGraph(8, c.MulMat(a, b))}, key
	}
	secs, err := p.time(req.Reps, func(r *ggml.Runner) error { return r.Compute(p.gemm.graph) })
	if err != nil {
		return nil, err
	}
	return &response{OK: true, Seconds: secs}, nil
}

// time runs compute reps times, timing each run on its own.
func (p *peer) time(reps int, compute func(*ggml.Runner) error) ([]float64, error) {
	secs := make([]float64, reps)
	for i := range secs {
		start := time.Now()
		if err := compute(p.runner); err != nil {
			return nil, err
		}
		secs[i] = time.Since(start).Seconds()
	}
	return secs, nil
}

// causalMask is the additive mask [B, M, N] of bottom-right causal
// attention: query i sees keys j ≤ i + N − M.
func causalMask(s ggml.AttnSpec) []float32 {
	m := make([]float32, s.B*s.M*s.N)
	for b := range s.B {
		for i := range s.M {
			row := m[(b*s.M+i)*s.N:][:s.N]
			for j := range row {
				if j > i+s.N-s.M {
					row[j] = ggml.NegInf
				}
			}
		}
	}
	return m
}

// readInputs reads q, k, v (F32, attnlab's layouts) into a's inputs, whose
// ggml shapes are the same arrays.
func readInputs(a *ggml.Attn, path string) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	s := a.Spec
	for _, t := range []struct {
		name  string
		dst   ggml.Tensor
		shape []int
	}{{"q", a.Q, []int{s.B, s.Hq, s.M, s.D}}, {"k", a.K, []int{s.B, s.Hkv, s.N, s.D}}, {"v", a.V, []int{s.B, s.Hkv, s.N, s.Dv}}} {
		x, shape, err := f.Float32(t.name)
		if err != nil {
			return err
		}
		if fmt.Sprint(shape) != fmt.Sprint(t.shape) {
			return fmt.Errorf("%s has shape %v, want %v", t.name, shape, t.shape)
		}
		t.dst.SetF32(x)
	}
	return nil
}

func uniform(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 2*rng.Float32() - 1
	}
	return x
}

func main() {
	threads := flag.Int("threads", 1, "ggml's CPU threads (attnlab passes its own count)")
	flag.Parse()
	if *threads < 1 || *threads > runtime.NumCPU()*4 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: ggml-peer -threads N")
		os.Exit(2)
	}
	runner := ggml.NewRunner(*threads)
	defer runner.Close()
	p := &peer{runner: runner}
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	hello := struct {
		Peer    string   `json:"peer"`
		Version string   `json:"version"`
		Build   string   `json:"build"`
		Threads int      `json:"threads"`
		Ops     []string `json:"ops"`
	}{"ggml", ggml.Version(), strings.TrimPrefix(ggml.BuildFlags+"; SIMD "+ggml.Features(), "; "), *threads, []string{"attn_fwd", "decode", "sgemm"}}
	if err := enc.Encode(hello); err != nil || out.Flush() != nil {
		os.Exit(1)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var req request
			var resp *response
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				resp = &response{Error: "bad request: " + oneLine(jerr.Error())}
			} else if r, serr := p.serve(&req); serr != nil {
				resp = &response{Error: oneLine(serr.Error())}
			} else {
				resp = r
			}
			if enc.Encode(resp) != nil || out.Flush() != nil {
				os.Exit(1)
			}
		}
		if errors.Is(err, io.EOF) {
			return // attnlab closed our input: done
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "ggml-peer:", err)
			os.Exit(1)
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
