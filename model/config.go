package model

import (
	"encoding/json"
	"fmt"
	"math"
)

// Config describes a Llama-style decoder with the field names of Hugging
// Face's LlamaConfig, so that config.json reads and writes both ways.
type Config struct {
	HiddenSize            int     `json:"hidden_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"`
	HeadDim               int     `json:"head_dim,omitempty"` // 0: hidden_size / num_attention_heads
	RMSNormEps            float64 `json:"rms_norm_eps"`
	RopeTheta             float64 `json:"rope_theta"`
	VocabSize             int     `json:"vocab_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	BOSTokenID            *int    `json:"bos_token_id,omitempty"`
	EOSTokenID            *int    `json:"eos_token_id,omitempty"`
}

// Head returns the per-head dimension.
func (c Config) Head() int {
	if c.HeadDim != 0 {
		return c.HeadDim
	}
	if c.NumAttentionHeads == 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// Validate reports the first inconsistency, naming the config.json field.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"vocab_size", c.VocabSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if f.v < 1 {
			return fmt.Errorf("model: config %s = %d, want >= 1", f.name, f.v)
		}
	}
	switch {
	case c.HeadDim < 0:
		return fmt.Errorf("model: config head_dim = %d, want >= 0", c.HeadDim)
	case c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0:
		return fmt.Errorf("model: config hidden_size = %d is not a multiple of num_attention_heads = %d (set head_dim)", c.HiddenSize, c.NumAttentionHeads)
	case c.Head()%2 != 0:
		return fmt.Errorf("model: config head dimension %d is odd: RoPE rotates pairs", c.Head())
	case c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return fmt.Errorf("model: config num_attention_heads = %d is not a multiple of num_key_value_heads = %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	case !(c.RMSNormEps >= 0) || math.IsInf(c.RMSNormEps, 0):
		return fmt.Errorf("model: config rms_norm_eps = %v, want a finite value >= 0", c.RMSNormEps)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0):
		return fmt.Errorf("model: config rope_theta = %v, want a finite value > 0", c.RopeTheta)
	}
	for _, id := range []struct {
		name string
		v    *int
	}{{"bos_token_id", c.BOSTokenID}, {"eos_token_id", c.EOSTokenID}} {
		if id.v != nil && (*id.v < 0 || *id.v >= c.VocabSize) {
			return fmt.Errorf("model: config %s = %d is outside the vocabulary [0, %d)", id.name, *id.v, c.VocabSize)
		}
	}
	return nil
}

// MarshalJSON writes c as a Hugging Face LlamaConfig.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // without this method
	return json.Marshal(struct {
		Architectures []string `json:"architectures"`
		ModelType     string   `json:"model_type"`
		HiddenAct     string   `json:"hidden_act"`
		AttentionBias bool     `json:"attention_bias"`
		MLPBias       bool     `json:"mlp_bias"`
		TorchDtype    string   `json:"torch_dtype"`
		plain
	}{[]string{"LlamaForCausalLM"}, "llama", "silu", false, false, "float32", plain(c)})
}

// ParseConfig reads config.json, rejecting what this model cannot be: another
// architecture, another activation, biases.
func ParseConfig(data []byte) (Config, error) {
	var j struct {
		ModelType     string `json:"model_type"`
		HiddenAct     string `json:"hidden_act"`
		AttentionBias bool   `json:"attention_bias"`
		MLPBias       bool   `json:"mlp_bias"`
		RopeScaling   any    `json:"rope_scaling"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return Config{}, fmt.Errorf("model: config.json: %w", err)
	}
	type plain Config
	var c plain
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("model: config.json: %w", err)
	}
	switch {
	case j.ModelType != "" && j.ModelType != "llama":
		return Config{}, fmt.Errorf("model: config.json model_type %q, want llama", j.ModelType)
	case j.HiddenAct != "" && j.HiddenAct != "silu":
		return Config{}, fmt.Errorf("model: config.json hidden_act %q, want silu", j.HiddenAct)
	case j.AttentionBias || j.MLPBias:
		return Config{}, fmt.Errorf("model: config.json attention_bias/mlp_bias set: this model has no biases")
	case j.RopeScaling != nil:
		return Config{}, fmt.Errorf("model: config.json rope_scaling is set: not supported by this model")
	}
	cfg := Config(c)
	if cfg.RMSNormEps == 0 {
		cfg.RMSNormEps = 1e-6 // LlamaConfig's default
	}
	if cfg.RopeTheta == 0 {
		cfg.RopeTheta = 10000 // LlamaConfig's default
	}
	return cfg, cfg.Validate()
}
