#!/usr/bin/python3
"""attnlab conform adapter: plain composite attention in PyTorch.

    attnlab conform -exec "/usr/bin/python3 adapters/python/torch_composite.py"
    attnlab conform -exec "/usr/bin/python3 adapters/python/torch_composite.py --plain"

Attention written the way Hugging Face's eager Llama attention writes it:
K and V repeated per group with repeat_interleave (contiguous groups, as
repeat_kv: query head h reads KV head h // (Hq/Hkv)), S = Q Kᵀ · scale,
masked_fill(-inf) where a key is not visible, softmax, P V; autograd for dq,
dk, dv; lse = logsumexp of the masked scores. It computes in the dtype of the
request (float32 or float64).

It declares the variants of attnlab's docs/design.md §3.1 and applies them
in that order, as the eager attention of Gemma 2 and of the open-weight GPT
models writes them: softcap c (metadata softcap) S = c · tanh(S / c); ALiBi
slopes m (tensor alibi_slopes [Hq]) S = S - m_h · |q_pos - k_pos|, by the
logical positions of the mask rule below; then masked_fill(-inf); then the
sinks σ (tensor sinks [Hq]) as one more column of the scores, softmax over
the keys and the sink, the sink's column dropped before P V (it has no value
row). dsinks is autograd's gradient of σ; lse is the logsumexp over the keys
and the sink. With sinks a valid row that sees no key is defined (O = 0, the
sink takes all the weight), not an error.

The mask is attnlab's rule (DESIGN §2): key j is visible to query i iff

    k_valid[j] && (!causal || k_pos[j] <= q_pos[i]) && k_seg[j] == q_seg[i]
               && (window == 0 || q_pos[i] - k_pos[j] < window)

with default positions q_pos[i] = N - M + i, k_pos[j] = j (a cache of N - M
keys before the chunk). With a "bool" mask tensor that mask is applied as
given (1 = may attend), together with whatever positions, validity and
segments come with it, and no causal masking of its own.

Padding query rows (q_valid = 0) follow attnlab: output 0, no gradient, and
lse = +inf (attnlab's value for a row with no probability distribution).
They are computed with every key unmasked and then replaced by zero with
torch.where, so that no NaN reaches the backward.

A VALID query row that sees no key is an error naming the batch item and
the row, as attnlab's contract has it (DESIGN §2): the composite as a
careful user writes it. With --plain it is not special-cased: masked_fill
leaves the row all -inf, softmax gives NaN, so o is NaN there, lse is -inf
(the logsumexp of nothing), and the gradients that row touches are NaN —
what the textbook composite does, and what conform finds and reports.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import conform_io  # noqa: E402

torch.set_num_threads(1)


def visibility(req):
    """The bool mask [B, M, N] of attnlab's rule, q_valid [B, M] and the
    distance q_pos - k_pos [B, M, N]."""
    B, M, N = req.B, req.M, req.N
    t = lambda a: None if a is None else torch.from_numpy(a)  # noqa: E731
    q_pos = t(req.q_pos) if req.q_pos is not None else (N - M + torch.arange(M)).expand(B, M)
    k_pos = t(req.k_pos) if req.k_pos is not None else torch.arange(N).expand(B, N)
    q_valid = t(req.q_valid) != 0 if req.q_valid is not None else torch.ones(B, M, dtype=torch.bool)
    k_valid = t(req.k_valid) != 0 if req.k_valid is not None else torch.ones(B, N, dtype=torch.bool)
    if (req.q_seg is None) != (req.k_seg is None):
        raise ValueError("q_seg and k_seg must be given together")
    vis = k_valid.view(B, 1, N).expand(B, M, N)
    if req.q_seg is not None:
        vis = vis & (t(req.q_seg).view(B, M, 1) == t(req.k_seg).view(B, 1, N))
    dist = q_pos.reshape(B, M, 1) - k_pos.reshape(B, 1, N)
    if req.causal:
        vis = vis & (dist >= 0)
    if req.window > 0:
        vis = vis & (dist < req.window)
    if req.mask is not None:
        vis = vis & (t(req.mask) != 0)
    return vis, q_valid, dist


class Composite:
    def __init__(self, plain):
        self.plain = plain

    def capabilities(self):
        name = "PyTorch composite attention (repeat_interleave, matmul, masked_fill -inf, softmax, matmul; autograd)"
        if self.plain:
            name += ", empty rows not checked"
        return {
            "name": name,
            "version": "torch " + torch.__version__,
            "dtypes": ["float32", "float64"],
            "gradients": True,
            "lse": True,
            "gqa": True,
            "masks": ["causal", "bool", "positions", "validity", "segments", "window"],
            "kv_cache": True,
            "scale": True,
            "sinks": True,
            "softcap": True,
            "alibi": True,
        }

    def attention(self, req):
        if req.Hq % req.Hkv != 0:
            raise ValueError("Hq = %d is not a multiple of Hkv = %d" % (req.Hq, req.Hkv))
        B, Hq, M, N = req.B, req.Hq, req.M, req.N
        q = torch.from_numpy(req.q).requires_grad_(True)
        k = torch.from_numpy(req.k).requires_grad_(True)
        v = torch.from_numpy(req.v).requires_grad_(True)
        scale = req.scale if req.scale is not None else 1.0 / math.sqrt(req.D)

        vis, q_valid, dist = visibility(req)
        empty = q_valid & ~vis.any(dim=-1)
        sinks = None if req.sinks is None else torch.from_numpy(req.sinks).requires_grad_(True)
        if not self.plain and sinks is None and empty.any():
            b, i = (int(x) for x in empty.nonzero()[0])
            raise ValueError("batch %d, query row %d sees no key" % (b, i))
        # A padding row attends to every key (finite scores), then is zeroed.
        allowed = (vis | ~q_valid.view(B, M, 1)).view(B, 1, M, N)
        pad = ~q_valid.view(B, 1, M, 1)

        group = Hq // req.Hkv
        k_rep = k.repeat_interleave(group, dim=1)  # query head h reads KV head h // group
        v_rep = v.repeat_interleave(group, dim=1)
        s = torch.matmul(q, k_rep.transpose(-1, -2)) * scale
        if req.softcap is not None and req.softcap > 0:
            s = req.softcap * torch.tanh(s / req.softcap)
        if req.alibi_slopes is not None:
            slopes = torch.from_numpy(req.alibi_slopes).view(1, Hq, 1, 1)
            s = s - slopes * dist.abs().to(s.dtype).view(B, 1, M, N)
        s = s.masked_fill(~allowed, float("-inf"))
        if sinks is not None:
            # the sink as one more column, then dropped: it has no value row
            s = torch.cat([s, sinks.view(1, Hq, 1, 1).expand(B, Hq, M, 1)], dim=-1)
        p = torch.softmax(s, dim=-1)
        if sinks is not None:
            p = p[..., :N]
        o = torch.matmul(p, v_rep)
        o = torch.where(pad, torch.zeros((), dtype=o.dtype), o)

        out = {"o": o}
        if req.want_lse:
            with torch.no_grad():
                lse = torch.logsumexp(s, dim=-1)
                out["lse"] = torch.where(pad.squeeze(-1), torch.tensor(float("inf"), dtype=s.dtype), lse)
        if req.do is not None:
            o.backward(torch.from_numpy(req.do))
            out["dq"], out["dk"], out["dv"] = q.grad, k.grad, v.grad
            if sinks is not None:
                out["dsinks"] = sinks.grad
        return out


if __name__ == "__main__":
    conform_io.serve(Composite(plain="--plain" in sys.argv[1:]))
