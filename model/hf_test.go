package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

// TestParseConfigDefaults: the fields a Hugging Face config may leave out
// take LlamaConfig's defaults; a field that is present is taken as written.
func TestParseConfigDefaults(t *testing.T) {
	base := `"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 50`
	c, err := ParseConfig([]byte("{" + base + "}"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NumKeyValueHeads != 4 || c.MaxPositionEmbeddings != 2048 || c.RMSNormEps != 1e-6 || c.RopeTheta != 10000 {
		t.Errorf("defaults: kv heads %d, max positions %d, eps %g, theta %g; want 4, 2048, 1e-6, 10000",
			c.NumKeyValueHeads, c.MaxPositionEmbeddings, c.RMSNormEps, c.RopeTheta)
	}
	c, err = ParseConfig([]byte("{" + base + `, "num_key_value_heads": null, "rms_norm_eps": 0, "max_position_embeddings": 64, "num_key_value_heads": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RMSNormEps != 0 || c.MaxPositionEmbeddings != 64 || c.NumKeyValueHeads != 2 {
		t.Errorf("as written: eps %g, max positions %d, kv heads %d; want 0, 64, 2", c.RMSNormEps, c.MaxPositionEmbeddings, c.NumKeyValueHeads)
	}
	if _, err := ParseConfig([]byte("{" + base + `, "rope_theta": 0}`)); err == nil || !strings.Contains(err.Error(), "rope_theta") {
		t.Errorf("rope_theta 0: %v, want an error naming it", err)
	}
}

// TestTiedCheckpointWithAHead: transformers may store lm_head.weight in a
// tied checkpoint; it is accepted when it is the embedding, refused with an
// error naming both tensors when it is not.
func TestTiedCheckpointWithAHead(t *testing.T) {
	m, _ := New[float32](tinyConfig(true))
	p := m.NewParams()
	m.Init(p, 0.02, 3)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, WeightsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	emb, shape, _ := f.Float32("model.embed_tokens.weight")
	f.SetF32("lm_head.weight", shape, emb)
	if err := safetensors.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load[float32](dir); err != nil {
		t.Errorf("a tied checkpoint storing the embedding as lm_head.weight: %v", err)
	}
	emb[5] += 1
	f.SetF32("lm_head.weight", shape, emb)
	os.Remove(path)
	safetensors.WriteFile(path, f)
	_, _, err = Load[float32](dir)
	if err == nil || !strings.Contains(err.Error(), "lm_head.weight") || !strings.Contains(err.Error(), "embed_tokens") || !strings.Contains(err.Error(), "element 5") {
		t.Errorf("a different lm_head.weight: %v", err)
	}
}

// TestSegmentsMustBeContiguous: an id that comes back after another
// segment is an error naming the row, not a silent merge of two documents.
func TestSegmentsMustBeContiguous(t *testing.T) {
	cfg := tinyConfig(true)
	b := &Batch{B: 2, T: 6, Tokens: make([]int, 12), Seg: []int{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 0, 0}}
	err := b.Check(cfg)
	if err == nil || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), "segment id 0 reappears") {
		t.Errorf("reappearing segment: %v", err)
	}
	b.Seg = []int{0, 0, 1, 1, 2, 2, 5, 5, 1, 1, 3, 3}
	if err := b.Check(cfg); err != nil {
		t.Errorf("contiguous segments: %v", err)
	}
}

// TestCheckpointKinds: a checkpoint records what it was trained as, and
// LoadLM refuses another kind by name.
func TestCheckpointKinds(t *testing.T) {
	cfg := tinyConfig(true)
	cfg.Kind = KindDualEncoder
	m, _ := New[float32](cfg)
	p := m.NewParams()
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
	if k, err := ReadKind(dir); err != nil || k != KindDualEncoder {
		t.Errorf("kind %q, %v", k, err)
	}
	if _, err := LoadLM[float32](dir); err == nil || !strings.Contains(err.Error(), "dual-encoder") {
		t.Errorf("LoadLM of a dual encoder: %v", err)
	}
	// a checkpoint written elsewhere, without the field, is a language model
	// unless its files say otherwise
	cfg.Kind = ""
	m, _ = New[float32](cfg)
	plain := filepath.Join(t.TempDir(), "plain")
	m.Save(plain, p, nil)
	if k, _ := ReadKind(plain); k != KindLM {
		t.Errorf("no kind recorded: %q, want %q", k, KindLM)
	}
	os.WriteFile(filepath.Join(plain, "dense.json"), []byte("{}"), 0o644)
	if k, _ := ReadKind(plain); k != KindDualEncoder {
		t.Errorf("no kind recorded, dense.json present: %q", k)
	}
}
