package bench

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestORTPeer: the ONNX Runtime peer (adapters/node/ort_bench.js) says
// hello with the thread count asked, and on every kind of row bench sends
// it (MHA and GQA prefill, causal and full; MHA and GQA decode; SGEMM) its
// output equals attnlab's and it is timed, with each op it may pick (-op
// auto picks the fastest) and with auto. Skips when node or
// onnxruntime-node is missing.
func TestORTPeer(t *testing.T) {
	if _, err := FindPeer("onnxruntime"); err != nil {
		t.Skip("the ONNX Runtime peer cannot run: ", err)
	}
	ctx := context.Background()
	mha := []*peerWork{
		forwardWork(attnCase{dtype: "float32", n: 256, H: 2, D: 64, causal: true}),
		forwardWork(attnCase{dtype: "float32", n: 256, H: 2, D: 64, causal: false}),
		decodeWork(decodeCase{ctx: 300, Hq: 2, Hkv: 2, D: 64}),
	}
	gqa := []*peerWork{
		forwardWork(attnCase{dtype: "float32", n: 256, H: 4, Hkv: 2, D: 64, causal: true}),
		decodeWork(decodeCase{ctx: 300, Hq: 8, Hkv: 2, D: 64}),
	}
	for _, tc := range []struct {
		op    string
		works []*peerWork
	}{
		{"auto", append(slices.Concat(mha, gqa), blasWork())},
		{"mha", mha},
		{"gqa", gqa},
		{"gqa-shared", gqa[1:]},
		{"attention", slices.Concat(mha, gqa)},
	} {
		find := func(name string) (PeerProgram, error) {
			p, err := FindPeer(name)
			if tc.op != "auto" {
				p.Argv = append(p.Argv, "-op", tc.op)
			}
			return p, err
		}
		ps, err := startPeers(ctx, []string{"onnxruntime"}, find, 2)
		if err != nil {
			t.Fatal(err)
		}
		if ps.info[0].Error != "" || ps.info[0].Threads != 2 {
			t.Fatalf("%s: %+v", tc.op, ps.info[0])
		}
		for _, w := range tc.works {
			ours, cells := ps.interleave(ctx, time.Millisecond, w)
			c := cells["onnxruntime"]
			if c == nil || c.Error != "" || !(ours > 0) || !(c.Ratio > 0) || c.Rounds < minRounds {
				t.Errorf("-op %s %+v: attnlab %v s, cell %+v", tc.op, w.req, ours, c)
				continue
			}
			if w.output != nil && (c.MaxDiff == nil || *c.MaxDiff > 1e-5) {
				t.Errorf("-op %s %+v: max |Δ| %v", tc.op, w.req, *c.MaxDiff)
			}
			if w.output != nil {
				t.Logf("-op %s: %s hq=%d hkv=%d n=%d causal=%v: %s, max |Δ| %.2g", tc.op, w.req.Op, w.req.Hq, w.req.Hkv, w.req.N, w.req.Causal, c.Kernel, *c.MaxDiff)
			}
		}
		ps.close()
	}
}
