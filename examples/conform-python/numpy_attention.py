#!/usr/bin/python3
"""An example conformance adapter in Python: attention in numpy.

    attnlab conform -exec "/usr/bin/python3 examples/conform-python/numpy_attention.py"

Copy it, put your kernel in place of forward and backward, say in
capabilities what it takes, and run the command above. The protocol
(docs/conform-protocol.md) is spoken by adapters/python/conform_io.py, which
needs numpy only: serve() reads each request, calls attention(req) with a
conform_io.Request (numpy arrays and plain values) and writes back the
arrays it returns; an exception becomes an error response (the
implementation refused that input) and the adapter keeps serving.

The kernel follows attnlab's contract (DESIGN §2 and §3), so its card is
attnlab's own: key j is visible to query i iff

    k_valid[j] && (!causal || k_pos[j] <= q_pos[i]) && k_seg[j] == q_seg[i]
               && (window == 0 || q_pos[i] - k_pos[j] < window)

with default positions q_pos[i] = N - M + i (a cache of N - M keys before
the chunk) and k_pos[j] = j; a boolean mask, when sent, is applied as given.
Query head h reads K/V head h // (Hq/Hkv). A padding query (q_valid 0) gets
output 0, lse +inf and no gradient; a valid query that sees no key is an
error naming it. The backward is written by hand from the forward's
softmax: dS = P ⊙ (dP − rowsum(P ⊙ dP)).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "python"))

import numpy as np  # noqa: E402

import conform_io  # noqa: E402


def visible(req):
    """The boolean mask [B, M, N] of the rule above, and q_valid [B, M]."""
    B, M, N = req.B, req.M, req.N
    q_pos = req.q_pos if req.q_pos is not None else np.broadcast_to(N - M + np.arange(M), (B, M))
    k_pos = req.k_pos if req.k_pos is not None else np.broadcast_to(np.arange(N), (B, N))
    q_valid = req.q_valid != 0 if req.q_valid is not None else np.ones((B, M), bool)
    k_valid = req.k_valid != 0 if req.k_valid is not None else np.ones((B, N), bool)
    vis = np.broadcast_to(k_valid[:, None, :], (B, M, N)).copy()
    if req.q_seg is not None:
        vis &= req.q_seg[:, :, None] == req.k_seg[:, None, :]
    dist = q_pos[:, :, None] - k_pos[:, None, :]
    if req.causal:
        vis &= dist >= 0
    if req.window > 0:
        vis &= dist < req.window
    if req.mask is not None:
        vis &= req.mask != 0
    return vis, q_valid


class NumpyAttention:
    def capabilities(self):
        return {
            "name": "numpy attention (examples/conform-python)",
            "version": "numpy " + np.__version__,
            "dtypes": ["float32", "float64"],
            "gradients": True,
            "lse": True,
            "gqa": True,
            "masks": ["causal", "bool", "positions", "validity", "segments", "window"],
            "kv_cache": True,
            "scale": True,
        }

    def attention(self, req):
        if req.Hq % req.Hkv:
            raise ValueError("Hq = %d is not a multiple of Hkv = %d" % (req.Hq, req.Hkv))
        vis, q_valid = visible(req)
        empty = q_valid & ~vis.any(axis=-1)
        if empty.any():
            b, i = np.argwhere(empty)[0]
            raise ValueError("batch %d, query row %d sees no key" % (b, i))
        group = req.Hq // req.Hkv
        k = np.repeat(req.k, group, axis=1)  # query head h reads K/V head h // group
        v = np.repeat(req.v, group, axis=1)
        scale = req.scale if req.scale is not None else 1 / np.sqrt(req.D)
        scale = req.q.dtype.type(scale)

        # forward: S = Q Kᵀ · scale, masked to −∞; P = softmax(S); O = P V.
        # A padding row sees every key (finite scores) and is zeroed after.
        pad = ~q_valid[:, None, :, None]  # [B, 1, M, 1]
        allowed = vis[:, None] | pad
        s = np.where(allowed, req.q @ k.swapaxes(-1, -2) * scale, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        total = p.sum(axis=-1, keepdims=True)
        p = np.where(pad, 0, p / total).astype(req.q.dtype)
        out = {"o": p @ v}
        if req.want_lse:
            out["lse"] = np.where(pad, np.inf, m + np.log(total))[..., 0]

        if req.do is not None:
            # backward: dV = Pᵀ dO, dP = dO Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP)),
            # dQ = dS K · scale, dK = dSᵀ Q · scale; the K/V gradients of a
            # group summed into its K/V head
            do = req.do
            dp = do @ v.swapaxes(-1, -2)
            ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
            out["dq"] = ds @ k * scale
            dk = ds.swapaxes(-1, -2) @ req.q * scale
            dv = p.swapaxes(-1, -2) @ do
            B, Hkv, N = req.B, req.Hkv, req.N
            out["dk"] = dk.reshape(B, Hkv, group, N, req.D).sum(axis=2)
            out["dv"] = dv.reshape(B, Hkv, group, N, req.Dv).sum(axis=2)
        return out


if __name__ == "__main__":
    conform_io.serve(NumpyAttention())
