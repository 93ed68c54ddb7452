// Package adapters holds the conformance adapters of attnlab for real
// attention implementations, programs that speak the protocol of
// docs/conform-protocol.md so that attnlab conform can check them:
//
//   - python/: PyTorch adapters (torch_composite.py, torch_sdpa.py,
//     torch_mha.py) on a shared protocol module, conform_io.py;
//   - node/: ONNX Runtime's Attention and com.microsoft GroupQueryAttention
//     ops, run by onnxruntime-node (ort_attention.js).
//   - ggml/: a Go module of its own (cgo) whose programs run ggml's CPU
//     attention (ggml_flash_attn_ext, and mul_mat → soft_max_ext → mul_mat),
//     built by (cd adapters/ggml && go run ./cmd/build) into GGMLDir, where
//     the shipped names ggml-flash-attn and ggml-softmax find them.
//
// The scripts are embedded in the package, so that a binary installed
// anywhere runs them by name: Resolve writes a shipped adapter's scripts to
// a private temporary folder and returns the program to run them with
// (/usr/bin/python3 for PyTorch; node with NODE_PATH at an installed
// onnxruntime-node), List names them (attnlab conform -list), and Start
// takes a name or any command line (attnlab conform -exec).
//
// The tests start each adapter through conform.Start and compare its
// answers with attnlab's reference, and they skip when the adapter's
// runtime is not installed.
package adapters
