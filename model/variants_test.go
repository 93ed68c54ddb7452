package model

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

// TestVariantConfigKeys: Gemma 2's and Mistral's config keys and
// attention_sinks are read, validated and written back.
func TestVariantConfigKeys(t *testing.T) {
	c, err := ParseConfig([]byte(`{"hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 1,
		"num_attention_heads": 2, "vocab_size": 11, "sliding_window": 4096,
		"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "attention_sinks": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SlidingWindow != 4096 || c.AttnLogitSoftcapping != 50 || c.FinalLogitSoftcapping != 30 || !c.AttentionSinks {
		t.Errorf("parsed %+v", c)
	}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(data)
	if err != nil || back != c {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, c)
	}
	// a plain config writes none of the keys
	plain, _ := json.Marshal(tinyConfig(true))
	for _, k := range []string{"sliding_window", "softcapping", "attention_sinks"} {
		if strings.Contains(string(plain), k) {
			t.Errorf("a plain config writes %q: %s", k, plain)
		}
	}
	for _, bad := range []struct{ json, want string }{
		{`"sliding_window": -1`, "sliding_window = -1"},
		{`"attn_logit_softcapping": -2`, "attn_logit_softcapping = -2"},
		{`"final_logit_softcapping": -1e-3`, "final_logit_softcapping = -0.001"},
	} {
		_, err := ParseConfig([]byte(`{"hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 1,
			"num_attention_heads": 2, "vocab_size": 11, ` + bad.json + `}`))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %q", bad.json, err, bad.want)
		}
	}
}

// TestSinksCheckpoint: the sinks are saved as self_attn.sinks and loaded
// back; a checkpoint with sinks under a config without them is refused.
func TestSinksCheckpoint(t *testing.T) {
	cfg := tinyConfig(false)
	cfg.AttentionSinks = true
	m, err := New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.5, 9)
	if len(p.Layers[0].Attn.Sinks) != cfg.NumAttentionHeads || p.Layers[0].Attn.Sinks[0] == 0 {
		t.Fatalf("sinks %v, want %d initialised values", p.Layers[0].Attn.Sinks, cfg.NumAttentionHeads)
	}
	var total int
	for _, x := range m.Tensors(p) {
		total += len(x.Data)
	}
	if total != cfg.NumParams() {
		t.Errorf("tensors hold %d parameters, NumParams says %d", total, cfg.NumParams())
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
	m2, p2, err := Load[float32](dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.Config.AttentionSinks || p2.Layers[1].Attn.Sinks[1] != p.Layers[1].Attn.Sinks[1] {
		t.Errorf("loaded sinks %v, want %v", p2.Layers[1].Attn.Sinks, p.Layers[1].Attn.Sinks)
	}
	plain := cfg
	plain.AttentionSinks = false
	mp, _ := New[float32](plain)
	f, err := safetensors.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := mp.assign(mp.NewParams(), f); err == nil || !strings.Contains(err.Error(), "self_attn.sinks") {
		t.Errorf("sinks under a config without them: %v, want an error naming the tensor", err)
	}
}
