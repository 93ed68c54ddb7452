"""The adapter side of attnlab's conformance protocol, in plain Python.

The protocol is docs/conform-protocol.md: attnlab starts the adapter once and
writes frames on its standard input, each `uint64 little-endian length |
that many bytes of one safetensors file`; the adapter answers every frame
with one frame on its standard output. The first request is a hello, the
adapter answers with its capabilities; then come attention requests, one at
a time. When attnlab closes the adapter's input, the adapter exits 0.

An adapter script builds an object with two methods and calls serve():

    class MyAdapter:
        def capabilities(self):          # the hello answer, a dict
            return {"name": ..., "version": ..., "dtypes": [...], ...}
        def attention(self, req):        # req: a Request
            return {"o": ..., "lse": ..., "dq": ..., "dk": ..., "dv": ...}

    if __name__ == "__main__":
        conform_io.serve(MyAdapter())

attention returns numpy arrays or torch tensors under the protocol's names;
they are written in the dtype of the request. An exception raised by
attention (the implementation refused the input) becomes an error response,
metadata {"error": "one line"}, and the adapter keeps serving. Logs go to
standard error only: standard output carries frames and nothing else, so
serve() moves file descriptor 1 onto standard error before it starts (a
stray print, or a library writing to fd 1, cannot corrupt a frame).

The safetensors format is read and written by hand (struct and json; no
safetensors package): an 8-byte little-endian header length, a JSON header
{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {str: str}}, then
the data, which the tensors cover exactly. Dtypes F32, F64 and I64.
"""

import json
import os
import struct
import sys
import traceback

import numpy as np

PROTOCOL = "attnlab-conform/1"

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}
_NAMES = {v: k for k, v in _DTYPES.items()}


class ProtocolError(Exception):
    """A frame or file that does not follow the protocol."""


def log(*args):
    """Writes one line to standard error (attnlab shows its last lines)."""
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- safetensors


def decode(buf):
    """Returns ({name: numpy array}, {str: str}) of one safetensors file."""
    if len(buf) < 8:
        raise ProtocolError("a safetensors file of %d bytes (no header length)" % len(buf))
    (n,) = struct.unpack_from("<Q", buf, 0)
    if n > len(buf) - 8:
        raise ProtocolError("header length %d exceeds the file (%d bytes)" % (n, len(buf)))
    try:
        header = json.loads(bytes(buf[8 : 8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ProtocolError("__metadata__ is not an object of strings")
    data = memoryview(buf)[8 + n :]
    tensors = {}
    covered = 0
    for name, e in header.items():
        try:
            dtype = _DTYPES[e["dtype"]]
            shape = [int(s) for s in e["shape"]]
            begin, end = (int(x) for x in e["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("tensor %s: bad header entry %s (dtypes: F32, F64, I64)" % (json.dumps(name), json.dumps(e)))
        count = 1
        for s in shape:
            count *= s
        if begin < 0 or end > len(data) or end - begin != count * dtype.itemsize:
            raise ProtocolError("tensor %s: data_offsets [%d, %d] do not hold shape %s of %s" % (json.dumps(name), begin, end, shape, e["dtype"]))
        covered += end - begin
        # A copy: the frame buffer is reused and torch wants writable arrays.
        tensors[name] = np.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(shape).copy()
    if covered != len(data):
        raise ProtocolError("the tensors cover %d of the %d data bytes" % (covered, len(data)))
    return tensors, meta


def encode(tensors, meta):
    """The safetensors file of {name: numpy array} and {str: str}, as bytes."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in _NAMES:
            raise ProtocolError("tensor %s: dtype %s (want float32, float64 or int64)" % (json.dumps(name), a.dtype))
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)  # align the data to 8 bytes, as safetensors writers do
    return b"".join([struct.pack("<Q", len(h)), h] + blobs)


# ---------------------------------------------------------------- frames


def read_frame(f):
    """The next frame's payload from binary stream f, or None at a clean end."""
    hdr = _read_exact(f, 8, eof_ok=True)
    if hdr is None:
        return None
    (n,) = struct.unpack("<Q", hdr)
    if n > 1 << 31:
        raise ProtocolError("a frame of %d bytes" % n)
    return _read_exact(f, n, eof_ok=False)


def write_frame(f, payload):
    f.write(struct.pack("<Q", len(payload)))
    f.write(payload)
    f.flush()


def _read_exact(f, n, eof_ok):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            if got == 0 and eof_ok:
                return None
            raise ProtocolError("input ended inside a frame (%d of %d bytes)" % (got, n))
        got += k
    return buf


# ---------------------------------------------------------------- requests


class Request:
    """One attention request, decoded.

    Tensors are numpy arrays in the request's layout (q [B,Hq,M,D], k
    [B,Hkv,N,D], v [B,Hkv,N,Dv], do [B,Hq,M,Dv] or None); mask [B,M,N] int64
    (1 = may attend) or None; q_pos, q_valid, q_seg [B,M] and k_pos,
    k_valid, k_seg [B,N] int64 or None; sinks [Hq] and alibi_slopes [Hq]
    (dtype of q) or None, sent only to an adapter that declares the
    capability "sinks" or "alibi". Metadata: softcap (float, or None for
    none; capability "softcap"), causal (bool), past
    (int, N - M), scale (float, or None for the implementation's default),
    window (int, 0 for none), want_lse (bool), request (str), dtype
    ("float32" or "float64", the dtype of q).
    """

    def __init__(self, tensors, meta):
        for name in ("q", "k", "v"):
            if name not in tensors:
                raise ProtocolError("the request has no tensor %s" % json.dumps(name))
            if tensors[name].ndim != 4 or tensors[name].dtype.kind != "f":
                raise ProtocolError("tensor %s: shape %s dtype %s, want 4 dimensions of F32 or F64" % (json.dumps(name), list(tensors[name].shape), tensors[name].dtype))
        self.q, self.k, self.v = tensors["q"], tensors["k"], tensors["v"]
        self.do = tensors.get("do")
        self.mask = tensors.get("mask")
        for name in ("q_pos", "k_pos", "q_valid", "k_valid", "q_seg", "k_seg", "sinks", "alibi_slopes"):
            setattr(self, name, tensors.get(name))
        self.B, self.Hq, self.M, self.D = self.q.shape
        _, self.Hkv, self.N, _ = self.k.shape
        self.Dv = self.v.shape[3]
        self.dtype = "float32" if self.q.dtype == np.float32 else "float64"
        self.meta = meta
        self.request = meta.get("request", "")
        self.causal = meta.get("causal", "false") == "true"
        self.past = int(meta.get("past", self.N - self.M))
        self.scale = float(meta["scale"]) if "scale" in meta else None
        self.window = int(meta.get("window", "0"))
        self.softcap = float(meta["softcap"]) if "softcap" in meta else None
        self.want_lse = meta.get("want_lse", "false") == "true"

    def __repr__(self):
        return "attention #%s B=%d Hq=%d Hkv=%d M=%d N=%d D=%d Dv=%d %s causal=%s past=%d" % (
            self.request, self.B, self.Hq, self.Hkv, self.M, self.N, self.D, self.Dv, self.dtype, self.causal, self.past)


def _as_numpy(x, dtype):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x), dtype=dtype)


def one_line(e):
    """An exception as one line: its type and the first line of its message."""
    msg = str(e).strip().splitlines()
    text = type(e).__name__ + (": " + msg[0].strip() if msg else "")
    return text if len(text) <= 500 else text[:497] + "..."


# ---------------------------------------------------------------- the loop


def serve(adapter, stdin=None, stdout=None):
    """Answers frames from stdin on stdout until stdin ends, then returns.

    A malformed frame ends the adapter with exit status 1 (a message on
    standard error): the stream can no longer be trusted. A request that
    decodes but cannot be served gets an error response and the loop goes on.
    """
    if stdout is None:
        # Keep the real standard output for frames and point fd 1 (and
        # sys.stdout) at standard error, so that nothing else can write there.
        stdout = os.fdopen(os.dup(1), "wb", buffering=1 << 16)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    if stdin is None:
        stdin = sys.stdin.buffer
    while True:
        try:
            buf = read_frame(stdin)
            if buf is None:
                return
            tensors, meta = decode(buf)
        except ProtocolError as e:
            log("conform_io: %s" % e)
            sys.exit(1)
        op = meta.get("op")
        if op == "hello":
            if meta.get("protocol") != PROTOCOL:
                log("conform_io: hello for protocol %r, this adapter speaks %s" % (meta.get("protocol"), PROTOCOL))
            caps = json.dumps(adapter.capabilities(), separators=(",", ":"))
            reply = encode({}, {"op": "hello", "capabilities": caps})
        elif op == "attention":
            reply = _attention(adapter, tensors, meta)
        else:
            reply = encode({}, {"error": "unknown op %s" % json.dumps(op)})
        write_frame(stdout, reply)


def _attention(adapter, tensors, meta):
    try:
        req = Request(tensors, meta)
    except (ProtocolError, ValueError, KeyError) as e:
        return encode({}, {"error": "bad request: " + one_line(e)})
    try:
        out = adapter.attention(req)
    except Exception as e:  # the implementation refused the input
        msg = one_line(e)
        log("conform_io: %r: %s" % (req, msg))
        if os.environ.get("CONFORM_TRACEBACK"):
            traceback.print_exc(file=sys.stderr)
        return encode({}, {"error": msg})
    dtype = np.float32 if req.dtype == "float32" else np.float64
    arrays = {name: _as_numpy(x, dtype) for name, x in out.items() if x is not None}
    return encode(arrays, {"op": "attention", "request": req.request})
