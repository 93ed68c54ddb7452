// Package model implements a Llama-style decoder on the verified pieces of
// packages nn and attention: pre-norm blocks of RMSNorm, attention with RoPE
// and grouped-query heads, and a SwiGLU MLP, each with a hand-derived
// backward.
//
// # Shapes and layout
//
// Activations are row-major (B·T, Dim): row b*T+t is token t of sequence b.
// Weights are in Hugging Face layout, (out features, in features), under the
// names of LlamaForCausalLM.
//
// # Conventions
//
// Backward functions add into their gradient buffers; callers zero them.
// The residual stream passes gradients through unchanged, so a block's dx is
// dy plus what its two sublayers add.
package model
