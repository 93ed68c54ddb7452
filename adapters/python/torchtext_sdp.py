#!/usr/bin/python3
"""attnlab conform adapter: torchtext 0.14's ScaledDotProduct.

    attnlab conform -exec torchtext-sdp

torchtext.nn.ScaledDotProduct(dropout=0.0, batch_first=True), the attention
core of torchtext's MultiheadAttentionContainer, called directly: it takes
projected q, k, v with the batch and the heads folded into one axis,
[B·H, L, D] with batch_first, scales q by head_dim ** -0.5, fills the masked
scores with -1e8 (masked_fill_), and applies softmax and the weighted sum of
values.

What it takes, declared in the hello:

- "bool": the request's mask [B, M, N] (1 = may attend) becomes attn_mask
  [B·H, M, N] of dtype bool. ScaledDotProduct's convention is the opposite
  of attnlab's and of PyTorch 1.13's SDPA: True = NOT allowed to attend
  ("positions with True are not allowed to attend", its docstring), so the
  adapter passes ~mask.
- kv_cache: M != N is accepted (any target and source length).
- gradients by autograd, float32 and float64.
- no causal flag (the module has none), no validity, no lse (it returns the
  attention weights, not their log-sum-exp), no explicit scale (always
  head_dim ** -0.5), no GQA (K and V must have the same shape, with as many
  heads as Q).

The module wants q, k and v of one feature size. When Dv != D, V is cut into
column chunks of D (the last one zero-padded) and the module is run once per
chunk; the attention weights are the same for every chunk, so the result is
exact, and autograd adds the gradients of the runs (as torch_mha.py does).

Debian 12's python3-torchtext (0.14.1-2) ships its C++ extension as empty
stubs: `import torchtext` fails ("dynamic module does not define module
export function (PyInit__torchtext)"). ScaledDotProduct's module,
torchtext/nn/modules/multiheadattention.py, is pure Python and imports only
torch, so when the package does not import, the adapter loads that file of
the installed package on its own and says so on standard error.
"""

import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import conform_io  # noqa: E402

torch.set_num_threads(1)


def load_torchtext():
    """ScaledDotProduct and torchtext's version, from the installed package."""
    spec = importlib.util.find_spec("torchtext")  # a top-level name: not imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torchtext is not installed for %s: install Debian's python3-torchtext" % sys.executable)
    root = spec.submodule_search_locations[0]
    version = "(unknown version)"
    try:
        with open(os.path.join(root, "version.py")) as f:
            for line in f:
                if line.startswith("__version__"):
                    version = line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    try:
        from torchtext.nn import ScaledDotProduct

        return ScaledDotProduct, version, "torchtext.nn"
    except ImportError as e:
        conform_io.log("torchtext_sdp: import torchtext failed (%s); loading %s on its own" % (conform_io.one_line(e), "nn/modules/multiheadattention.py"))
    path = os.path.join(root, "nn", "modules", "multiheadattention.py")
    mspec = importlib.util.spec_from_file_location("torchtext_multiheadattention", path)
    module = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(module)
    return module.ScaledDotProduct, version, path


class SDP:
    def __init__(self):
        cls, self.version, self.source = load_torchtext()
        self.sdp = cls(dropout=0.0, batch_first=True)

    def capabilities(self):
        return {
            "name": "torchtext.nn.ScaledDotProduct (batch_first, attn_mask True = blocked)",
            "version": "torchtext %s, torch %s" % (self.version, torch.__version__),
            "dtypes": ["float32", "float64"],
            "gradients": True,
            "lse": False,
            "gqa": False,
            "masks": ["bool"],
            "kv_cache": True,
            "scale": False,
        }

    def attention(self, req):
        for name in ("q_pos", "k_pos", "q_valid", "k_valid", "q_seg", "k_seg"):
            if getattr(req, name) is not None:
                raise ValueError("%s: ScaledDotProduct takes a boolean mask only" % name)
        if req.causal:
            raise ValueError("causal: ScaledDotProduct has no causal flag")
        if req.window:
            raise ValueError("window: ScaledDotProduct has no sliding window")
        if req.scale is not None:
            raise ValueError("scale: ScaledDotProduct always scales by head_dim ** -0.5")
        if req.Hkv != req.Hq:
            raise ValueError("ScaledDotProduct needs K and V of Q's shape (Hq = %d, Hkv = %d)" % (req.Hq, req.Hkv))
        B, H, M, N, D, Dv = req.B, req.Hq, req.M, req.N, req.D, req.Dv
        grads = req.do is not None
        q = torch.from_numpy(req.q).requires_grad_(grads)
        k = torch.from_numpy(req.k).requires_grad_(grads)
        v = torch.from_numpy(req.v).requires_grad_(grads)
        attn_mask = None  # bool [B·H, M, N], True = not allowed
        if req.mask is not None:
            allowed = torch.from_numpy(req.mask != 0)
            attn_mask = (~allowed).view(B, 1, M, N).expand(B, H, M, N).reshape(B * H, M, N)
        chunks = []
        for c in range(0, Dv, D):
            vc = v[..., c : c + D]
            if vc.shape[-1] < D:
                vc = torch.nn.functional.pad(vc, (0, D - vc.shape[-1]))
            oc, _ = self.sdp(q.reshape(B * H, M, D), k.reshape(B * H, N, D), vc.reshape(B * H, N, D), attn_mask=attn_mask)
            chunks.append(oc.view(B, H, M, D))
        o = torch.cat(chunks, dim=-1)[..., :Dv]
        out = {"o": o}
        if grads:
            o.backward(torch.from_numpy(req.do))
            out["dq"], out["dk"], out["dv"] = q.grad, k.grad, v.grad
        return out


if __name__ == "__main__":
    conform_io.serve(SDP())
