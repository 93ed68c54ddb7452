// Package adapters holds the conformance adapters of attnlab for real
// attention implementations, programs that speak the protocol of
// docs/conform-protocol.md so that attnlab conform can check them:
//
//   - python/: PyTorch adapters (torch_composite.py, torch_sdpa.py,
//     torch_mha.py) on a shared protocol module, conform_io.py;
//   - node/: ONNX Runtime's Attention and com.microsoft GroupQueryAttention
//     ops, run by onnxruntime-node (ort_attention.js).
//
// The package itself has no Go code: its tests start each adapter through
// conform.Start and compare its answers with attnlab's reference, and they
// skip when the adapter's runtime is not installed.
package adapters
