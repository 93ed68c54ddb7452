#!/usr/bin/python3
"""Greedy generation with a KV cache in eager PyTorch, the PyTorch side of
the generate row of `attnlab bench`.

Usage:

    /usr/bin/python3 torch_generate.py SPEC.json

SPEC is {"checkpoint": DIR, "prompt": [token ids], "new": N, "threads": 2,
"seconds": 1.0}. DIR is a checkpoint directory as attnlab writes it
(config.json and model.safetensors, F32 or F64, Hugging Face
LlamaForCausalLM names). The weights are loaded into the Llama decoder below
in float32, written independently of attnlab: RMSNorm x·rsqrt(mean(x²) + eps)·w,
half-pairing RoPE (rotate_half, angles computed in float64 as Hugging Face
does), GQA, SwiGLU, a tied or separate LM head.

A run is one generation: the prompt in one forward (causal within it), then
N − 1 forwards of one token each, each token the argmax of the last
position's logits (the first index on ties, as attnlab), no end-of-text
stop. Keys and values go into a cache allocated per run for the prompt and
the N tokens (as Hugging Face's StaticCache); the query heads of a GQA group
are the rows of one matrix product against their KV head, so the cache is
never copied. Runs repeat after a warm-up until SPEC's seconds are spent
(at least 3) with torch.set_num_threads(threads) and torch.no_grad().

It prints one JSON object: {"torch": version, "threads": n, "tokens": [the N
new ids], "seconds": [the time of each timed run]}. Every run must give the
same tokens. An error is one line on stderr, exit status 1.
"""

import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_oracle as oracle  # noqa: E402  (sets 1 thread; main sets its own)
from torch_oracle import OracleError  # noqa: E402

F = torch.nn.functional


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Llama:
    """A Llama decoder on float32 weights {HF name: tensor}, one sequence."""

    def __init__(self, c, eps, weights):
        self.c, self.eps = c, eps
        w = {n: t.to(torch.float32).contiguous() for n, t in weights.items()}
        self.embed = w["model.embed_tokens.weight"]
        self.head = self.embed if c["tie_word_embeddings"] else w["lm_head.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = [{n: w["model.layers.%d.%s" % (i, n)] for n in oracle.BLOCK_WEIGHTS}
                       for i in range(c["num_hidden_layers"])]
        hd = c["head_dim"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = torch.arange(c["max_position_embeddings"], dtype=torch.float64)[:, None] * inv_freq
        emb = torch.cat((angles, angles), dim=-1)  # [positions, hd]
        self.cos, self.sin = emb.cos().to(torch.float32), emb.sin().to(torch.float32)

    def new_cache(self, capacity):
        c = self.c
        shape = (c["num_key_value_heads"], capacity, c["head_dim"])
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in self.layers]

    def forward(self, ids, pos0, cache):
        """The logits [V] of the last of the tokens ids [T] at positions
        pos0 … pos0+T−1, their keys and values added to cache."""
        c = self.c
        T = ids.shape[0]
        Hq, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        G, S = Hq // Hkv, pos0 + T
        cos, sin = self.cos[pos0:S], self.sin[pos0:S]
        mask = None
        if T > 1:  # query t (position pos0+t) sees keys up to pos0+t
            hidden = torch.arange(S)[None, :] > (pos0 + torch.arange(T))[:, None]
            mask = torch.zeros(T, S).masked_fill(hidden, float("-inf"))
        x = F.embedding(ids, self.embed)  # [T, D]
        for w, (kc, vc) in zip(self.layers, cache):
            n = rms_norm(x, w["input_layernorm.weight"], self.eps)
            q = F.linear(n, w["self_attn.q_proj.weight"]).view(T, Hq, hd).transpose(0, 1)
            k = F.linear(n, w["self_attn.k_proj.weight"]).view(T, Hkv, hd).transpose(0, 1)
            v = F.linear(n, w["self_attn.v_proj.weight"]).view(T, Hkv, hd).transpose(0, 1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            kc[:, pos0:S] = k
            vc[:, pos0:S] = v
            # query head h reads KV head h // G: the G heads of a group as rows
            qg = q.reshape(Hkv, G * T, hd)
            s = torch.matmul(qg, kc[:, :S].transpose(1, 2)) * hd ** -0.5  # [Hkv, G·T, S]
            if mask is not None:
                s = (s.view(Hkv, G, T, S) + mask).view(Hkv, G * T, S)
            o = torch.matmul(torch.softmax(s, dim=-1), vc[:, :S])  # [Hkv, G·T, hd]
            o = o.view(Hq, T, hd).transpose(0, 1).reshape(T, Hq * hd)
            h = x + F.linear(o, w["self_attn.o_proj.weight"])
            n2 = rms_norm(h, w["post_attention_layernorm.weight"], self.eps)
            gate = F.linear(n2, w["mlp.gate_proj.weight"])
            up = F.linear(n2, w["mlp.up_proj.weight"])
            x = h + F.linear(F.silu(gate) * up, w["mlp.down_proj.weight"])
        return F.linear(rms_norm(x[-1], self.norm, self.eps), self.head)

    def generate(self, prompt, new):
        cache = self.new_cache(len(prompt) + new)
        out = []
        with torch.no_grad():
            logits = self.forward(torch.tensor(prompt, dtype=torch.int64), 0, cache)
            pos = len(prompt)
            while True:
                tok = int(torch.argmax(logits))
                out.append(tok)
                if len(out) == new:
                    return out
                logits = self.forward(torch.tensor([tok], dtype=torch.int64), pos, cache)
                pos += 1


def read_eps(ckpt):
    """rms_norm_eps as attnlab's model.ParseConfig reads it: the value when
    present (0 included), LlamaConfig's 1e-6 when absent."""
    with open(os.path.join(ckpt, "config.json")) as f:
        v = json.load(f).get("rms_norm_eps")
    return 1e-6 if v is None else float(v)


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: torch_generate.py SPEC.json\n")
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    c, weights = oracle.read_checkpoint(spec["checkpoint"])
    prompt, new = [int(t) for t in spec["prompt"]], int(spec["new"])
    if not prompt or new < 1:
        raise OracleError("a prompt of %d tokens and %d new ones: want at least one of each" % (len(prompt), new))
    if len(prompt) + new > c["max_position_embeddings"]:
        raise OracleError("%d + %d tokens pass max_position_embeddings = %d" % (len(prompt), new, c["max_position_embeddings"]))
    bad = [t for t in prompt if not 0 <= t < c["vocab_size"]]
    if bad:
        raise OracleError("prompt token %d is outside the vocabulary [0, %d)" % (bad[0], c["vocab_size"]))
    torch.set_num_threads(int(spec.get("threads", 2)))
    model = Llama(c, read_eps(spec["checkpoint"]), weights)

    tokens = model.generate(prompt, new)  # warm-up
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < spec.get("seconds", 1.0):
        t0 = time.perf_counter()
        got = model.generate(prompt, new)
        times.append(time.perf_counter() - t0)
        if got != tokens:
            raise OracleError("the tokens differ from one run to the next")
    json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "tokens": tokens, "seconds": times}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OracleError as e:
        sys.stderr.write("torch_generate: %s\n" % " ".join(str(e).split()))
        sys.exit(1)
    except Exception as e:
        where = traceback.extract_tb(e.__traceback__)[-1]
        sys.stderr.write("torch_generate: %s: %s (at %s:%d)\n" % (
            type(e).__name__, " ".join(str(e).split()), os.path.basename(where.filename), where.lineno))
        sys.exit(1)
