#!/usr/bin/python3
"""attnlab conform adapter: PyTorch 1.13's fused scaled dot product attention.

    attnlab conform -exec "/usr/bin/python3 adapters/python/torch_sdpa.py"

Calls torch.nn.functional._scaled_dot_product_attention(q, k, v, attn_mask,
dropout_p, need_attn_weights, is_causal), the function of PyTorch 1.13 that
became torch.nn.functional.scaled_dot_product_attention in 2.0. In 1.13 it is
a builtin taking exactly those seven arguments, positionally, and it returns
a tuple (output, attention weights); the weights are unspecified when
need_attn_weights is False and are dropped here.

What it takes, declared in the hello:

- "causal": the request's causal flag is passed as is_causal=True with no
  mask. Where the diagonal sits when M != N is the function's own
  convention; this adapter does not correct it (N - M in the request's
  `past` is not used): finding it is attnlab conform's job.
- "bool": the request's mask [B, M, N] (1 = may attend) is passed as a
  boolean attn_mask of shape [B, 1, M, N], broadcast over heads. In 1.13 a
  boolean attn_mask means True = the element takes part in attention (the
  function's docstring says so, and it was checked against masked_fill:
  True keeps), which is attnlab's convention, so the mask is passed
  unchanged. is_causal is then False.
- gradients by autograd, float32 and float64.
- no lse (the function does not return it), no explicit scale (1.13 has no
  scale argument: it always uses 1/sqrt(D)), no GQA (K and V must have as
  many heads as Q; with fewer, the function raises and the adapter answers
  with that error).
- kv_cache: M != N is accepted (the shapes broadcast); see "causal".

Positions, validity, segments and windows cannot be expressed: a request that
carries them is refused with an error response.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import conform_io  # noqa: E402

torch.set_num_threads(1)


class SDPA:
    def capabilities(self):
        return {
            "name": "torch.nn.functional._scaled_dot_product_attention",
            "version": "torch " + torch.__version__,
            "dtypes": ["float32", "float64"],
            "gradients": True,
            "lse": False,
            "gqa": False,
            "masks": ["causal", "bool"],
            "kv_cache": True,
            "scale": False,
        }

    def attention(self, req):
        for name in ("q_pos", "k_pos", "q_valid", "k_valid", "q_seg", "k_seg"):
            if getattr(req, name) is not None:
                raise ValueError("%s: _scaled_dot_product_attention takes a causal flag or a boolean mask only" % name)
        if req.window:
            raise ValueError("window: _scaled_dot_product_attention has no sliding window")
        if req.scale is not None:
            raise ValueError("scale: _scaled_dot_product_attention of torch 1.13 has no scale argument")
        q = torch.from_numpy(req.q).requires_grad_(True)
        k = torch.from_numpy(req.k).requires_grad_(True)
        v = torch.from_numpy(req.v).requires_grad_(True)
        mask = None
        if req.mask is not None:
            if req.causal:
                raise ValueError("a mask together with causal: the protocol sends one or the other")
            mask = torch.from_numpy(req.mask != 0).view(req.B, 1, req.M, req.N)  # True = may attend
        o, _ = F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, req.causal)
        out = {"o": o}
        if req.do is not None:
            o.backward(torch.from_numpy(req.do))
            out["dq"], out["dk"], out["dv"] = q.grad, k.grad, v.grad
        return out


if __name__ == "__main__":
    conform_io.serve(SDPA())
