#!/usr/bin/python3
"""The workloads of `attnlab bench`, run the usual PyTorch way, for a
side-by-side table.

Usage:

    /usr/bin/python3 torch_bench.py SPEC.json

SPEC holds the workloads and a time budget per measurement:

    {"threads": 2, "seconds": 1.0,
     "gemm": [{"n": 256, "dtype": "float32"}, ...],
     "stream": [{"op": "read", "bytes": 268435456, "threads": 1}, ...],
     "attention": [{"n": 1024, "h": 8, "d": 64, "dtype": "float32", "causal": true}, ...],
     "decode": [{"context": 1024, "h": 8, "hkv": 8, "d": 64}, ...]}

It prints one JSON object: {"torch": version, "blas": ..., "gemm": [gflops...],
"stream": [GB/s...], "attention": [gflops...], "decode": [microseconds per
token...]}, in the order of SPEC, with the medians of repeated runs.

Stream: a float32 array of the given bytes; "read" is torch.sum over it
(bytes read once), "copy" is y.copy_(x) into a second array (read and
write: 2·bytes moved), with torch.set_num_threads(threads) for that case.
Attention is written as eager Hugging Face Llama attention: Q Kᵀ · scale, a
causal mask by masked_fill (none when causal is false), softmax, @ V;
forward and autograd backward. Decoding is one query per head against a
cache of context keys, with the query heads of a GQA group (h / hkv of
them) viewed as rows of one matrix product against their KV head, so K and
V are read once and never copied (Hugging Face's repeat_kv would copy them).
Flops are counted as attnlab counts them: 2n³ per GEMM, 12·n²·D·H for
attention forward and backward (what this eager code executes, causal or
not).
"""

import json
import statistics
import sys
import time

import torch


def median_time(fn, seconds):
    fn()  # warm up
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > seconds and len(times) >= 3:
            break
    return statistics.median(times)


def blas():
    """The BLAS library actually loaded: Debian's torch is built against the
    generic libblas.so.3, which the alternatives system may point to
    OpenBLAS."""
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # make sure it is loaded
    try:
        libs = {line.split()[-1] for line in open("/proc/self/maps") if "blas" in line.lower()}
    except OSError:
        libs = set()
    for lib in sorted(libs):
        if "openblas" in lib.lower():
            return "OpenBLAS (" + lib + ")"
    return ", ".join(sorted(libs)) or "unknown"


def main():
    spec = json.load(open(sys.argv[1]))
    torch.set_num_threads(spec.get("threads", 2))
    torch.manual_seed(0)
    budget = spec.get("seconds", 1.0)
    threads = torch.get_num_threads()
    out = {"torch": torch.__version__, "blas": blas(), "threads": threads,
           "gemm": [], "stream": [], "attention": [], "decode": []}

    for w in spec.get("gemm", []):
        dt = getattr(torch, w["dtype"])
        n = w["n"]
        a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
        t = median_time(lambda: torch.mm(a, b), budget)
        out["gemm"].append(2 * n ** 3 / t / 1e9)

    arrays = {}
    for w in spec.get("stream", []):
        size = w["bytes"]
        if size not in arrays:
            arrays.clear()  # one pair at a time
            arrays[size] = (torch.ones(size // 4), torch.ones(size // 4))
        x, y = arrays[size]
        torch.set_num_threads(w["threads"])
        if w["op"] == "copy":
            t = median_time(lambda: y.copy_(x), budget)
            out["stream"].append(2 * size / t / 1e9)
        else:
            t = median_time(lambda: torch.sum(x), budget)
            out["stream"].append(size / t / 1e9)
        torch.set_num_threads(threads)
    arrays.clear()

    for w in spec.get("attention", []):
        dt = getattr(torch, w["dtype"])
        n, h, d = w["n"], w["h"], w["d"]
        causal = w.get("causal", True)
        q = torch.randn(1, h, n, d, dtype=dt, requires_grad=True)
        k = torch.randn(1, h, n, d, dtype=dt, requires_grad=True)
        v = torch.randn(1, h, n, d, dtype=dt, requires_grad=True)
        do = torch.randn(1, h, n, d, dtype=dt)
        hidden = torch.ones(n, n, dtype=torch.bool).triu(1)

        def step():
            s = (q @ k.transpose(-1, -2)) * (d ** -0.5)
            if causal:
                s = s.masked_fill(hidden, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            o.backward(do)
            q.grad = k.grad = v.grad = None

        t = median_time(step, budget)
        out["attention"].append(12 * n * n * d * h / t / 1e9)

    for w in spec.get("decode", []):
        ctx, h, d = w["context"], w["h"], w["d"]
        hkv = w.get("hkv", h)
        q = torch.randn(1, hkv, h // hkv, d)  # the query heads of a group as rows
        k, v = torch.randn(1, hkv, ctx, d), torch.randn(1, hkv, ctx, d)

        def step():
            with torch.no_grad():
                p = torch.softmax((q @ k.transpose(-1, -2)) * (d ** -0.5), dim=-1)
                return p @ v

        t = median_time(step, budget)
        out["decode"].append(t * 1e6)

    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
