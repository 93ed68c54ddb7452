// Package ggml is attnlab's module for ggml, llama.cpp's tensor library,
// reached through the C sources vendored in the Go module
// github.com/ollama/ollama and compiled with cgo (so the main module stays
// pure Go). Its programs:
//
//   - cmd/ggml-conform: the conform adapter (docs/conform-protocol.md) for
//     ggml_flash_attn_ext and for the mul_mat → soft_max_ext → mul_mat graph
//     llama.cpp runs with flash attention off;
//   - cmd/ggml-peer: the bench peer of attnlab bench (attention forward,
//     decode and sgemm timed in ggml);
//   - cmd/ggml-lm: attnlab's language model decoded greedily by ggml graphs
//     built from its safetensors, the same text and token ids as attnlab
//     generate -temp 0 -repeat-penalty 1, with prefill and decode timed, and
//     with -compare R interleaved rounds against attnlab's own model;
//   - cmd/ggml-masked-row: the reproduction of docs/findings/ggml-masked-row.md.
//
// Build them with the flags of llama.cpp's own CPU build (internal/build):
//
//	cd adapters/ggml && go run ./cmd/build
//
// which puts them where attnlab looks (adapters.GGMLDir). The tests of this
// folder build them into a temporary folder, and skip with the reason when
// there is no C compiler or no way to download ollama's module.
package ggml
