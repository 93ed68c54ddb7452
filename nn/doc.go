// Package nn implements the ops other than attention, each as a Forward and
// Backward pair with a hand-derived gradient:
//
//   - the layers of a Llama-style decoder: Linear, Embedding, RMSNorm,
//     SiLUMul and the SwiGLU MLP built from them, RoPE, and the
//     CrossEntropy of its language-model head;
//   - the heads of the code retriever: MeanPool and L2Norm (a sequence to a
//     unit vector), the InfoNCE loss of a dual encoder and Head, their
//     composition that retrieve/dense trains; PairPool and the Listwise
//     score and loss of a cross-encoder reranker (retrieve/rerank).
//
// Each op is a small value type that holds hyper-parameters only (sizes, ε,
// the RoPE base), never buffers. Its methods take row-major slices plus
// explicit sizes, destination first:
//
//	op.Forward(out, caches…, inputs…, params…, sizes…)
//	op.Backward(dInputs…, dParams…, dOut, inputs…, params…, caches…, sizes…)
//
// The element type is any Float (float32 or float64): gradients are checked by
// finite differences in float64, and the fast paths run in float32.
//
// # Shapes and layout
//
// Sizes are upper case and indices the matching lower case. n counts rows,
// usually the B·T tokens of a batch flattened; D is the model width, F the
// MLP hidden width, V the vocabulary size.
//
//	Linear        x (n, In), w (Out, In), b (Out), y (n, Out)    w[o*In+k]
//	Embedding     table (V, D), tokens (n), out (n, D)           table[tok*D+d]
//	RMSNorm       x, y (n, D), w (D), rstd (n)                   x[i*D+d]
//	SiLUMul       a, u, h: any length, elementwise
//	SwiGLU        x, y (n, D), wGate, wUp (F, D), wDown (D, F), a, u, h (n, F)
//	RoPE          x, y (B, H, T, D), pos (B, T)                  x[((b*H+h)*T+t)*D+d], pos[b*T+t]
//	CrossEntropy  logits, probs (n, V), targets (n)              logits[i*V+v]
//	MeanPool      x (B, Tn, D), valid (B·Tn), out (B, D)         x[(b*Tn+t)*D+d]
//	L2Norm        x, y (n, D), norm (n)
//	InfoNCE       q (B, D), d (N, D), mask and S (B, N)          S[i*N+j]
//	Head          xq (B, Tq, D), xd (N, Td, D): MeanPool, L2Norm, InfoNCE
//	PairPool      x (B, Tn, D), nq (B), valid (B·Tn), f (B, D)
//	Listwise      p (G, K, D), w (D), valid and s (G, K)         s[g*K+k]
//
// B counts sequences (queries), N documents, Tn, Tq, Td tokens per
// sequence, G query groups of K candidates each (the positive first).
//
// RoPE works on one projection reshaped to the attention layout, with D the
// head dimension and H the number of heads (query or key/value heads).
//
// Weights use the layout of PyTorch and Hugging Face checkpoints, so
// tensors load without a transpose: a projection weight is (Out, In), as
// q_proj.weight, mlp.gate_proj.weight, mlp.up_proj.weight (F, D) and
// mlp.down_proj.weight (D, F); the embedding is embed_tokens.weight (V, D);
// the norm weights are (D).
//
// # Conventions
//
// Forward overwrites its outputs and the caches it saves for the backward
// (rstd for RMSNorm, a, u and h for SwiGLU, probs for CrossEntropy).
// Backward adds into its gradient buffers (+=) and never clears them; callers
// zero them once per step. This makes residual branches, weight tying and
// inputs shared by several projections correct by construction.
//
// Aliasing: a gradient buffer never overlaps an input. An output may be its
// input itself where the op is elementwise once its reductions are done:
// RMSNorm (y may be x), SiLUMul (h may be a or u), RoPE (y may be x) and
// CrossEntropy (probs may be logits). Linear and SwiGLU outputs must not
// overlap their inputs. Partial overlap is never allowed.
//
// RoPE rotates each pair of features (i0, i1) of a head by the angle p·θ_k,
// θ_k = base^(−2k/D), k = 0 … D/2−1, with p the token's position. The two
// pairings are named: Half, (k, k+D/2), as Hugging Face's Llama and its
// checkpoints (the default); and Interleaved, (2k, 2k+1), as Meta's original
// code and GPT-J. They are the same map up to a fixed permutation of the
// features, but weights trained with one do not work with the other unless
// the rows of q_proj and k_proj are permuted. Two context extensions are
// offered:
//
//	LinearScaling  p → p / Factor                          (position interpolation)
//	NTKScaling     base → base · Factor^(D/(D−2))          (NTK-aware base scaling)
//
// Angles are computed in float64 and then converted. The backward of RoPE is
// the rotation by −p·θ_k. The Angles method builds cos/sin tables.
//
// The other ops, with g = dy ⊙ w for RMSNorm:
//
//	RMSNorm   r = sqrt(mean(x²) + ε)   y = w ⊙ x / r
//	          dx = g/r − x·mean(g ⊙ x)/r³   dw = Σ_rows dy ⊙ x / r
//	SwiGLU    y = (silu(x wGateᵀ) ⊙ (x wUpᵀ)) wDownᵀ   silu'(a) = σ(a)(1 + a(1 − σ(a)))
//	Linear    y = x wᵀ + b   dx = dy w   dw = dyᵀ x   db = Σ_rows dy
//
// The retrieval heads, with τ the temperature and the masked and invalid
// entries left out of every denominator (their gradient is exactly zero):
//
//	MeanPool  out[b] = mean of x[b,t] over the valid t
//	L2Norm    y = x / max(‖x‖, Eps)   dx = (dy − y·(y·dy)) / ‖x‖   (dy / Eps where ‖x‖ ≤ Eps)
//	InfoNCE   S = q dᵀ/τ   L = mean_i (logsumexp_j S[i,j] − S[i,i]) (and the column direction with Symmetric)
//	PairPool  f = unit(mean of the query's tokens) ⊙ unit(mean of the code's)
//	Listwise  s[g,k] = w·p[g,k]   L = mean_g (logsumexp_k s[g,k] − s[g,0])
//
// CrossEntropy averages over the rows whose target is not IgnoreIndex
// (DefaultIgnoreIndex = −100, PyTorch's default) and returns loss 0 with
// count 0, not NaN, when every row is ignored.
//
// Misuse (a length that does not match the sizes, a token or target out of
// range, a negative position, an invalid RoPE) panics with a message of the
// form "nn: Op.Method: …" that names the offending values. RoPE.Validate and
// CheckPositions return the same findings as errors, for configurations and
// positions that come from data.
//
// # References
//
//   - [1] Zhang and Sennrich, Root Mean Square Layer Normalization, 2019.
//   - [2] Shazeer, GLU Variants Improve Transformer, 2020.
//   - [3] Su et al., RoFormer: Enhanced Transformer with Rotary Position Embedding, 2021.
//   - [4] Chen et al., Extending Context Window of Large Language Models via Positional Interpolation, 2023.
//   - [5] bloc97, NTK-Aware Scaled RoPE allows LLaMA models to have extended (8k+) context size
//     without any fine-tuning and minimal perplexity degradation, 2023.
//   - [6] Touvron et al., LLaMA: Open and Efficient Foundation Language Models, 2023.
//   - [7] van den Oord et al., Representation Learning with Contrastive Predictive Coding, 2018 (InfoNCE).
//   - [8] Karpukhin et al., Dense Passage Retrieval for Open-Domain Question Answering, 2020.
//   - [9] Nogueira and Cho, Passage Re-ranking with BERT, 2019; Gao et al., Rethink Training of BERT
//     Rerankers in Multi-Stage Retrieval Pipeline, 2021 (localised contrastive estimation).
package nn
