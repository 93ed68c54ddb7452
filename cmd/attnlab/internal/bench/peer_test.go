package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/safetensors"
)

// The test binary is also a fake peer: run with BENCH_FAKE_PEER=MODE it
// speaks the peer protocol instead of running the tests (fakePeer), so that
// the peer mechanism is tested without ggml or ONNX Runtime.
func TestMain(m *testing.M) {
	if mode := os.Getenv("BENCH_FAKE_PEER"); mode != "" {
		os.Exit(fakePeer(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakePeer is a peer named "fake" that computes attention with attnlab's
// reference (float64) on the request's inputs. Its mode changes one thing:
//
//	good     right outputs; times are its own runs
//	wrong    adds 0.01 to one element of o
//	refuse   answers {"ok": false} to attn_fwd with n >= 128
//	crash    exits on its second request
//	silent   never says hello
//	threads  says it runs one thread more than asked
func fakePeer(mode string, args []string) int {
	threads := 0
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-threads" {
			fmt.Sscan(args[i+1], &threads)
		}
	}
	if mode == "silent" {
		time.Sleep(time.Hour)
	}
	if mode == "threads" {
		threads++
	}
	hello, _ := json.Marshal(PeerHello{Peer: "fake", Version: "fake 1", Build: "test binary", Threads: threads, Ops: []string{"attn_fwd", "decode", "sgemm"}})
	fmt.Printf("%s\n", hello)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	requests := 0
	for in.Scan() {
		requests++
		if mode == "crash" && requests == 2 {
			fmt.Fprintln(os.Stderr, "fake: crashed on purpose")
			return 3
		}
		var req peerRequest
		answer := map[string]any{}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer["ok"], answer["error"] = false, err.Error()
		} else if mode == "refuse" && req.Op == "attn_fwd" && req.N >= 128 {
			answer["ok"], answer["error"] = false, fmt.Sprintf("n = %d: too long for the fake", req.N)
		} else if secs, err := fakeRun(req, mode); err != nil {
			answer["ok"], answer["error"] = false, err.Error()
		} else {
			answer["ok"], answer["seconds"], answer["kernel"] = true, secs, "reference"
		}
		data, _ := json.Marshal(answer)
		fmt.Printf("%s\n", data)
	}
	return 0
}

func fakeRun(req peerRequest, mode string) ([]float64, error) {
	if req.Op == "sgemm" {
		secs := make([]float64, req.Reps)
		for i := range secs {
			secs[i] = 1e-3
		}
		return secs, nil
	}
	f, err := safetensors.ReadFile(req.Inputs)
	if err != nil {
		return nil, err
	}
	c := &attention.Config{B: req.B, Hq: req.Hq, Hkv: req.Hkv, M: req.M, N: req.N, D: req.D, Dv: req.D, Causal: req.Causal || req.Op == "decode"}
	f64 := func(name string) []float64 {
		x := make([]float64, len(f.Tensors[name].F32))
		for i, v := range f.Tensors[name].F32 {
			x[i] = float64(v)
		}
		return x
	}
	q, k, v := f64("q"), f64("k"), f64("v")
	o, lse, p := make([]float64, len(q)), make([]float64, req.B*req.Hq*req.M), make([]float64, req.B*req.Hq*req.M*req.N)
	secs := make([]float64, req.Reps)
	for i := range secs {
		t0 := time.Now()
		if err := attention.Forward(o, lse, p, q, k, v, c); err != nil {
			return nil, err
		}
		secs[i] = time.Since(t0).Seconds()
	}
	if req.Output != "" {
		o32 := make([]float32, len(o))
		for i, x := range o {
			o32[i] = float32(x)
		}
		if mode == "wrong" {
			o32[len(o32)/3] += 0.01
		}
		out := safetensors.New()
		out.SetF32("o", []int{req.B, req.Hq, req.M, req.D}, o32)
		if err := safetensors.WriteFile(req.Output, out); err != nil {
			return nil, err
		}
	}
	return secs, nil
}

// fakeFind finds the fake peer of the given mode for the name "fake".
func fakeFind(mode string) func(string) (PeerProgram, error) {
	return func(name string) (PeerProgram, error) {
		exe, err := os.Executable()
		if err != nil {
			return PeerProgram{}, err
		}
		if name != "fake" {
			return PeerProgram{}, fmt.Errorf("no peer %q in this test", name)
		}
		return PeerProgram{Name: "fake", Argv: []string{exe}, Env: []string{"BENCH_FAKE_PEER=" + mode}}, nil
	}
}

// smallWork is a causal forward at n (H = 2, D = 16) for the fake peer.
func smallWork(n int) *peerWork {
	w := forwardWork(attnCase{dtype: "float32", n: n, H: 2, D: 16, causal: true})
	return w
}

// TestPeerInterleave: a right peer gets a cell with a value, a ratio inside
// its spread and the rounds; its output check passed (max |Δ| small).
func TestPeerInterleave(t *testing.T) {
	ctx := context.Background()
	ps, err := startPeers(ctx, []string{"fake"}, fakeFind("good"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.close()
	if len(ps.info) != 1 || ps.info[0].Error != "" || ps.info[0].Version != "fake 1" || ps.info[0].Threads != 2 {
		t.Fatalf("peer info %+v", ps.info)
	}
	for _, w := range []*peerWork{smallWork(64), decodeWork(decodeCase{ctx: 300, Hq: 4, Hkv: 2, D: 16}), blasWork()} {
		ours, cells := ps.interleave(ctx, time.Millisecond, w)
		c := cells["fake"]
		if c == nil || c.Error != "" {
			t.Fatalf("%s: cell %+v", w.req.Op, c)
		}
		if !(ours > 0) || !(c.Value > 0) || !(c.RatioMin <= c.Ratio && c.Ratio <= c.RatioMax) || c.RatioMin <= 0 ||
			c.Rounds < minRounds || c.Reps < 1 || c.Kernel != "reference" {
			t.Errorf("%s: attnlab %v s, cell %+v", w.req.Op, ours, c)
		}
		if w.output != nil && (c.MaxDiff == nil || *c.MaxDiff > 1e-4) {
			t.Errorf("%s: the check's max |Δ| %v", w.req.Op, c.MaxDiff)
		}
		if w.output == nil && c.MaxDiff != nil {
			t.Errorf("sgemm was checked: %v", *c.MaxDiff)
		}
	}
}

// TestPeerFailures: a peer that computes something else, refuses a shape
// or crashes has a cell with the reason, and the row is still measured;
// a peer that never says hello, says the wrong thread count or is not
// installed is not run, with its reason.
func TestPeerFailures(t *testing.T) {
	ctx := context.Background()
	run := func(mode string, w *peerWork) (float64, *PeerCell) {
		t.Helper()
		ps, err := startPeers(ctx, []string{"fake"}, fakeFind(mode), 2)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.close()
		if ps.info[0].Error != "" {
			t.Fatalf("%s: %s", mode, ps.info[0].Error)
		}
		ours, cells := ps.interleave(ctx, time.Millisecond, w)
		return ours, cells["fake"]
	}
	for _, tc := range []struct {
		mode string
		n    int
		want string
	}{
		{"wrong", 64, "its output differs from attnlab's: max |Δ| = 0.01 > 0.001 at o[0, 0, 42, 10]"},
		{"refuse", 128, "n = 128: too long for the fake"},
		{"crash", 64, "timing: it exited: exit status 3: fake: crashed on purpose"},
	} {
		ours, c := run(tc.mode, smallWork(tc.n))
		if !(ours > 0) {
			t.Errorf("%s: attnlab's time %v", tc.mode, ours)
		}
		if c == nil || !strings.HasPrefix(c.Error, tc.want) || c.Ratio != 0 || c.Value != 0 {
			t.Errorf("%s: cell %+v, want the error %q", tc.mode, c, tc.want)
		}
	}

	for _, tc := range []struct {
		mode, want string
	}{
		{"threads", "not run: it runs 3 threads, asked for 2"},
		{"none", "not run: no peer \"none\" in this test"},
	} {
		name := "fake"
		if tc.mode == "none" {
			name = "none"
		}
		ps, err := startPeers(ctx, []string{name}, fakeFind(tc.mode), 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps.running) != 0 || ps.info[0].Error != tc.want {
			t.Errorf("%s: info %+v, want the error %q", tc.mode, ps.info, tc.want)
		}
		ours, cells := ps.interleave(ctx, time.Millisecond, smallWork(64))
		if !(ours > 0) || len(cells) != 0 {
			t.Errorf("%s: a peer that is not running: %v, %+v", tc.mode, ours, cells)
		}
		ps.close()
	}
}

// TestPeerSilentInterrupted: a peer that never says hello does not hold
// up an interrupt.
func TestPeerSilentInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := startPeers(ctx, []string{"fake"}, fakeFind("silent"), 2)
	if err != context.DeadlineExceeded {
		t.Errorf("startPeers: %v, want the context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned after %v", d)
	}
}

// TestRoundStats: the ratio is the median of the rounds' ratios, not the
// ratio of the medians, with the extremes as the spread.
func TestRoundStats(t *testing.T) {
	var c PeerCell
	ours := []float64{1, 2, 1, 4, 1}
	theirs := []float64{2, 2, 3, 2, 1.5}
	roundStats(&c, ours, theirs, func(s float64) float64 { return 1 / s })
	// round ratios 2, 1, 3, 0.5, 1.5: median 1.5, min 0.5, max 3
	if c.Ratio != 1.5 || c.RatioMin != 0.5 || c.RatioMax != 3 || c.Rounds != 5 || c.Value != 0.5 {
		t.Errorf("%+v", c)
	}
}

// TestPeerCellJSON: the documented field names of a peer cell and a peer.
func TestPeerCellJSON(t *testing.T) {
	d := 1e-6
	data, _ := json.Marshal(Row{Group: "attention fwd", Peers: map[string]*PeerCell{
		"ggml":        {Value: 1, Ratio: 2, RatioMin: 1.5, RatioMax: 3, Rounds: 5, Reps: 2, MaxDiff: &d, Kernel: "k", Warning: "w"},
		"onnxruntime": {Error: "e"},
	}})
	for _, k := range []string{`"peers":{"ggml":{"value":1,"ratio":2,"ratio_min":1.5,"ratio_max":3,"rounds":5,"reps":2,"max_abs_diff":0.000001,"kernel":"k","warning":"w"}`,
		`"onnxruntime":{"error":"e"}`} {
		if !strings.Contains(string(data), k) {
			t.Errorf("no %s in %s", k, data)
		}
	}
	data, _ = json.Marshal(Report{Peers: []PeerInfo{{Name: "ggml", Error: "not run: x"}, {Name: "onnxruntime", Version: "v", Build: "b", Threads: 2}}})
	if !strings.Contains(string(data), `"peers":[{"name":"ggml","error":"not run: x"},{"name":"onnxruntime","version":"v","build":"b","threads":2}]`) {
		t.Errorf("report peers: %s", data)
	}
}

// TestBLASFlag: a peer at half of attnlab's GEMM rate or less is flagged.
func TestBLASFlag(t *testing.T) {
	r := Row{Peers: map[string]*PeerCell{"fast": {Ratio: 0.9}, "slow": {Ratio: 2.5}}}
	flagSlowBLAS(&r)
	if r.Peers["fast"].Warning != "" || !strings.HasPrefix(r.Peers["slow"].Warning, "slow's SGEMM runs at 40% of attnlab's") {
		t.Errorf("%+v %+v", r.Peers["fast"], r.Peers["slow"])
	}
}

// TestCacheLevel: where a working set lives, from the cache sizes of this
// kind of machine (512 KiB L2 per core, 32 MiB L3, 2 threads).
func TestCacheLevel(t *testing.T) {
	for _, tc := range []struct {
		bytes float64
		want  string
	}{{512 << 10, levelL2}, {768 << 10, levelL2}, {1 << 20, levelL3}, {24 << 20, levelL3}, {32 << 20, levelDRAM}, {256 << 20, levelDRAM}} {
		if got := cacheLevel(tc.bytes, 2, 512<<10, 32<<20); got != tc.want {
			t.Errorf("%g bytes: %s, want %s", tc.bytes, got, tc.want)
		}
	}
	if got := cacheLevel(1<<10, 2, 0, 0); got != levelDRAM {
		t.Errorf("unknown caches: %s", got)
	}
}
