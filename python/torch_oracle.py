#!/usr/bin/python3
"""PyTorch oracle for attnlab: the same ops as `attnlab ref`, by autograd.

Usage:

    /usr/bin/python3 torch_oracle.py OP IN.safetensors OUT.safetensors [IN2 OUT2 ...]

Each IN file is read exactly like `attnlab ref -op OP -in IN` reads it, the op
runs forward and backward in float64 with torch.autograd, and the outputs and
gradients are written to OUT under the names `attnlab ref` uses. Several IN OUT
pairs may be given, so that one Python start serves many cases. Nothing is
printed on success; the first error is printed as one line on stderr, exit
status 1, and its OUT file is not written.

Ops (see OPS at the bottom; one function per op, each taking the tensors and
metadata of the input file and returning the output tensors):

  attention   inputs q [B,Hq,M,D], k [B,Hkv,N,D], v [B,Hkv,N,Dv] and optionally
              do [B,Hq,M,Dv]; optional I64 q_pos, q_valid, q_seg [B,M] and
              k_pos, k_valid, k_seg [B,N]; metadata causal, window, scale,
              convention (position, bottom-right, top-left).
              Outputs o, lse and, with do, dq, dk, dv.

  rope        inputs x [B,H,T,D], optional I64 pos [B,T] (default t) and dy
              [B,H,T,D]; metadata pairing (half, interleaved), base, scaling
              (none, linear, ntk), factor. Outputs y and, with dy, dx.

  rmsnorm     inputs x [...,D], w [D], optional dy; metadata eps (default
              1e-6). Outputs y, rstd and, with dy, dx and grad.w.

  swiglu      inputs x [...,D], gate_proj [F,D], up_proj [F,D], down_proj
              [D,F], optional dy. Outputs y and, with dy, dx, grad.gate_proj,
              grad.up_proj, grad.down_proj.

  block       a Llama decoder layer: inputs x [B,T,Dim], the weights under
              their HF names without "model.layers.{i}." (BLOCK_WEIGHTS),
              optional I64 pos, valid, seg [B,T] (queries and keys alike) and
              dy; metadata num_attention_heads, num_key_value_heads,
              head_dim, rms_norm_eps, rope_theta, causal, window. Outputs y
              and, with dy, dx and grad.<weight name>.

  decoder     the language model of a checkpoint directory (config.json and
              model.safetensors, F32 or F64, HF LlamaForCausalLM names) given
              by the metadata key checkpoint, relative to the input file's
              directory or absolute: embedding, the block above per layer,
              final RMSNorm, LM head (the embedding when
              tie_word_embeddings), F.cross_entropy(ignore_index=-100).
              Inputs I64 tokens [B,T], optional I64 targets (default: shifted
              labels), valid, seg and pos (default: counted over real tokens,
              restarting at segment changes) [B,T]. Outputs logits [B,T,V],
              loss [], I64 count [] and grad.<HF name> for every parameter.

Gradient names: the gradient of an activation input NAME is dNAME, that of a
weight input NAME is grad.NAME.

The semantics are those of attnlab's DESIGN.md sections 2 to 5 and of
attention.Config.Visible. They are written here the plain PyTorch way, as
Hugging Face's Llama code does it (repeat_kv of K/V per group, a boolean
mask, masked_fill with -inf, softmax; rotate_half for RoPE, complex numbers
for the interleaved pairing; RMSNorm as x * rsqrt(mean(x^2) + eps) * w),
with autograd for every gradient, independently of the Go code.

The safetensors format is read and written by hand: an 8-byte little-endian
header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
{str: str}}, then the data buffer, which the tensors cover exactly.
"""

import json
import math
import os
import struct
import sys
import tempfile
import traceback

import numpy as np
import torch

torch.set_num_threads(1)

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8"), "F16": np.dtype("<f2")}
_NAMES = {v: k for k, v in _DTYPES.items()}
# BF16 has no numpy dtype: its elements are read as uint16 and widened
# exactly to float32 (a bfloat16 is the top half of a float32).
_READ_DTYPES = dict(_DTYPES, BF16=np.dtype("<u2"))


class OracleError(Exception):
    """A problem with the input: reported as one line, exit status 1."""


# ---------------------------------------------------------------- safetensors


def read_safetensors(path):
    """Returns ({name: numpy array}, {str: str}) read from path."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise OracleError("file is %d bytes, shorter than the 8-byte header length" % len(data))
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise OracleError("header length %d exceeds the %d bytes after it" % (n, len(data) - 8))
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise OracleError("header is not valid JSON: %s" % e)
    if not isinstance(header, dict):
        raise OracleError("header is not a JSON object")
    buf = data[8 + n :]
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise OracleError("__metadata__ is not an object of strings")
    tensors = {}
    spans = []
    for name, e in header.items():
        try:
            dtype = _READ_DTYPES[e["dtype"]]
            shape = [int(d) for d in e["shape"]]
            begin, end = (int(x) for x in e["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise OracleError(
                "tensor %s: malformed entry or unsupported dtype %r (want F32, F64, BF16, F16, I64)"
                % (json.dumps(name), e.get("dtype") if isinstance(e, dict) else e)
            )
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(d < 0 for d in shape) or end - begin != count * dtype.itemsize or begin < 0 or end > len(buf):
            raise OracleError(
                "tensor %s: data_offsets [%d, %d] do not fit shape %s, dtype %s and a %d-byte buffer"
                % (json.dumps(name), begin, end, shape, e["dtype"], len(buf))
            )
        a = np.frombuffer(buf, dtype=dtype, count=count, offset=begin)
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = a.reshape(shape)
        spans.append((begin, end, name))
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise OracleError("tensor %s: data starts at %d, want %d (buffer not covered exactly)" % (json.dumps(name), begin, at))
        at = end
    if at != len(buf):
        raise OracleError("data buffer has %d bytes, tensors cover %d" % (len(buf), at))
    return tensors, meta


def write_safetensors(path, tensors, meta):
    """Writes {name: numpy array} and {str: str} to path, replacing it atomically."""
    header = {}
    if meta:
        header["__metadata__"] = dict(sorted(meta.items()))
    chunks = []
    at = 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name])  # tobytes() is C order; 0-d arrays stay 0-d
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        if a.dtype not in _NAMES:
            raise OracleError("tensor %s: cannot write dtype %s" % (json.dumps(name), a.dtype))
        b = a.tobytes()
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        chunks.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-(8 + len(h)) % 8)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for b in chunks:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---------------------------------------------------------------- inputs


def float_tensor(tensors, name, ndim):
    if name not in tensors:
        raise OracleError("tensor %s: missing" % json.dumps(name))
    a = tensors[name]
    if a.dtype.kind != "f":
        raise OracleError("tensor %s: dtype %s, want F32 or F64" % (json.dumps(name), _NAMES[a.dtype]))
    if a.ndim != ndim:
        raise OracleError("tensor %s: shape %s has %d dimensions, want %d" % (json.dumps(name), list(a.shape), a.ndim, ndim))
    if 0 in a.shape:
        raise OracleError("tensor %s: shape %s has an empty dimension" % (json.dumps(name), list(a.shape)))
    return torch.from_numpy(a.astype(np.float64))


def int_tensor(tensors, name, shape):
    """The I64 tensor name as a torch int64 tensor of the given shape, or None."""
    if name not in tensors:
        return None
    a = tensors[name]
    if a.dtype != _DTYPES["I64"]:
        raise OracleError("tensor %s: dtype %s, want I64" % (json.dumps(name), _NAMES[a.dtype]))
    if list(a.shape) != list(shape):
        raise OracleError("tensor %s: shape %s, want %s" % (json.dumps(name), list(a.shape), list(shape)))
    return torch.from_numpy(a.astype(np.int64))


def bool_tensor(tensors, name, shape):
    a = int_tensor(tensors, name, shape)
    if a is None:
        return torch.ones(shape, dtype=torch.bool)
    if ((a != 0) & (a != 1)).any():
        raise OracleError("tensor %s: elements must be 0 or 1" % json.dumps(name))
    return a == 1


def attention_meta(meta):
    causal, window, scale, convention, softcap = False, 0, None, "position", 0.0
    for key in sorted(meta):
        val = meta[key]
        bad = "metadata %s = %s: " % (json.dumps(key), json.dumps(val))
        if key == "causal":
            if val in ("1", "t", "T", "true", "TRUE", "True"):
                causal = True
            elif val in ("0", "f", "F", "false", "FALSE", "False"):
                causal = False
            else:
                raise OracleError(bad + "want true or false")
        elif key == "window":
            try:
                window = int(val)
            except ValueError:
                raise OracleError(bad + "want an integer")
            if window < 0:
                raise OracleError(bad + "want >= 0")
        elif key == "scale":
            try:
                scale = float(val)
            except ValueError:
                raise OracleError(bad + "want a number")
            if scale == 0 or not math.isfinite(scale):
                raise OracleError(bad + "want a finite non-zero number")
        elif key == "convention":
            if val not in ("position", "bottom-right", "top-left"):
                raise OracleError(bad + "want position, bottom-right or top-left")
            convention = val
        elif key == "softcap":
            try:
                softcap = float(val)
            except ValueError:
                raise OracleError(bad + "want a number")
            if softcap < 0 or not math.isfinite(softcap):
                raise OracleError(bad + "want a finite number >= 0 (0: none)")
        elif not key.startswith("x-"):
            raise OracleError("metadata %s: unknown key" % json.dumps(key))
    return causal, window, scale, convention, softcap


def visibility(B, M, N, causal, window, convention, q_pos, k_pos, q_valid, k_valid, q_seg, k_seg):
    """The mask of DESIGN.md section 2 as a bool tensor [B, M, N].

    Key j is visible to query i iff both are valid, their segments agree (when
    given), and, with dist = qpos[i] - kpos[j] (position), i + (N-M) - j
    (bottom-right) or i - j (top-left): (!causal || dist >= 0) and
    (window == 0 || dist < window).
    """
    i = torch.arange(M).view(1, M, 1)
    j = torch.arange(N).view(1, 1, N)
    if convention == "bottom-right":
        dist = (i + (N - M) - j).expand(B, M, N)
    elif convention == "top-left":
        dist = (i - j).expand(B, M, N)
    else:
        qp = q_pos if q_pos is not None else (N - M + torch.arange(M)).expand(B, M)
        kp = k_pos if k_pos is not None else torch.arange(N).expand(B, N)
        dist = qp.view(B, M, 1) - kp.view(B, 1, N)
    vis = q_valid.view(B, M, 1) & k_valid.view(B, 1, N)
    if q_seg is not None:
        vis = vis & (q_seg.view(B, M, 1) == k_seg.view(B, 1, N))
    if causal:
        vis = vis & (dist >= 0)
    if window > 0:
        vis = vis & (dist < window)
    return vis


# ---------------------------------------------------------------- ops


def op_attention(tensors, meta):
    check_names(tensors, "attention", ("q", "k", "v", "do", "q_pos", "k_pos", "q_valid", "k_valid", "q_seg", "k_seg",
                                       "sinks", "alibi_slopes"))
    q = float_tensor(tensors, "q", 4)
    k = float_tensor(tensors, "k", 4)
    v = float_tensor(tensors, "v", 4)
    B, Hq, M, D = q.shape
    _, Hkv, N, _ = k.shape
    Dv = v.shape[3]
    if k.shape[0] != B or k.shape[3] != D:
        raise OracleError('tensor "k": shape %s, want [%d Hkv N %d] to match q %s' % (list(k.shape), B, D, list(q.shape)))
    if list(v.shape[:3]) != [B, Hkv, N]:
        raise OracleError('tensor "v": shape %s, want [%d %d %d Dv] to match k %s' % (list(v.shape), B, Hkv, N, list(k.shape)))
    if Hq % Hkv != 0:
        raise OracleError('tensor "k": %d heads do not divide the %d heads of q' % (Hkv, Hq))
    do = None
    if "do" in tensors:
        do = float_tensor(tensors, "do", 4)
        if list(do.shape) != [B, Hq, M, Dv]:
            raise OracleError('tensor "do": shape %s, want %s (the shape of o)' % (list(do.shape), [B, Hq, M, Dv]))
    q_pos = int_tensor(tensors, "q_pos", [B, M])
    k_pos = int_tensor(tensors, "k_pos", [B, N])
    q_valid = bool_tensor(tensors, "q_valid", [B, M])
    k_valid = bool_tensor(tensors, "k_valid", [B, N])
    q_seg = int_tensor(tensors, "q_seg", [B, M])
    k_seg = int_tensor(tensors, "k_seg", [B, N])
    if (q_seg is None) != (k_seg is None):
        raise OracleError('tensors "q_seg" and "k_seg" must be given together')
    for name, p in (("q_pos", q_pos), ("k_pos", k_pos)):
        if p is not None and (p < 0).any():
            raise OracleError("tensor %s: negative position" % json.dumps(name))
    causal, window, scale, convention, softcap = attention_meta(meta)
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    sinks = head_vector(tensors, "sinks", Hq)
    slopes = head_vector(tensors, "alibi_slopes", Hq)

    vis = visibility(B, M, N, causal, window, convention, q_pos, k_pos, q_valid, k_valid, q_seg, k_seg)
    live = vis.any(dim=-1)  # [B, M]: rows that see at least one key
    empty = q_valid & ~live
    if empty.any() and sinks is None:  # with sinks an empty row is defined: O = 0, lse = the sink
        b, i = (int(x) for x in empty.nonzero()[0])
        pos = int(q_pos[b, i]) if q_pos is not None else N - M + i
        raise OracleError("batch %d, query row %d (position %d) sees no key: every key is masked" % (b, i, pos))

    inputs = (q, k, v) if sinks is None else (q, k, v, sinks)
    for x in inputs:
        x.requires_grad_(True)
    group = Hq // Hkv
    k_rep = k.repeat_interleave(group, dim=1)  # query head h reads KV head h // group
    v_rep = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k_rep.transpose(-1, -2)) * scale  # [B, Hq, M, N]
    s = logits(s, softcap, slopes, q_pos, k_pos)
    s = s.masked_fill(~vis.unsqueeze(1), float("-inf"))
    if sinks is not None:
        # the sink is a score column with no value row: a row is never all
        # -inf, and the sinks' gradient comes from autograd like any other
        full = torch.cat([s, sinks.view(1, Hq, 1, 1).expand(B, Hq, M, 1)], dim=-1)  # [B, Hq, M, N+1]
        p = torch.softmax(full, dim=-1)[..., :N]
        with torch.no_grad():
            lse = torch.logsumexp(full, dim=-1)
    else:
        # A row with no visible key (a padding query) would be all -inf:
        # softmax gives NaN there. Replace its scores by zeros before the
        # softmax and its probabilities by zeros after it, so it yields O = 0
        # and no gradient.
        live4 = live.view(B, 1, M, 1)
        s_safe = torch.where(live4, s, torch.zeros((), dtype=s.dtype))
        p = torch.where(live4, torch.softmax(s_safe, dim=-1), torch.zeros((), dtype=s.dtype))
        with torch.no_grad():
            lse = torch.where(live4.squeeze(-1), torch.logsumexp(s_safe, dim=-1), torch.tensor(float("inf"), dtype=s.dtype))
    o = torch.matmul(p, v_rep)  # [B, Hq, M, Dv]

    out = {"o": o.detach().numpy(), "lse": lse.numpy()}
    if do is not None:
        (o * do).sum().backward()
        for name, x in zip(("dq", "dk", "dv", "dsinks"), inputs):
            out[name] = x.grad.numpy()
    for name, a in out.items():
        if np.isnan(a).any():
            raise OracleError("tensor %s: NaN in the result" % json.dumps(name))
    return out, {"op": "attention", "dtype": "float64", "convention": convention}


def head_vector(tensors, name, Hq):
    """An optional float tensor [Hq] (sinks, alibi_slopes), or None."""
    if name not in tensors:
        return None
    x = float_tensor(tensors, name, 1)
    if list(x.shape) != [Hq]:
        raise OracleError("tensor %s: shape %s, want [%d] (one per query head)" % (json.dumps(name), list(x.shape), Hq))
    return x


def logits(s, softcap, slopes, q_pos, k_pos):
    """Softcap, then ALiBi's bias by logical positions (DESIGN.md section 3.1)."""
    B, Hq, M, N = s.shape
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:
        qp = q_pos if q_pos is not None else (N - M + torch.arange(M)).expand(B, M)
        kp = k_pos if k_pos is not None else torch.arange(N).expand(B, N)
        dist = (qp.view(B, 1, M, 1) - kp.view(B, 1, 1, N)).abs().to(s.dtype)
        s = s - slopes.view(1, Hq, 1, 1) * dist
    return s


# ---------------------------------------------------------------- shared by the new ops


def check_names(tensors, op, known):
    """Rejects a tensor op does not read (a typo would otherwise go unnoticed)."""
    for name in sorted(tensors):
        if name not in known:
            raise OracleError("tensor %s: not an input of op %s (inputs: %s)" % (json.dumps(name), op, ", ".join(known)))


def float_any(tensors, name, min_ndim, layout):
    """The F32/F64 tensor name as float64, with at least min_ndim dimensions."""
    if name not in tensors:
        raise OracleError("tensor %s: missing" % json.dumps(name))
    a = tensors[name]
    if a.dtype.kind != "f":
        raise OracleError("tensor %s: dtype %s, want F32 or F64" % (json.dumps(name), _NAMES[a.dtype]))
    if a.ndim < min_ndim:
        raise OracleError("tensor %s: shape %s has %d dimensions, want %s" % (json.dumps(name), list(a.shape), a.ndim, layout))
    if 0 in a.shape:
        raise OracleError("tensor %s: shape %s has an empty dimension" % (json.dumps(name), list(a.shape)))
    return torch.from_numpy(a.astype(np.float64))


def weight_tensor(tensors, name, want, layout):
    """A float weight whose shape matches want (None: any size)."""
    w = float_any(tensors, name, 0, layout)
    if w.ndim != len(want) or any(e is not None and d != e for d, e in zip(w.shape, want)):
        raise OracleError("tensor %s: shape %s, want %s" % (json.dumps(name), list(w.shape), layout))
    return w


def optional_dy(tensors, shape):
    if "dy" not in tensors:
        return None
    dy = float_any(tensors, "dy", 0, "")
    if list(dy.shape) != list(shape):
        raise OracleError('tensor "dy": shape %s, want %s (the shape of y)' % (list(dy.shape), list(shape)))
    return dy


def positions(tensors, name, B, T):
    """The positions name [B, T], default t; negative ones are rejected."""
    pos = int_tensor(tensors, name, [B, T])
    if pos is None:
        return torch.arange(T).expand(B, T)
    if (pos < 0).any():
        i = int((pos.reshape(-1) < 0).nonzero()[0])
        raise OracleError("tensor %s: pos[%d] = %d is negative" % (json.dumps(name), i, int(pos.reshape(-1)[i])))
    return pos


def parse_meta(op, meta, fields):
    """Parses meta with fields {key: parser(val) -> value}; returns {key: value}."""
    got = {}
    for key in sorted(meta):
        val = meta[key]
        if key not in fields:
            if key.startswith("x-"):
                continue
            if not fields:
                raise OracleError("metadata %s: unknown key; op %s takes no metadata (x-* is free)" % (json.dumps(key), op))
            raise OracleError("metadata %s: unknown key for op %s (known: %s; x-* is free)" % (json.dumps(key), op, ", ".join(fields)))
        try:
            got[key] = fields[key](val)
        except (ValueError, OracleError) as e:
            raise OracleError("metadata %s = %s: %s" % (json.dumps(key), json.dumps(val), e))
    return got


def finite(ok, want):
    def parse(val):
        try:
            v = float(val)
        except ValueError:
            raise ValueError("want %s" % want)
        if not math.isfinite(v) or not ok(v):
            raise ValueError("want %s" % want)
        return v
    return parse


def integer(least):
    def parse(val):
        try:
            v = int(val)
        except ValueError:
            raise ValueError("want an integer >= %d" % least)
        if v < least:
            raise ValueError("want an integer >= %d" % least)
        return v
    return parse


def boolean(val):
    if val in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if val in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError("want true or false")


def one_of(*names):
    def parse(val):
        if val not in names:
            raise ValueError("want " + ", ".join(names))
        return val
    return parse


def no_nan(out):
    for name, a in out.items():
        if np.isnan(a).any():
            raise OracleError("tensor %s: NaN in the result" % json.dumps(name))
    return out


# ---------------------------------------------------------------- rope


def rope_angles(pos, D, base, scaling="none", factor=None):
    """The angles p·θ_k [B, T, D/2] the HF way: inv_freq = 1/base^(arange(0,D,2)/D),
    NTK scaling raising the base to base·factor^(D/(D−2)), linear scaling
    dividing the positions by factor."""
    if scaling == "ntk":
        base = base * factor ** (D / (D - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    t = pos.to(torch.float64)
    if scaling == "linear":
        t = t / factor
    return t[..., None] * inv_freq


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope_half(x, angles):
    """x [B,H,T,D] rotated as HF's apply_rotary_pos_emb: pairs (k, k+D/2)."""
    emb = torch.cat((angles, angles), dim=-1)[:, None]  # [B,1,T,D], shared by heads
    return x * emb.cos() + rotate_half(x) * emb.sin()


def rope_interleaved(x, angles):
    """x [B,H,T,D] rotated as Meta's Llama: pairs (2k, 2k+1) as complex numbers."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    rot = torch.polar(torch.ones_like(angles), angles)[:, None]  # e^{i·angle}
    return torch.view_as_real(xc * rot).reshape(x.shape)


def op_rope(tensors, meta):
    check_names(tensors, "rope", ["x", "pos", "dy"])
    x = float_tensor(tensors, "x", 4)
    B, H, T, D = x.shape
    if D % 2 != 0:
        raise OracleError('tensor "x": head dimension D = %d is odd; RoPE rotates pairs of features' % D)
    pos = positions(tensors, "pos", B, T)
    dy = optional_dy(tensors, x.shape)
    m = parse_meta("rope", meta, {
        "pairing": one_of("half", "interleaved"),
        "base": finite(lambda v: v > 0, "a finite base > 0"),
        "scaling": one_of("none", "linear", "ntk"),
        "factor": finite(lambda v: v >= 1, "a finite factor >= 1"),
    })
    pairing, base, scaling = m.get("pairing", "half"), m.get("base", 10000.0), m.get("scaling", "none")
    factor = m.get("factor")
    if scaling == "none" and factor is not None:
        raise OracleError('metadata "factor": given without scaling (set scaling to linear or ntk)')
    if scaling != "none" and factor is None:
        raise OracleError('metadata "factor": missing; scaling %s needs a factor >= 1' % scaling)
    if scaling == "ntk" and D == 2:
        raise OracleError('metadata "scaling" = "ntk": needs head dimension D > 2')

    x.requires_grad_(True)
    angles = rope_angles(pos, D, base, scaling, factor)
    y = (rope_half if pairing == "half" else rope_interleaved)(x, angles)
    out = {"y": y.detach().numpy()}
    if dy is not None:
        (y * dy).sum().backward()
        out["dx"] = x.grad.numpy()
    out_meta = {"op": "rope", "dtype": "float64", "pairing": pairing, "scaling": scaling}
    if factor is not None:
        out_meta["factor"] = repr(factor)
    return no_nan(out), out_meta


# ---------------------------------------------------------------- rmsnorm


def rms_norm(x, w, eps):
    """Llama's RMSNorm: x * rsqrt(mean(x²) + eps) * w, over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def reject_zero_rows(x, eps, name, what):
    if eps == 0:
        zero = (x.reshape(-1, x.shape[-1]) == 0).all(dim=-1)
        if zero.any():
            raise OracleError("tensor %s: %s %d is all zeros and eps = 0: its norm is 0/0" % (json.dumps(name), what, int(zero.nonzero()[0])))


def op_rmsnorm(tensors, meta):
    check_names(tensors, "rmsnorm", ["x", "w", "dy"])
    x = float_any(tensors, "x", 1, "at least 1 [... D]")
    D = x.shape[-1]
    w = float_any(tensors, "w", 1, "1 [D]")
    if list(w.shape) != [D]:
        raise OracleError('tensor "w": shape %s, want [%d] (the last dimension of x %s)' % (list(w.shape), D, list(x.shape)))
    dy = optional_dy(tensors, x.shape)
    eps = parse_meta("rmsnorm", meta, {"eps": finite(lambda v: v >= 0, "a finite eps >= 0")}).get("eps", 1e-6)
    reject_zero_rows(x, eps, "x", "row")

    x.requires_grad_(True)
    w.requires_grad_(True)
    y = rms_norm(x, w, eps)
    with torch.no_grad():
        rstd = torch.rsqrt(x.pow(2).mean(-1) + eps)
    out = {"y": y.detach().numpy(), "rstd": rstd.numpy()}
    if dy is not None:
        (y * dy).sum().backward()
        out["dx"] = x.grad.numpy()
        out["grad.w"] = w.grad.numpy()
    return no_nan(out), {"op": "rmsnorm", "dtype": "float64", "eps": repr(eps)}


# ---------------------------------------------------------------- swiglu


def swiglu(x, gate, up, down):
    """Llama's MLP: down(silu(gate(x)) * up(x))."""
    F_ = torch.nn.functional
    return F_.linear(F_.silu(F_.linear(x, gate)) * F_.linear(x, up), down)


def op_swiglu(tensors, meta):
    check_names(tensors, "swiglu", ["x", "gate_proj", "up_proj", "down_proj", "dy"])
    x = float_any(tensors, "x", 1, "at least 1 [... D]")
    D = x.shape[-1]
    gate = weight_tensor(tensors, "gate_proj", [None, D], "[F %d] (F hidden, D = %d the last dimension of x)" % (D, D))
    F = gate.shape[0]
    up = weight_tensor(tensors, "up_proj", [F, D], "[%d %d] (the shape of gate_proj)" % (F, D))
    down = weight_tensor(tensors, "down_proj", [D, F], "[%d %d] (the transpose of gate_proj)" % (D, F))
    dy = optional_dy(tensors, x.shape)
    parse_meta("swiglu", meta, {})

    params = {"gate_proj": gate, "up_proj": up, "down_proj": down}
    for t in [x] + list(params.values()):
        t.requires_grad_(True)
    y = swiglu(x, gate, up, down)
    out = {"y": y.detach().numpy()}
    if dy is not None:
        (y * dy).sum().backward()
        out["dx"] = x.grad.numpy()
        for name, p in params.items():
            out["grad." + name] = p.grad.numpy()
    return no_nan(out), {"op": "swiglu", "dtype": "float64"}


# ---------------------------------------------------------------- block

BLOCK_WEIGHTS = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
]


def repeat_kv(h, group):
    """HF's repeat_kv: [B, Hkv, T, hd] -> [B, Hkv*group, T, hd], head h reading KV head h // group."""
    B, Hkv, T, hd = h.shape
    if group == 1:
        return h
    return h[:, :, None, :, :].expand(B, Hkv, group, T, hd).reshape(B, Hkv * group, T, hd)


def llama_layer(x, w, pos, vis, live, Hq, Hkv, hd, eps, theta):
    """One HF LlamaDecoderLayer on x [B,T,Dim] with the weights w (BLOCK_WEIGHTS
    names): pre-norm attention with half-pairing RoPE at positions pos [B,T] and
    the mask vis [B,T,T] (live [B,T]: rows that see a key), then the pre-norm
    SwiGLU MLP, each added to the residual stream."""
    B, T, _ = x.shape
    F_ = torch.nn.functional

    # h = x + o_proj(attention(n)), n = input_layernorm(x)
    n = rms_norm(x, w["input_layernorm.weight"], eps)
    q = F_.linear(n, w["self_attn.q_proj.weight"]).view(B, T, Hq, hd).transpose(1, 2)
    k = F_.linear(n, w["self_attn.k_proj.weight"]).view(B, T, Hkv, hd).transpose(1, 2)
    v = F_.linear(n, w["self_attn.v_proj.weight"]).view(B, T, Hkv, hd).transpose(1, 2)
    angles = rope_angles(pos, hd, theta)
    q, k = rope_half(q, angles), rope_half(k, angles)
    k, v = repeat_kv(k, Hq // Hkv), repeat_kv(v, Hq // Hkv)
    s = torch.matmul(q, k.transpose(2, 3)) * hd ** -0.5
    live4 = live.view(B, 1, T, 1)
    s = s.masked_fill(~vis.unsqueeze(1), float("-inf"))
    s_safe = torch.where(live4, s, torch.zeros((), dtype=s.dtype))
    # a padding query row sees no key: its probabilities, hence its output, are 0
    p_attn = torch.where(live4, torch.softmax(s_safe, dim=-1), torch.zeros((), dtype=s.dtype))
    o = torch.matmul(p_attn, v).transpose(1, 2).reshape(B, T, Hq * hd)
    h = x + F_.linear(o, w["self_attn.o_proj.weight"])
    # y = h + mlp(post_attention_layernorm(h))
    n2 = rms_norm(h, w["post_attention_layernorm.weight"], eps)
    return h + swiglu(n2, w["mlp.gate_proj.weight"], w["mlp.up_proj.weight"], w["mlp.down_proj.weight"])


def op_block(tensors, meta):
    check_names(tensors, "block", ["x", "dy", "pos", "valid", "seg"] + BLOCK_WEIGHTS)
    x = float_tensor(tensors, "x", 3)
    B, T, Dim = x.shape
    m = parse_meta("block", meta, {
        "num_attention_heads": integer(1),
        "num_key_value_heads": integer(1),
        "head_dim": integer(1),
        "rms_norm_eps": finite(lambda v: v >= 0, "a finite eps >= 0"),
        "rope_theta": finite(lambda v: v > 0, "a finite base > 0"),
        "causal": boolean,
        "window": integer(0),
    })
    if "num_attention_heads" not in m:
        raise OracleError('metadata "num_attention_heads": missing')
    Hq = m["num_attention_heads"]
    Hkv = m.get("num_key_value_heads", Hq)
    if Hq % Hkv != 0:
        raise OracleError('metadata "num_key_value_heads" = "%d": does not divide num_attention_heads = %d' % (Hkv, Hq))
    if "head_dim" in m:
        hd = m["head_dim"]
    elif Dim % Hq != 0:
        raise OracleError('metadata "num_attention_heads" = "%d": does not divide the width %d of x; give head_dim' % (Hq, Dim))
    else:
        hd = Dim // Hq
    if hd % 2 != 0:
        raise OracleError('metadata "head_dim": %d is odd; RoPE rotates pairs of features' % hd)
    eps, theta = m.get("rms_norm_eps", 1e-6), m.get("rope_theta", 10000.0)
    causal, window = m.get("causal", True), m.get("window", 0)

    for name in BLOCK_WEIGHTS:
        if name not in tensors:
            raise OracleError("tensor %s: missing" % json.dumps(name))
    gate = weight_tensor(tensors, "mlp.gate_proj.weight", [None, Dim], "[F %d] (F = intermediate_size)" % Dim)
    F = gate.shape[0]
    want = {
        "input_layernorm.weight": [Dim],
        "self_attn.q_proj.weight": [Hq * hd, Dim],
        "self_attn.k_proj.weight": [Hkv * hd, Dim],
        "self_attn.v_proj.weight": [Hkv * hd, Dim],
        "self_attn.o_proj.weight": [Dim, Hq * hd],
        "post_attention_layernorm.weight": [Dim],
        "mlp.gate_proj.weight": [F, Dim],
        "mlp.up_proj.weight": [F, Dim],
        "mlp.down_proj.weight": [Dim, F],
    }
    w = {name: weight_tensor(tensors, name, want[name], str(want[name])) for name in BLOCK_WEIGHTS}
    dy = optional_dy(tensors, x.shape)
    reject_zero_rows(x, eps, "x", "token")
    pos = positions(tensors, "pos", B, T)
    valid = bool_tensor(tensors, "valid", [B, T])
    seg = int_tensor(tensors, "seg", [B, T])

    # the mask: self-attention, so queries and keys are the same tokens
    vis = visibility(B, T, T, causal, window, "position", pos, pos, valid, valid, seg, seg)
    live = vis.any(dim=-1)
    empty = valid & ~live
    if empty.any():
        b, i = (int(e) for e in empty.nonzero()[0])
        raise OracleError("batch %d, query row %d (position %d) sees no key: every key is masked" % (b, i, int(pos[b, i])))

    x.requires_grad_(True)
    for p in w.values():
        p.requires_grad_(True)
    y = llama_layer(x, w, pos, vis, live, Hq, Hkv, hd, eps, theta)

    out = {"y": y.detach().numpy()}
    if dy is not None:
        (y * dy).sum().backward()
        out["dx"] = x.grad.numpy()
        for name, p in w.items():
            out["grad." + name] = p.grad.numpy()
    return no_nan(out), {"op": "block", "dtype": "float64"}


# ---------------------------------------------------------------- decoder

DECODER_INPUTS = ["tokens", "targets", "valid", "seg", "pos"]
IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index


def read_config(path):
    """The LlamaConfig fields of config.json at path, with LlamaConfig's defaults
    (as attnlab's model.ParseConfig: a zero rms_norm_eps or rope_theta means the
    default too). Errors name the field."""
    try:
        with open(path, "rb") as f:
            cfg = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise OracleError("%s: %s" % (path, e.strerror or e))
    except (UnicodeDecodeError, ValueError) as e:
        raise OracleError("%s: not valid JSON: %s" % (path, e))
    if not isinstance(cfg, dict):
        raise OracleError("%s: not a JSON object" % path)
    if cfg.get("model_type", "llama") != "llama":
        raise OracleError("%s: model_type %s, want llama" % (path, json.dumps(cfg["model_type"])))
    if cfg.get("hidden_act", "silu") != "silu":
        raise OracleError("%s: hidden_act %s, want silu" % (path, json.dumps(cfg["hidden_act"])))
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise OracleError("%s: attention_bias/mlp_bias set: this model has no biases" % path)
    if cfg.get("rope_scaling") is not None:
        raise OracleError("%s: rope_scaling is set: not supported" % path)

    def count(name, default=None):
        v = cfg.get(name)
        if v is None and default is not None:
            return default
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise OracleError("%s: %s = %s, want an integer >= 1" % (path, name, json.dumps(v)))
        return v

    def number(name, default):
        v = cfg.get(name) or default
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise OracleError("%s: %s = %s, want a finite number >= 0" % (path, name, json.dumps(v)))
        return float(v)

    c = {name: count(name) for name in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "vocab_size", "max_position_embeddings")}
    c["num_key_value_heads"] = count("num_key_value_heads", c["num_attention_heads"])
    if c["num_attention_heads"] % c["num_key_value_heads"] != 0:
        raise OracleError("%s: num_key_value_heads = %d does not divide num_attention_heads = %d"
                          % (path, c["num_key_value_heads"], c["num_attention_heads"]))
    if cfg.get("head_dim"):  # absent, null or 0: hidden_size / num_attention_heads
        c["head_dim"] = count("head_dim")
    elif c["hidden_size"] % c["num_attention_heads"] != 0:
        raise OracleError("%s: hidden_size = %d is not a multiple of num_attention_heads = %d (set head_dim)"
                          % (path, c["hidden_size"], c["num_attention_heads"]))
    else:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    if c["head_dim"] % 2 != 0:
        raise OracleError("%s: head dimension %d is odd: RoPE rotates pairs" % (path, c["head_dim"]))
    c["rms_norm_eps"] = number("rms_norm_eps", 1e-6)
    c["rope_theta"] = number("rope_theta", 10000.0)
    tie = cfg.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise OracleError("%s: tie_word_embeddings = %s, want true or false" % (path, json.dumps(tie)))
    c["tie_word_embeddings"] = tie
    return c


def checkpoint_shapes(c):
    """{HF name: shape} of every parameter of LlamaForCausalLM with config c."""
    D, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    layer = {
        "input_layernorm.weight": [D],
        "self_attn.q_proj.weight": [q, D],
        "self_attn.k_proj.weight": [kv, D],
        "self_attn.v_proj.weight": [kv, D],
        "self_attn.o_proj.weight": [D, q],
        "post_attention_layernorm.weight": [D],
        "mlp.gate_proj.weight": [F, D],
        "mlp.up_proj.weight": [F, D],
        "mlp.down_proj.weight": [D, F],
    }
    shapes = {"model.embed_tokens.weight": [V, D]}
    for i in range(c["num_hidden_layers"]):
        for name in BLOCK_WEIGHTS:
            shapes["model.layers.%d.%s" % (i, name)] = layer[name]
    shapes["model.norm.weight"] = [D]
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [V, D]
    return shapes


def read_checkpoint(path):
    """(config, {HF name: float64 tensor}) of the checkpoint directory path:
    config.json and model.safetensors (F32, F64, BF16 or F16), every tensor present with
    the shape the config implies, and no other."""
    if not os.path.isdir(path):
        what = "no such directory" if not os.path.exists(path) else "not a directory"
        raise OracleError("%s; want a checkpoint directory (config.json and model.safetensors)" % what)
    c = read_config(os.path.join(path, "config.json"))
    wpath = os.path.join(path, "model.safetensors")
    try:
        tensors, _ = read_safetensors(wpath)
    except OSError as e:
        raise OracleError("%s: %s" % (wpath, e.strerror or e))
    except OracleError as e:
        raise OracleError("%s: %s" % (wpath, e))
    shapes = checkpoint_shapes(c)
    params = {}
    for name, shape in shapes.items():
        if name not in tensors:
            raise OracleError("%s: tensor %s missing" % (wpath, json.dumps(name)))
        a = tensors[name]
        if a.dtype.kind != "f":
            raise OracleError("%s: tensor %s: dtype %s, want F32 or F64" % (wpath, json.dumps(name), _NAMES[a.dtype]))
        if list(a.shape) != shape:
            raise OracleError("%s: tensor %s has shape %s, the config implies %s" % (wpath, json.dumps(name), list(a.shape), shape))
        params[name] = torch.from_numpy(a.astype(np.float64))
    extra = sorted(set(tensors) - set(shapes))
    if extra:
        raise OracleError("%s: unexpected tensor %s" % (wpath, json.dumps(extra[0])))
    return c, params


def counted_positions(valid, seg):
    """attnlab's model.Batch.Positions: per row, count real tokens from 0,
    restarting where the segment id changes."""
    B, T = valid.shape
    pos = torch.zeros(B, T, dtype=torch.int64)
    for b in range(B):
        n = 0
        for t in range(T):
            if seg is not None and t > 0 and seg[b, t] != seg[b, t - 1]:
                n = 0
            pos[b, t] = n
            if valid[b, t]:
                n += 1
    return pos


def shifted_targets(tokens, valid, seg):
    """attnlab's model.Batch.ShiftedTargets: token t predicts token t+1 of the
    same row and segment when both are real; everything else is ignored."""
    B, T = tokens.shape
    tg = torch.full((B, T), IGNORE_INDEX, dtype=torch.int64)
    for b in range(B):
        for t in range(T - 1):
            if valid[b, t] and valid[b, t + 1] and (seg is None or seg[b, t] == seg[b, t + 1]):
                tg[b, t] = tokens[b, t + 1]
    return tg


def op_decoder(tensors, meta):
    check_names(tensors, "decoder", DECODER_INPUTS)

    def directory(val):
        if not val:
            raise ValueError("want the path of a checkpoint directory")
        return val

    m = parse_meta("decoder", meta, {"checkpoint": directory})
    if "checkpoint" not in m:
        raise OracleError('metadata "checkpoint": missing; give the path of a checkpoint directory '
                          "(config.json and model.safetensors), relative to the input file's directory or absolute")
    ck = m["checkpoint"]
    if "tokens" not in tensors:
        raise OracleError('tensor "tokens": missing')
    a = tensors["tokens"]
    if a.dtype != _DTYPES["I64"]:
        raise OracleError('tensor "tokens": dtype %s, want I64' % _NAMES[a.dtype])
    if a.ndim != 2:
        raise OracleError('tensor "tokens": shape %s has %d dimensions, want 2 [B T]' % (list(a.shape), a.ndim))
    if 0 in a.shape:
        raise OracleError('tensor "tokens": shape %s has an empty dimension' % list(a.shape))
    tokens = torch.from_numpy(a.astype(np.int64))
    B, T = tokens.shape
    targets = int_tensor(tensors, "targets", [B, T])
    valid = bool_tensor(tensors, "valid", [B, T])
    seg = int_tensor(tensors, "seg", [B, T])
    pos = int_tensor(tensors, "pos", [B, T])
    try:
        c, params = read_checkpoint(ck)
    except OracleError as e:
        raise OracleError("metadata %s = %s: %s" % (json.dumps("checkpoint"), json.dumps(ck), e))
    V, maxpos = c["vocab_size"], c["max_position_embeddings"]

    def cell(i):
        return "[%d, %d]" % (i // T, i % T)

    bad = (valid & ((tokens < 0) | (tokens >= V))).reshape(-1)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise OracleError('tensor "tokens": %s = %d is outside the vocabulary [0, %d) of the checkpoint'
                          % (cell(i), int(tokens.reshape(-1)[i]), V))
    given_pos = pos is not None
    if not given_pos:
        pos = counted_positions(valid, seg)
    bad = ((pos < 0) | (pos >= maxpos)).reshape(-1)
    if bad.any():
        i = int(bad.nonzero()[0])
        name = "pos" if given_pos else "tokens"
        raise OracleError("tensor %s: %s is at position %d, outside [0, %d) (max_position_embeddings)"
                          % (json.dumps(name), cell(i), int(pos.reshape(-1)[i]), maxpos))
    if targets is None:
        targets = shifted_targets(tokens, valid, seg)
    else:
        counted = targets != IGNORE_INDEX
        bad = (counted & ((targets < 0) | (targets >= V))).reshape(-1)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise OracleError('tensor "targets": %s = %d is outside the vocabulary [0, %d) and is not %d'
                              % (cell(i), int(targets.reshape(-1)[i]), V, IGNORE_INDEX))
        bad = (counted & ~valid).reshape(-1)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise OracleError('tensor "targets": %s is the target of a padding token; padding takes no target' % cell(i))

    Hq, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    F_ = torch.nn.functional
    for p in params.values():
        p.requires_grad_(True)
    embed = params["model.embed_tokens.weight"]

    # x = embedding; padding may hold any id: it is embedded as token 0
    x = F_.embedding(torch.where(valid, tokens, torch.zeros_like(tokens)), embed)
    # self-attention, causal by position, within a segment, over real tokens
    vis = visibility(B, T, T, True, 0, "position", pos, pos, valid, valid, seg, seg)
    live = vis.any(dim=-1)
    for i in range(c["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        x = llama_layer(x, {n: params[pre + n] for n in BLOCK_WEIGHTS}, pos, vis, live, Hq, Hkv, hd, eps, theta)
    x = rms_norm(x, params["model.norm.weight"], eps)
    logits = F_.linear(x, embed if c["tie_word_embeddings"] else params["lm_head.weight"])

    count = int((targets != IGNORE_INDEX).sum())
    names = list(params)
    if count > 0:
        loss = F_.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=IGNORE_INDEX)
        grads = torch.autograd.grad(loss, [params[n] for n in names])
    else:  # F.cross_entropy would give NaN; attnlab's loss is 0 with no gradient
        loss = torch.zeros((), dtype=torch.float64)
        grads = [torch.zeros_like(params[n]) for n in names]
    out = {
        "logits": logits.detach().numpy(),
        "loss": loss.detach().numpy(),
        "count": np.array(count, dtype=np.int64),
    }
    for n, g in zip(names, grads):
        out["grad." + n] = g.numpy()
    return no_nan(out), {"op": "decoder", "dtype": "float64", "checkpoint": ck,
                         "targets": "given" if "targets" in tensors else "shifted"}


def resolve_paths(op, meta, src):
    """As attnlab ref: a relative checkpoint path is relative to the directory
    of the input file src."""
    ck = meta.get("checkpoint")
    if op == "decoder" and ck and not os.path.isabs(ck):
        meta = dict(meta, checkpoint=os.path.join(os.path.dirname(src), ck))
    return meta


OPS = {
    "attention": op_attention,
    "rope": op_rope,
    "rmsnorm": op_rmsnorm,
    "swiglu": op_swiglu,
    "block": op_block,
    "decoder": op_decoder,
}


# ---------------------------------------------------------------- main


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        sys.stderr.write("usage: torch_oracle.py OP IN.safetensors OUT.safetensors [IN OUT ...]\n")
        return 2
    op = argv[0]
    if op not in OPS:
        sys.stderr.write("torch_oracle: unknown op %s (known: %s)\n" % (json.dumps(op), ", ".join(sorted(OPS))))
        return 1
    for src, dst in zip(argv[1::2], argv[2::2]):
        try:
            tensors, meta = read_safetensors(src)
            out, out_meta = OPS[op](tensors, resolve_paths(op, meta, src))
            write_safetensors(dst, out, out_meta)
        except OracleError as e:
            msg = " ".join(str(e).split())
            sys.stderr.write("torch_oracle: %s: %s\n" % (src, msg))
            return 1
        except Exception as e:  # an I/O error or a bug: still one line, with where it arose
            where = traceback.extract_tb(e.__traceback__)[-1]
            msg = "%s: %s (at %s:%d)" % (
                type(e).__name__, " ".join(str(e).split()), os.path.basename(where.filename), where.lineno)
            sys.stderr.write("torch_oracle: %s: %s\n" % (src, msg))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
