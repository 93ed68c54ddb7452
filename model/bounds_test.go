package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

// TestConfigLimits: a size beyond the stated limits is refused, naming
// the field, before anything is allocated.
func TestConfigLimits(t *testing.T) {
	for field, set := range map[string]func(*Config){
		"hidden_size":             func(c *Config) { c.HiddenSize = 1e9 },
		"intermediate_size":       func(c *Config) { c.IntermediateSize = MaxDim + 1 },
		"num_hidden_layers":       func(c *Config) { c.NumHiddenLayers = 1e9 },
		"num_attention_heads":     func(c *Config) { c.NumAttentionHeads = 1e9 },
		"num_key_value_heads":     func(c *Config) { c.NumKeyValueHeads = 1e9 },
		"vocab_size":              func(c *Config) { c.VocabSize = 1e9 },
		"max_position_embeddings": func(c *Config) { c.MaxPositionEmbeddings = 1e9 },
		"head_dim":                func(c *Config) { c.HeadDim = 1e9 },
	} {
		c := tinyConfig(true)
		set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "want in [") {
			t.Errorf("%s too large: %v", field, err)
		}
	}
	c := tinyConfig(true)
	c.HiddenSize, c.VocabSize, c.IntermediateSize, c.MaxPositionEmbeddings = MaxDim, MaxDim, MaxDim, MaxPositions
	if err := c.Validate(); err != nil {
		t.Errorf("every size at its limit: %v", err)
	}
}

// TestNewRefusesWhatMemoryCannotHold: within the limits, a model whose
// weights exceed any machine's memory is an error of New, not a panic of
// NewParams.
func TestNewRefusesWhatMemoryCannotHold(t *testing.T) {
	c := tinyConfig(false)
	c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumHiddenLayers = MaxDim, MaxDim, MaxDim, MaxLayers
	_, err := New[float32](c)
	if err == nil || !strings.Contains(err.Error(), "float32 weights") || !strings.Contains(err.Error(), "available") {
		t.Fatalf("New of %d parameters: %v", c.NumParams(), err)
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("not one line: %q", err)
	}
}

// TestLoadHugeConfig: a config.json of 10⁹-wide dimensions is refused
// with the file and field named (it made NewParams panic in makeslice).
func TestLoadHugeConfig(t *testing.T) {
	for _, big := range []string{"hidden_size", "vocab_size", "intermediate_size", "num_hidden_layers", "max_position_embeddings"} {
		dir := t.TempDir()
		cfg := map[string]any{"hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
			"num_key_value_heads": 1, "vocab_size": 11, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000}
		cfg[big] = 1000000000
		data, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), safetensors.New()); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load[float32](dir)
		if err == nil || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), ConfigFile) {
			t.Errorf("%s = 1e9: %v", big, err)
		}
	}
}

// TestNumParams counts what Tensors holds.
func TestNumParams(t *testing.T) {
	for _, tied := range []bool{true, false} {
		c := tinyConfig(tied)
		c.HeadDim = 6 // q and kv projections wider than the model
		m, err := New[float32](c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range m.Tensors(m.NewParams()) {
			n += len(x.Data)
		}
		if got := c.NumParams(); got != n {
			t.Errorf("tied %v: NumParams %d, the tensors hold %d", tied, got, n)
		}
	}
}

// TestActsSize: the estimate is what a forward and backward allocate.
func TestActsSize(t *testing.T) {
	for _, ckpt := range []bool{false, true} {
		c := tinyConfig(false)
		m, err := New[float64](c)
		if err != nil {
			t.Fatal(err)
		}
		p, g := m.NewParams(), m.NewParams()
		m.Init(p, 0.02, 1)
		const B, T = 2, 5
		a := m.NewActs(B, T)
		if ckpt {
			a = m.NewCheckpointedActs(B, T)
		}
		b := &Batch{B: B, T: T, Tokens: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
		if _, _, err := m.Forward(a, p, b); err != nil {
			t.Fatal(err)
		}
		m.Backward(g, p, a, b)
		if got, want := c.ActsSize(B, T, ckpt), elems[float64](reflect.ValueOf(a)); got != want {
			t.Errorf("checkpointed %v: ActsSize %d, the activations hold %d", ckpt, got, want)
		}
	}
}

// elems counts the elements of every []E reachable from v.
func elems[E any](v reflect.Value) int {
	want := reflect.TypeFor[[]E]()
	n := 0
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			if v.Type() == want {
				n += v.Cap()
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(v)
	return n
}

// TestCheckGenerate: a generation whose KV cache cannot fit in memory is
// refused before the cache is allocated; one past the positions too.
func TestCheckGenerate(t *testing.T) {
	c := tinyConfig(true)
	c.HiddenSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.NumHiddenLayers, c.MaxPositionEmbeddings = 64, 4, 4, 1024, MaxPositions
	m, err := New[float32](c)
	if err != nil {
		t.Fatal(err)
	}
	err = m.CheckGenerate([][]int{{1, 2, 3}}, MaxPositions-3)
	if err == nil || !strings.Contains(err.Error(), "1 prompts of up to 3 tokens and 16777213 new ones needs") || !strings.Contains(err.Error(), "KV cache") {
		t.Errorf("a cache of 16M tokens of 1024 layers: %v", err)
	}
	if err := m.CheckGenerate([][]int{{1, 2, 3}}, MaxPositions); err == nil || !strings.Contains(err.Error(), "passes max_position_embeddings") {
		t.Errorf("past the positions: %v", err)
	}
	if err := m.CheckGenerate([][]int{{1, 2, 3}}, 100); err != nil {
		t.Errorf("100 new tokens: %v", err)
	}
}
