#!/usr/bin/python3
"""A query row whose keys are all masked: PyTorch 1.13's composite attention
(masked_fill with -inf, softmax), its fused scaled_dot_product_attention and
nn.MultiheadAttention all return NaN for the row, and their backward gives
dq = 0 for it: a gradient that is not the derivative of the forward (the
forward's finite differences are NaN). Run:

    /usr/bin/python3 docs/findings/torch-masked-row.py
"""
import math

import torch
import torch.nn.functional as F

torch.manual_seed(0)
B, H, M, N, D = 1, 1, 2, 3, 4
q = torch.randn(B, H, M, D, dtype=torch.float64, requires_grad=True)
k = torch.randn(B, H, N, D, dtype=torch.float64, requires_grad=True)
v = torch.randn(B, H, N, D, dtype=torch.float64, requires_grad=True)
allowed = torch.tensor([[True, True, True], [False, False, False]])  # row 1 sees no key


def composite(q, k, v):
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v


def sdpa(q, k, v):
    o, _ = F._scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=0.0, need_attn_weights=False, is_causal=False)
    return o


for name, f in [("composite", composite), ("scaled_dot_product_attention", sdpa)]:
    for t in (q, k, v):
        t.grad = None
    o = f(q, k, v)
    o[0, 0, 1].sum().backward()  # a loss on the masked row only
    print("%-28s o[row 1] = %s; dq[row 1] = %s; dk finite: %s; dv finite: %s" % (
        name, o[0, 0, 1].tolist(), q.grad[0, 0, 1].tolist(),
        bool(torch.isfinite(k.grad).all()), bool(torch.isfinite(v.grad).all())))
