package model

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/internal/readlimit"
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
	// Kind is what attnlab trained the weights as (KindLM, KindDualEncoder,
	// KindReranker); Hugging Face keeps the field as an attribute it does not
	// use. Empty in checkpoints written elsewhere.
	Kind string `json:"attnlab_kind,omitempty"`

	// The attention variants of newer models, by the names their Hugging
	// Face configs use where they have one (absent: none):
	// sliding_window limits every layer's attention to the last W keys,
	// the current one included (Mistral's and Gemma 2's key; Gemma 2
	// alternates it by layer, here it applies to all);
	// attn_logit_softcapping c caps every score as c·tanh(s/c) and
	// final_logit_softcapping the LM head's logits likewise (Gemma 2);
	// attention_sinks gives every layer a learned sink logit per query head,
	// the tensor self_attn.sinks of the open-weight GPT checkpoints.
	SlidingWindow         int     `json:"sliding_window,omitempty"`
	AttnLogitSoftcapping  float64 `json:"attn_logit_softcapping,omitempty"`
	FinalLogitSoftcapping float64 `json:"final_logit_softcapping,omitempty"`
	AttentionSinks        bool    `json:"attention_sinks,omitempty"`
}

// The kinds of checkpoint attnlab writes. The same weights can be loaded
// as any of them, but mean something only as what they were trained to be:
// commands refuse another kind.
const (
	KindLM          = "language-model"
	KindDualEncoder = "dual-encoder"
	KindReranker    = "reranker"
)

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

// The largest sizes a config may give, far above any model this package
// runs: a config.json beyond them is refused before anything is
// allocated. Within them, New still refuses a model whose weights do not
// fit in memory.
const (
	// MaxDim bounds hidden_size, intermediate_size, head_dim, vocab_size,
	// num_attention_heads and num_key_value_heads.
	MaxDim = 1 << 20
	// MaxLayers bounds num_hidden_layers.
	MaxLayers = 1 << 12
	// MaxPositions bounds max_position_embeddings. No table is allocated
	// by it, but windows default to it (attnlab lm-eval -window 0).
	MaxPositions = 1 << 24
)

// Validate reports the first inconsistency, naming the config.json field;
// every size must be within the limits above.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{
		{"hidden_size", c.HiddenSize, MaxDim}, {"intermediate_size", c.IntermediateSize, MaxDim},
		{"num_hidden_layers", c.NumHiddenLayers, MaxLayers}, {"num_attention_heads", c.NumAttentionHeads, MaxDim},
		{"num_key_value_heads", c.NumKeyValueHeads, MaxDim}, {"vocab_size", c.VocabSize, MaxDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("model: config %s = %d, want in [1, %d]", f.name, f.v, f.max)
		}
	}
	switch {
	case c.HeadDim < 0 || c.HeadDim > MaxDim:
		return fmt.Errorf("model: config head_dim = %d, want in [0, %d] (0: hidden_size / num_attention_heads)", c.HeadDim, MaxDim)
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
	case c.SlidingWindow < 0 || c.SlidingWindow > MaxPositions:
		return fmt.Errorf("model: config sliding_window = %d, want in [0, %d] (0: none)", c.SlidingWindow, MaxPositions)
	case !(c.AttnLogitSoftcapping >= 0) || math.IsInf(c.AttnLogitSoftcapping, 0):
		return fmt.Errorf("model: config attn_logit_softcapping = %v, want a finite value >= 0 (0: none)", c.AttnLogitSoftcapping)
	case !(c.FinalLogitSoftcapping >= 0) || math.IsInf(c.FinalLogitSoftcapping, 0):
		return fmt.Errorf("model: config final_logit_softcapping = %v, want a finite value >= 0 (0: none)", c.FinalLogitSoftcapping)
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

// NumParams returns the number of parameters of a model of c (math.MaxInt
// when that overflows): the elements of every tensor of Model.Tensors. c
// must be valid.
func (c Config) NumParams() int {
	D, F, V, L := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumHiddenLayers
	q, kv := memlimit.Mul(c.NumAttentionHeads, c.Head()), memlimit.Mul(c.NumKeyValueHeads, c.Head())
	heads := 1
	if !c.TieWordEmbeddings {
		heads = 2
	}
	block := memlimit.Add(2*D, memlimit.Mul(2, q, D), memlimit.Mul(2, kv, D), memlimit.Mul(3, D, F))
	if c.AttentionSinks {
		block = memlimit.Add(block, c.NumAttentionHeads)
	}
	return memlimit.Add(memlimit.Mul(heads, V, D), D, memlimit.Mul(L, block))
}

// ActsSize returns the number of elements of the activations of B
// sequences of T tokens (math.MaxInt when that overflows): what NewActs
// (or, checkpointed, NewCheckpointedActs) allocates and the buffers
// Backward adds. c must be valid, B and T >= 0.
func (c Config) ActsSize(B, T int, checkpointed bool) int {
	D, F, V, L := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumHiddenLayers
	q, kv := memlimit.Mul(c.NumAttentionHeads, c.Head()), memlimit.Mul(c.NumKeyValueHeads, c.Head())
	blocks := L
	if checkpointed {
		blocks = 1
	}
	// per token: the residual stream of every block and the final norm,
	// the logits, their softmax and gradient; a block's norms, SwiGLU and
	// attention caches and gradients
	block := memlimit.Add(memlimit.Mul(8, D), 2, memlimit.Mul(3, F), memlimit.Mul(8, q), memlimit.Mul(6, kv), c.NumAttentionHeads)
	token := memlimit.Add(memlimit.Mul(L+4, D), 1, memlimit.Mul(3, V), memlimit.Mul(blocks, block))
	return memlimit.Mul(B, T, token)
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

// MaxConfigBytes bounds the size of config.json; Hugging Face's are a few
// kilobytes.
const MaxConfigBytes = 1 << 20

// readConfigFile returns the bytes of dir's config.json, refusing one
// larger than MaxConfigBytes (or a stream that does not end).
func readConfigFile(dir string) ([]byte, error) {
	return readlimit.File(filepath.Join(dir, ConfigFile), MaxConfigBytes)
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
		return Config{}, fmt.Errorf("model: config.json: %w", jsonerr.Describe(err))
	}
	// LlamaConfig's defaults for the fields a config may leave out:
	// num_key_value_heads = num_attention_heads (no GQA),
	// max_position_embeddings = 2048, rms_norm_eps = 1e-6, rope_theta =
	// 10000. A field that is present is taken as written, 0 included.
	type plain Config
	c := plain{MaxPositionEmbeddings: 2048, RMSNormEps: 1e-6, RopeTheta: 10000, NumKeyValueHeads: -1}
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("model: config.json: %w", jsonerr.Describe(err))
	}
	if c.NumKeyValueHeads == -1 {
		c.NumKeyValueHeads = c.NumAttentionHeads
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
	return cfg, cfg.Validate()
}
