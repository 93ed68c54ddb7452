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

The semantics are those of attnlab's DESIGN.md section 2 and 3 and of
attention.Config.Visible. They are written here the plain PyTorch way
(repeat_interleave of K/V per group as HF repeat_kv, a boolean mask,
masked_fill with -inf, softmax, autograd), independently of the Go code.

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

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}
_NAMES = {v: k for k, v in _DTYPES.items()}


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
            dtype = _DTYPES[e["dtype"]]
            shape = [int(d) for d in e["shape"]]
            begin, end = (int(x) for x in e["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise OracleError(
                "tensor %s: malformed entry or unsupported dtype %r (want F32, F64, I64)"
                % (json.dumps(name), e.get("dtype") if isinstance(e, dict) else e)
            )
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(d < 0 for d in shape) or end - begin != count * dtype.itemsize or begin < 0 or end > len(buf):
            raise OracleError(
                "tensor %s: data_offsets [%d, %d] do not fit shape %s, dtype %s and a %d-byte buffer"
                % (json.dumps(name), begin, end, shape, e["dtype"], len(buf))
            )
        tensors[name] = np.frombuffer(buf, dtype=dtype, count=count, offset=begin).reshape(shape)
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
        a = np.ascontiguousarray(tensors[name])
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
    causal, window, scale, convention = False, 0, None, "position"
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
        elif not key.startswith("x-"):
            raise OracleError("metadata %s: unknown key" % json.dumps(key))
    return causal, window, scale, convention


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
    causal, window, scale, convention = attention_meta(meta)
    if scale is None:
        scale = 1.0 / math.sqrt(D)

    vis = visibility(B, M, N, causal, window, convention, q_pos, k_pos, q_valid, k_valid, q_seg, k_seg)
    live = vis.any(dim=-1)  # [B, M]: rows that see at least one key
    empty = q_valid & ~live
    if empty.any():
        b, i = (int(x) for x in empty.nonzero()[0])
        pos = int(q_pos[b, i]) if q_pos is not None else N - M + i
        raise OracleError("batch %d, query row %d (position %d) sees no key: every key is masked" % (b, i, pos))

    q.requires_grad_(True)
    k.requires_grad_(True)
    v.requires_grad_(True)
    group = Hq // Hkv
    k_rep = k.repeat_interleave(group, dim=1)  # query head h reads KV head h // group
    v_rep = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k_rep.transpose(-1, -2)) * scale  # [B, Hq, M, N]
    vis4 = vis.unsqueeze(1)  # [B, 1, M, N]
    live4 = live.view(B, 1, M, 1)
    s = s.masked_fill(~vis4, float("-inf"))
    # A row with no visible key (a padding query) would be all -inf: softmax
    # gives NaN there. Replace its scores by zeros before the softmax and its
    # probabilities by zeros after it, so it yields O = 0 and no gradient.
    s_safe = torch.where(live4, s, torch.zeros((), dtype=s.dtype))
    p = torch.where(live4, torch.softmax(s_safe, dim=-1), torch.zeros((), dtype=s.dtype))
    o = torch.matmul(p, v_rep)  # [B, Hq, M, Dv]
    with torch.no_grad():
        lse = torch.where(live4.squeeze(-1), torch.logsumexp(s_safe, dim=-1), torch.tensor(float("inf"), dtype=s.dtype))

    out = {"o": o.detach().numpy(), "lse": lse.numpy()}
    if do is not None:
        (o * do).sum().backward()
        out["dq"] = q.grad.numpy()
        out["dk"] = k.grad.numpy()
        out["dv"] = v.grad.numpy()
    for name, a in out.items():
        if np.isnan(a).any():
            raise OracleError("tensor %s: NaN in the result" % json.dumps(name))
    return out, {"op": "attention", "dtype": "float64", "convention": convention}


OPS = {
    "attention": op_attention,
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
            out, out_meta = OPS[op](tensors, meta)
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
