package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetrieverDiagnose runs the diagnosis on the tiny dataset with a dual
// encoder and a reranker: every share in [0, 1], every number with what it
// cannot show, every contrast scored by each system.
func TestRetrieverDiagnose(t *testing.T) {
	data := retrieverData(t)
	run := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, run)
	if code, stdout, stderr := attnlab(t, "retriever", "rerank", "-data", data, "-out", run, "-quiet", "-steps", "2", "-warmup", "1", "-groups", "2",
		"-candidates", "3", "-max-query", "16", "-max-code", "32"); code != 0 {
		t.Fatalf("rerank: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := attnlab(t, "retriever", "diagnose", "-data", data, "-model", filepath.Join(run, "model"),
		"-reranker", filepath.Join(run, "reranker"), "-batch", "8", "-near", "0.7", "-json")
	if code != 0 {
		t.Fatalf("diagnose: exit %d\n%s%s", code, stdout, stderr)
	}
	var d struct {
		Pairs   int
		InBatch []struct {
			Value  float64
			Cannot string
		} `json:"in_batch"`
		Hard []struct {
			Value  float64
			Cannot string
		} `json:"hard_negatives"`
		LengthBias *struct{ Value float64 } `json:"length_bias"`
		Contrasts  []struct {
			Name     string
			Items    int
			Accuracy map[string]float64
			Cannot   string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.Pairs == 0 || len(d.InBatch) != 4 || len(d.Hard) != 4 || len(d.Contrasts) != 3 {
		t.Fatalf("diagnosis: %+v", d)
	}
	for _, s := range append(d.InBatch, d.Hard...) {
		if s.Value < 0 || s.Value > 1 || s.Cannot == "" {
			t.Errorf("share %+v", s)
		}
	}
	// the tiny corpus repeats its docs across packages ("returns how many
	// widgets of kind N"): the in-batch queries are near-copies
	if d.InBatch[3].Value == 0 {
		t.Errorf("no near-identical in-batch query found in a corpus of near-identical docs")
	}
	for _, c := range d.Contrasts {
		if c.Cannot == "" || c.Items > 0 && len(c.Accuracy) != 5 { // bm25, bm25f+doc, dense, dense+doc, rerank
			t.Errorf("contrast %+v", c)
		}
	}
	if code, _, stderr := attnlab(t, "retriever", "diagnose", "-data", data, "-near", "2"); code != 2 || !strings.Contains(stderr, "-near") {
		t.Errorf("-near 2: exit %d, %s", code, stderr)
	}
}
