package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/safetensors"
)

// PeerNames are the peers bench runs by default, in the order of their
// columns.
var PeerNames = []string{"ggml", "onnxruntime"}

// PeerCell is one peer's result on one row: its time as a value in the
// row's unit, and its ratio to attnlab measured interleaved (attnlab, peer,
// attnlab, peer, … in rounds, same inputs, same threads), or why there is
// none.
type PeerCell struct {
	Value    float64  `json:"value,omitempty"`        // the median of the peer's round times, in the row's unit
	Ratio    float64  `json:"ratio,omitempty"`        // median over rounds of peer time / attnlab time: > 1 means attnlab is faster
	RatioMin float64  `json:"ratio_min,omitempty"`    // the smallest and largest round ratio: the spread
	RatioMax float64  `json:"ratio_max,omitempty"`    //
	Rounds   int      `json:"rounds,omitempty"`       // timed rounds (after a warm-up)
	Reps     int      `json:"reps,omitempty"`         // runs per side per round; a round's time is their median
	MaxDiff  *float64 `json:"max_abs_diff,omitempty"` // the output check: max |peer − attnlab| over o
	Kernel   string   `json:"kernel,omitempty"`       // what the peer says it ran
	Warning  string   `json:"warning,omitempty"`      // e.g. a GEMM rate far below attnlab's: ratios against this peer are suspect
	Error    string   `json:"error,omitempty"`        // why there is no value
}

// PeerInfo is one peer of the run: what its hello said, or why it did
// not run (then its column is empty).
type PeerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Build   string `json:"build,omitempty"`
	Threads int    `json:"threads,omitempty"`
	Error   string `json:"error,omitempty"`
}

// FindPeer returns how to run the peer called name on this machine, or an
// error saying why it cannot run (what to build or install).
//
//   - onnxruntime: adapters/node/ort_bench.js run by node, with
//     onnxruntime-node found as the conform adapters find it;
//   - ggml: adapters/ggml's ggml-peer where its build tool puts it
//     (adapters.GGMLProgram: $ATTNLAB_GGML, else attnlab/ggml in the user's
//     cache folder), its OpenMP threads spinning at most 10,000 rounds
//     once idle (GOMP_SPINCOUNT).
func FindPeer(name string) (PeerProgram, error) {
	switch name {
	case "onnxruntime":
		argv, env, cleanup, err := adapters.ORTBenchPeer()
		if err != nil {
			return PeerProgram{}, err
		}
		return PeerProgram{Name: name, Argv: argv, Env: env, Cleanup: cleanup}, nil
	case "ggml":
		file, why := adapters.GGMLProgram("ggml-peer")
		if why != "" {
			return PeerProgram{}, errors.New(why)
		}
		// libgomp's idle threads spin 300,000 rounds after each parallel
		// region (milliseconds on a core that attnlab's next turn needs:
		// attnlab's forward measured at half its rate beside an idle
		// ggml); 10,000 still covers the gap between the peer's own runs
		return PeerProgram{Name: name, Argv: []string{file}, Env: []string{"GOMP_SPINCOUNT=10000"}}, nil
	}
	return PeerProgram{}, fmt.Errorf("no peer called %q (want %s)", name, strings.Join(PeerNames, ", "))
}

// peerSet is the peers of one run.
type peerSet struct {
	names   []string
	running map[string]*Peer
	info    []PeerInfo
	dir     string // inputs and outputs files
	threads int
}

// startPeers starts every named peer found by find; one that cannot be
// found or started is in info with its reason and has no column.
func startPeers(ctx context.Context, names []string, find func(string) (PeerProgram, error), threads int) (*peerSet, error) {
	ps := &peerSet{names: names, running: map[string]*Peer{}, threads: threads}
	if len(names) > 0 {
		dir, err := os.MkdirTemp("", "attnlab-bench-peers-")
		if err != nil {
			return nil, err
		}
		ps.dir = dir
	}
	for _, name := range names {
		info := PeerInfo{Name: name}
		prog, err := find(name)
		var p *Peer
		if err == nil {
			p, err = StartPeer(ctx, prog, threads)
		}
		if err != nil {
			if ctx.Err() != nil {
				ps.close()
				return nil, ctx.Err()
			}
			info.Error = "not run: " + strings.TrimPrefix(err.Error(), name+": ")
		} else {
			ps.running[name] = p
			info.Version, info.Build, info.Threads = p.Hello.Version, p.Hello.Build, p.Hello.Threads
		}
		ps.info = append(ps.info, info)
	}
	return ps, nil
}

func (ps *peerSet) close() {
	for _, p := range ps.running {
		p.Close()
	}
	if ps.dir != "" {
		os.RemoveAll(ps.dir)
	}
}

// any reports whether some peer runs op.
func (ps *peerSet) any(op string) bool {
	for _, p := range ps.running {
		if p.Supports(op) {
			return true
		}
	}
	return false
}

// peerColumn is one column of peer results: a peer and the kv_dtype of its
// requests (ggml also runs F16 K/V, as llama.cpp stores its cache).
type peerColumn struct {
	name    string // the column's name: the peer's, or "ggml f16 K/V"
	peer    string
	kvDType string
}

// columns are the peer columns of op: each peer's float32 column, and
// ggml's F16 K/V column for attention.
func (ps *peerSet) columns(op string) []peerColumn {
	var cs []peerColumn
	for _, name := range ps.names {
		if op == "sgemm" {
			cs = append(cs, peerColumn{name: name, peer: name})
			continue
		}
		cs = append(cs, peerColumn{name: name, peer: name, kvDType: "f32"})
		if name == "ggml" {
			cs = append(cs, peerColumn{name: "ggml f16 K/V", peer: name, kvDType: "f16"})
		}
	}
	return cs
}

// checkTolerance is the largest |peer − attnlab| the output check accepts:
// float32 attention outputs of inputs N(0, 1) are O(1) and agree to about
// 1e-6 between orderings of the sums; F16 K/V rounds each key and value to
// 11 bits.
func checkTolerance(kvDType string) float64 {
	if kvDType == "f16" {
		return 2e-2
	}
	return 1e-3
}

// peerWork is one row's workload for attnlab and the peers.
type peerWork struct {
	run     func()      // attnlab's run
	req     peerRequest // the peers' request; reps, inputs and output are filled in per call
	q, k, v []float32   // the inputs, shaped as req says; nil for sgemm
	output  []float32   // attnlab's o once run has run, for the check; nil for sgemm
	value   func(seconds float64) float64
}

// interleave measures w for attnlab and every column of the row, and
// returns attnlab's median time in seconds and the cells. Before timing a
// column, its output on the same inputs must equal attnlab's (within
// checkTolerance). Then rounds of attnlab's reps runs and each column's reps
// runs, one after the other, go on until budget per side is spent (at least
// minRounds after a warm-up round); a round's time of a side is the median
// of its reps runs, and each round gives a ratio per column, its time over
// attnlab's in the same round. A column that refuses or fails has its
// reason in its cell; the row goes on without it.
func (ps *peerSet) interleave(ctx context.Context, budget time.Duration, w *peerWork) (float64, map[string]*PeerCell) {
	cols := ps.columns(w.req.Op)
	cells := map[string]*PeerCell{}
	w.run() // warm-up, and o for the check
	start := time.Now()
	w.run()
	one := time.Since(start).Seconds()
	reps := int(math.Ceil(minRoundTime.Seconds() / max(one, 1e-9)))
	reps = min(max(reps, 1), 1000)

	var inputs string
	if w.output != nil {
		inputs = filepath.Join(ps.dir, "inputs.safetensors")
		f := safetensors.New()
		r := w.req
		f.SetF32("q", []int{r.B, r.Hq, r.M, r.D}, w.q)
		f.SetF32("k", []int{r.B, r.Hkv, r.N, r.D}, w.k)
		f.SetF32("v", []int{r.B, r.Hkv, r.N, r.D}, w.v)
		if err := safetensors.WriteFile(inputs, f); err != nil {
			for _, c := range cols {
				cells[c.name] = &PeerCell{Error: "writing the inputs: " + err.Error()}
			}
			return one, cells
		}
		defer os.Remove(inputs)
	}

	var live []peerColumn
	timeout := 5*time.Minute + time.Duration(100*one*float64(reps)*float64(time.Second))
	for _, c := range cols {
		cell := &PeerCell{}
		cells[c.name] = cell
		p := ps.running[c.peer]
		switch {
		case p == nil:
			cell.Error = "peer not running"
			delete(cells, c.name) // the header says why
			continue
		case !p.Supports(w.req.Op):
			cell.Error = fmt.Sprintf("%s does not run %s", c.peer, w.req.Op)
			continue
		}
		req := w.req
		req.KVDType, req.Reps, req.Inputs = c.kvDType, 1, inputs
		if w.output != nil {
			req.Output = filepath.Join(ps.dir, "output.safetensors")
		}
		a, err := p.do(ctx, req, timeout)
		if err == nil && w.output != nil {
			var diff float64
			diff, err = compareOutput(req.Output, w.output, w.req, checkTolerance(c.kvDType))
			cell.MaxDiff = &diff
			os.Remove(req.Output)
		}
		if err != nil {
			if ctx.Err() != nil {
				return math.NaN(), nil
			}
			cell.Error = err.Error()
			continue
		}
		cell.Kernel = a.Kernel
		live = append(live, c)
	}

	var ours []float64
	peerTimes := map[string][]float64{}
	deadline := time.Now().Add(budget * time.Duration(1+len(live)))
	runOurs := func() float64 {
		w.run() // each side's turn starts warm: see warmRuns
		ts := make([]float64, reps)
		for r := range ts {
			t0 := time.Now()
			w.run()
			ts[r] = time.Since(t0).Seconds()
		}
		return median(ts)
	}
	for round := 0; ctx.Err() == nil && len(live) > 0 && (round <= minRounds || time.Now().Before(deadline)); round++ {
		t := runOurs()
		for x := 0; x < len(live); x++ {
			c := live[x]
			req := w.req
			req.KVDType, req.Reps, req.Inputs = c.kvDType, reps+warmRuns, inputs
			a, err := ps.running[c.peer].do(ctx, req, timeout)
			if err != nil {
				if ctx.Err() != nil {
					return math.NaN(), nil
				}
				cells[c.name].Error = "timing: " + err.Error()
				live = slices.Delete(live, x, x+1)
				x--
				continue
			}
			if round == 0 {
				continue // warm-up
			}
			if len(a.Seconds) != reps+warmRuns {
				cells[c.name].Error = fmt.Sprintf("timing: %d times for %d runs", len(a.Seconds), reps+warmRuns)
				live = slices.Delete(live, x, x+1)
				x--
				continue
			}
			peerTimes[c.name] = append(peerTimes[c.name], median(a.Seconds[warmRuns:]))
		}
		if round > 0 {
			ours = append(ours, t)
		}
	}
	if len(live) == 0 || len(ours) == 0 {
		// nothing timed beside attnlab: its own median over the budget
		if ctx.Err() != nil {
			return math.NaN(), nil
		}
		return medianTimeCtx(ctx, budget, func() func() { return w.run }), cells
	}
	for _, c := range live {
		roundStats(cells[c.name], ours, peerTimes[c.name], w.value)
		cells[c.name].Reps = reps
	}
	return median(ours), cells
}

// roundStats fills cell from the rounds' times of attnlab (ours) and of the
// peer (theirs, the same rounds): the peer's value is value(its median
// time), its ratio the median of theirs[i]/ours[i], with the smallest and
// largest as the spread.
func roundStats(cell *PeerCell, ours, theirs []float64, value func(float64) float64) {
	rs := make([]float64, len(ours))
	for i := range ours {
		rs[i] = theirs[i] / ours[i]
	}
	cell.Value = value(median(theirs))
	cell.Ratio, cell.RatioMin, cell.RatioMax = median(rs), slices.Min(rs), slices.Max(rs)
	cell.Rounds = len(rs)
}

// warmRuns is the untimed run that begins each side's turn in a round.
// The other side's turn leaves the caches holding its data and the cores
// idle or busy with its threads; a single cold run after it was measured at
// half of attnlab's warm rate for a forward of n = 1024 (one run a turn
// when a run takes the whole minRoundTime), so each side's times are of
// runs that follow its own.
const warmRuns = 1

// minRounds is the fewest timed rounds of an interleaved row, and
// minRoundTime the least time a side's runs take in a round: short runs
// are repeated so that the pipe's round trip and the timer are noise.
const (
	minRounds    = 5
	minRoundTime = 20 * time.Millisecond
)

// compareOutput reads the peer's o from path and returns the largest
// |peer − attnlab|, and an error when it is over tol, not finite, or the
// file is not o of the request's shape.
func compareOutput(path string, want []float32, req peerRequest, tol float64) (float64, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("its output: %w", err)
	}
	t := f.Tensors["o"]
	shape := []int{req.B, req.Hq, req.M, req.D}
	if t == nil || t.DType != safetensors.F32 || !slices.Equal(t.Shape, shape) {
		return 0, fmt.Errorf("its output has no F32 tensor o of shape %v", shape)
	}
	worst, at := 0.0, 0
	for i, x := range t.F32 {
		d := math.Abs(float64(x) - float64(want[i]))
		if !(d <= worst) { // NaN too
			worst, at = d, i
			if math.IsNaN(d) {
				break
			}
		}
	}
	if !(worst <= tol) {
		i := at
		d := i % req.D
		i /= req.D
		row := i % req.M
		i /= req.M
		return worst, fmt.Errorf("its output differs from attnlab's: max |Δ| = %.3g > %.0g at o[%d, %d, %d, %d] (%g, attnlab %g)",
			worst, tol, i/req.Hq, i%req.Hq, row, d, t.F32[at], want[at])
	}
	return worst, nil
}
