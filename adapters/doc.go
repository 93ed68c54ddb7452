// Package adapters holds the conformance adapters of attnlab for real
// attention implementations, programs that speak the protocol of
// docs/conform-protocol.md so that attnlab conform can check them:
//
//   - python/: PyTorch adapters (torch_composite.py, torch_sdpa.py,
//     torch_mha.py) on a shared protocol module, conform_io.py;
//   - node/: ONNX Runtime's Attention and com.microsoft GroupQueryAttention
//     and MultiHeadAttention ops, on onnxruntime-node 1.30.0, 1.27.0 and
//     1.24.3 or onnxruntime-web (ort_attention.js), and TF.js's
//     MultiHeadAttention layer (tfjs_mha.js), on a shared protocol module,
//     conform_io.js;
//   - python/torchtext_sdp.py: torchtext 0.14's ScaledDotProduct;
//   - gomlx/, spago/: GoMLX's MultiHeadAttention layer and MaskedSoftmax,
//     and spaGO's attention core, each a Go module of its own (its
//     dependencies stay out of attnlab's module), built from the checkout
//     by name;
//   - ggml/: a Go module of its own (cgo) whose programs run ggml's CPU
//     attention (ggml_flash_attn_ext, and mul_mat → soft_max_ext → mul_mat,
//     on llama.cpp's or ollama's KV-cache mask), built by
//     (cd adapters/ggml && go run ./cmd/build) into GGMLDir (ggml's C
//     sources take minutes to compile), where the shipped names
//     ggml-flash-attn, ggml-softmax and ggml-ollama-mask find them.
//
// The scripts are embedded in the package, so that a binary installed
// anywhere runs them by name: Resolve writes a shipped adapter's scripts to
// a private temporary folder and returns the program to run them with
// (/usr/bin/python3 for PyTorch; node with NODE_PATH at the install of the
// adapter's npm package). The Go modules are found in the current folder or
// above, a checkout of attnlab, and built there with go build into such a
// folder. List names them all (attnlab conform -list), with what is
// missing for each, and Start takes a name or any command line (attnlab
// conform -exec).
//
// The tests start each adapter through conform.Start and compare its
// answers with attnlab's reference, and they skip when the adapter's
// runtime is not installed.
package adapters
