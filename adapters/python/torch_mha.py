#!/usr/bin/python3
"""attnlab conform adapter: torch.nn.MultiheadAttention.

    attnlab conform -exec "/usr/bin/python3 adapters/python/torch_mha.py"

attnlab's requests carry q, k, v already projected, one slice per head, so
the module is built to add nothing: MultiheadAttention(embed_dim = Hq·D,
num_heads = Hq, bias=False, batch_first=True) with its input projections
(in_proj_weight, one [E, E] block each for q, k and v) and its output
projection set to the identity. [B, H, L, D] is reshaped to [B, L, H·D] (head
h owns columns h·D..h·D+D-1, as the module splits them) and back. With q, k
and v different tensors, the module never takes its fused inference path
(that needs self-attention): this is multi_head_attention_forward, the
reference path of torch 1.13, in training mode with dropout 0.

The module's value head size is its query head size D. When Dv != D, V is
cut into column chunks of D (the last one zero-padded) and the module is run
once per chunk; the attention weights are the same for every chunk, so the
result is exact, and autograd adds the gradients of the runs.

What it takes, declared in the hello:

- "bool": the request's mask [B, M, N] (1 = may attend) becomes attn_mask
  [B·Hq, M, N] of dtype bool, where MultiheadAttention's convention is the
  opposite one: True = NOT allowed to attend. The adapter passes `~mask`.
- "causal": MultiheadAttention of torch 1.13 has no causal flag (is_causal
  came in 2.0), so the adapter builds the causal attn_mask itself, the way a
  user with a KV cache does: query i of the chunk sits at position past + i
  (past = N - M, from the request), key j at position j, and j > past + i is
  not allowed. That alignment is this adapter's, not the module's.
- not "validity": the protocol's validity covers padding queries too, and
  the module has no query mask (a padding query row gets whatever the module
  computes for it). Key padding is part of the boolean mask attnlab sends;
  a k_valid that does come is passed as key_padding_mask (True = padding).
- gradients by autograd, float32 and float64, kv_cache (M != N).
- no lse (the module does not return it), no explicit scale (the module
  always uses 1/sqrt(head_dim) = 1/sqrt(D)), no GQA (Hkv must equal Hq).

A fully masked row is not special-cased: the module adds -inf for every key
and its softmax gives NaN.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import conform_io  # noqa: E402

torch.set_num_threads(1)


class MHA:
    def __init__(self):
        self.modules = {}
        self.warned = False

    def capabilities(self):
        return {
            "name": "torch.nn.MultiheadAttention (identity projections, key_padding_mask, attn_mask)",
            "version": "torch " + torch.__version__,
            "dtypes": ["float32", "float64"],
            "gradients": True,
            "lse": False,
            "gqa": False,
            "masks": ["causal", "bool"],
            "kv_cache": True,
            "scale": False,
        }

    def module(self, H, D, dtype):
        key = (H, D, dtype)
        if key not in self.modules:
            E = H * D
            m = torch.nn.MultiheadAttention(E, H, dropout=0.0, bias=False, batch_first=True, dtype=dtype)
            with torch.no_grad():
                eye = torch.eye(E, dtype=dtype)
                m.in_proj_weight.copy_(torch.cat([eye, eye, eye]))
                m.out_proj.weight.copy_(eye)
            for p in m.parameters():
                p.requires_grad_(False)
            self.modules[key] = m
        return self.modules[key]

    def attention(self, req):
        for name in ("q_pos", "k_pos", "q_seg", "k_seg"):
            if getattr(req, name) is not None:
                raise ValueError("%s: MultiheadAttention has no positions or segments" % name)
        if req.window:
            raise ValueError("window: MultiheadAttention has no sliding window")
        if req.scale is not None:
            raise ValueError("scale: MultiheadAttention always scales by 1/sqrt(head_dim)")
        if req.Hkv != req.Hq:
            raise ValueError("MultiheadAttention needs as many K/V heads as query heads (Hq = %d, Hkv = %d)" % (req.Hq, req.Hkv))
        if req.q_valid is not None and not self.warned:
            conform_io.log("torch_mha: q_valid is not applied: MultiheadAttention has no query padding mask")
            self.warned = True
        B, H, M, N, D, Dv = req.B, req.Hq, req.M, req.N, req.D, req.Dv
        dtype = torch.float32 if req.dtype == "float32" else torch.float64
        grads = req.do is not None
        q = torch.from_numpy(req.q).requires_grad_(grads)
        k = torch.from_numpy(req.k).requires_grad_(grads)
        v = torch.from_numpy(req.v).requires_grad_(grads)

        attn_mask = None  # bool, True = not allowed
        if req.mask is not None:
            if req.causal:
                raise ValueError("a mask together with causal: the protocol sends one or the other")
            allowed = torch.from_numpy(req.mask != 0)
            attn_mask = (~allowed).view(B, 1, M, N).expand(B, H, M, N).reshape(B * H, M, N)
        elif req.causal:
            i = torch.arange(M).view(M, 1)
            j = torch.arange(N).view(1, N)
            attn_mask = j > req.past + i  # [M, N], the same for every batch item and head
        key_padding_mask = None
        if req.k_valid is not None:
            key_padding_mask = torch.from_numpy(req.k_valid == 0)  # [B, N], True = padding

        def packed(x):  # [B, H, L, D] -> [B, L, H*D]
            return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)

        m = self.module(H, D, dtype)
        qp, kp = packed(q), packed(k)
        chunks = []
        for c in range(0, Dv, D):
            vc = v[..., c : c + D]
            if vc.shape[-1] < D:
                vc = torch.nn.functional.pad(vc, (0, D - vc.shape[-1]))
            oc, _ = m(qp, kp, packed(vc), key_padding_mask=key_padding_mask, need_weights=False, attn_mask=attn_mask)
            chunks.append(oc.view(B, M, H, D).transpose(1, 2))  # [B, H, M, D]
        o = torch.cat(chunks, dim=-1)[..., :Dv]
        out = {"o": o}
        if grads:
            o.backward(torch.from_numpy(req.do))
            out["dq"], out["dk"], out["dv"] = q.grad, k.grad, v.grad
        return out


if __name__ == "__main__":
    conform_io.serve(MHA())
