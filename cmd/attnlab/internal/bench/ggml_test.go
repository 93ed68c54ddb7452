package bench

import (
	"context"
	"testing"
	"time"
)

// TestGGMLPeer: the ggml peer (adapters/ggml's ggml-peer) says hello with
// the thread count asked, and on every kind of row bench sends it (MHA and
// GQA prefill, causal and full; MHA and GQA decode; SGEMM), in its float32
// and its F16 K/V column, its output equals attnlab's within the column's
// tolerance and it is timed. Skips when the peer is not built.
func TestGGMLPeer(t *testing.T) {
	if _, err := FindPeer("ggml"); err != nil {
		t.Skip("the ggml peer cannot run: ", err)
	}
	ctx := context.Background()
	ps, err := startPeers(ctx, []string{"ggml"}, FindPeer, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.close()
	if ps.info[0].Error != "" || ps.info[0].Threads != 2 {
		t.Fatalf("%+v", ps.info[0])
	}
	for _, w := range []*peerWork{
		forwardWork(attnCase{dtype: "float32", n: 256, H: 2, D: 64, causal: true}),
		forwardWork(attnCase{dtype: "float32", n: 256, H: 2, D: 64, causal: false}),
		forwardWork(attnCase{dtype: "float32", n: 256, H: 4, Hkv: 2, D: 128, causal: true}),
		decodeWork(decodeCase{ctx: 300, Hq: 2, Hkv: 2, D: 64}),
		decodeWork(decodeCase{ctx: 300, Hq: 8, Hkv: 2, D: 128}),
		blasWork(),
	} {
		_, cells := ps.interleave(ctx, time.Millisecond, w)
		cols := []string{"ggml", "ggml f16 K/V"}
		if w.output == nil {
			cols = cols[:1]
		}
		for _, col := range cols {
			c := cells[col]
			if c == nil || c.Error != "" || !(c.Ratio > 0) || c.Rounds < minRounds {
				t.Errorf("%s %+v: cell %+v", col, w.req, c)
				continue
			}
			if w.output != nil {
				t.Logf("%s: %s hq=%d hkv=%d n=%d d=%d causal=%v: max |Δ| %.2g", col, w.req.Op, w.req.Hq, w.req.Hkv, w.req.N, w.req.D, w.req.Causal, *c.MaxDiff)
			}
		}
	}
}
