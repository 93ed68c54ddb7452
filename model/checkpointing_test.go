package model

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// TestActivationCheckpointing: gradients with recomputed activations are
// bit-identical, and the activations take less memory (measured).
func TestActivationCheckpointing(t *testing.T) {
	cfg := tinyConfig(false)
	cfg.NumHiddenLayers, cfg.HiddenSize, cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 6, 32, 64, 128
	m, _ := New[float32](cfg)
	p := m.NewParams()
	m.Init(p, 0.1, 5)
	const B, T = 4, 64
	b := &Batch{B: B, T: T, Tokens: make([]int, B*T)}
	for i := range b.Tokens {
		b.Tokens[i] = (i * 7) % cfg.VocabSize
	}
	measure := func(newActs func(int, int) *Acts[float32]) (*Params[float32], float32, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		a := newActs(B, T)
		runtime.ReadMemStats(&after)
		loss, _, err := m.Forward(a, p, b)
		if err != nil {
			t.Fatal(err)
		}
		g := m.NewParams()
		m.Backward(g, p, a, b)
		return g, loss, after.TotalAlloc - before.TotalAlloc
	}
	g1, l1, full := measure(m.NewActs)
	g2, l2, ckpt := measure(m.NewCheckpointedActs)
	if l1 != l2 {
		t.Errorf("loss %v vs %v", l1, l2)
	}
	a, c := m.Tensors(g1), m.Tensors(g2)
	for i := range a {
		for j := range a[i].Data {
			if a[i].Data[j] != c[i].Data[j] {
				t.Fatalf("%s[%d]: %v with all activations, %v recomputed", a[i].Name, j, a[i].Data[j], c[i].Data[j])
			}
		}
	}
	t.Logf("activation memory: %d bytes kept, %d with checkpointing (%.1f× less)", full, ckpt, float64(full)/float64(ckpt))
	if ckpt*2 > full {
		t.Errorf("checkpointing saved too little: %d vs %d bytes", ckpt, full)
	}
	// docs/model.md states the ratio this test measures
	page, err := os.ReadFile(filepath.Join("..", "docs", "model.md"))
	if err != nil {
		t.Fatal(err)
	}
	m2 := regexp.MustCompile(`activation memory ([0-9.]+)× smaller`).FindSubmatch(page)
	if got := fmt.Sprintf("%.1f", float64(full)/float64(ckpt)); m2 == nil || string(m2[1]) != got {
		t.Errorf("docs/model.md should say \"activation memory %s× smaller\" (this test's measure), found %q", got, m2)
	}
}
