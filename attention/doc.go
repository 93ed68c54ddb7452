// Package attention implements scaled dot-product attention with a
// hand-derived backward pass: a chunk of M queries against N keys (a cache
// included), multi-head, multi-query and grouped-query, under masks built from
// logical positions.
//
// The reference implementation materialises the scores S and probabilities P
// and is written as the equations of the derivation, one function each
// (Scores, Softmax, Mix, GradV, GradP, GradS, GradQ, GradK), so that it can be
// read beside the derivation and checked one equation at a time.
//
// # Shapes and layout
//
// Row-major, in PyTorch's scaled_dot_product_attention order:
//
//	q  (B, Hq,  M, D)    q[((b*Hq+h)*M+i)*D+x]
//	k  (B, Hkv, N, D)    k[((b*Hkv+g)*N+j)*D+x]
//	v  (B, Hkv, N, Dv)
//	o  (B, Hq,  M, Dv)   and dO likewise
//	p  (B, Hq,  M, N)    lse (B, Hq, M)
//
// Per-token mask data (positions, validity, segments) is indexed [b*M+i] for
// queries and [b*N+j] for keys.
//
// # Conventions
//
// Forward and backward are
//
//	S = Q Kᵀ · scale    P = softmax_row(S masked)    O = P V
//	dV = Pᵀ dO    dP = dO Vᵀ    dS = P ⊙ (dP − rowsum(P ⊙ dP))
//	dQ = dS K · scale    dK = dSᵀ Q · scale
//
// with scale = 1/√D unless Config.Scale is set. rowsum(P ⊙ dP) equals
// rowsum(dO ⊙ O), which a fused backward uses instead.
//
// Grouped-query attention: query head h reads key/value head h / (Hq/Hkv),
// contiguous groups as in Hugging Face's repeat_kv. K and V are never copied
// per query head; the gradient of a shared head is accumulated over its group.
//
// Masks are decided by positions, not array indices (Config.Visible is the
// rule). The default positions describe a cache of N−M past tokens followed by
// the M new ones: a 2-token chunk after 3 cached tokens has query positions 3
// and 4 and sees keys 0..3 and 0..4. Under left padding, positions count real
// tokens only (PositionsFromValidity). The three causal conventions for
// M ≠ N (Positions, BottomRight, TopLeft) are named side by side. Masking is a
// select before the softmax: hidden keys are skipped, never biased by −1e4.
//
// A padding query (valid = false) yields a zero output row, lse = +Inf and no
// gradient: that is not an error. A valid query that sees no key is an error
// (*EmptyRowError naming batch item and row), never NaN and never a silent
// zero row.
//
// Backward functions add into their gradient buffers (dq, dk, dv); callers
// zero them. Forward overwrites o, lse and p.
//
// # References
//
// [1] Vaswani et al., Attention Is All You Need, 2017.
// [2] Dao, FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning, 2023.
// [3] Ainslie et al., GQA: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints, 2023.
package attention
