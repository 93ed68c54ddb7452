#!/usr/bin/python3
"""Training in PyTorch, to check attnlab's train package against.

Usage:

    /usr/bin/python3 torch_train.py CHECKPOINT BATCHES.safetensors OUT.safetensors [CHECKPOINT BATCHES OUT ...]
    /usr/bin/python3 torch_train.py bench CONFIG.json
    torchrun [torchrun flags] torch_train.py ddp --run RUN [--out DIR] [--steps N] [--dtype float32|float64] [--save-every K] [--log FILE]

Data-parallel training (ddp), the way to train attnlab's model on many
machines: RUN is the folder that `attnlab train -prepare` writes (its
step-0 checkpoint and options in RUN/checkpoint, its training windows and
their order in RUN/data.safetensors). Every process of the torchrun job
reads RUN, takes the run's micro-batches in attnlab's order and keeps its
share of each (the batch must split evenly over the processes), and trains
the decoder below wrapped in torch.nn.parallel.DistributedDataParallel
(gloo backend, CPU): each process scales its summed loss by world size /
the micro-batch's target count, so that DDP's averaging gives attnlab's
gradient of the micro-batch's mean loss; clipping, schedule and AdamW are
attnlab's. Rank 0 writes a checkpoint directory attnlab loads
(config.json and tokenizer.json of the run, model.safetensors in the
dtype) to DIR/checkpoint (default RUN/torch), whole, every K steps and at
the end, and a JSON line per step to --log. With Debian's torch 1.13 on
Python 3.11, give torchrun "--redirects 2 --tee 2": its defaults fail to
parse there.

Training run (the first form). CHECKPOINT is a checkpoint directory as
attnlab's model.Save writes it (config.json and model.safetensors, F32 or
F64, HF LlamaForCausalLM names). The model is torch_oracle.py's decoder (the
code behind its op decoder), in float64, its parameters starting from the
checkpoint. BATCHES holds the data and the hyper-parameters of the run:

  tensors   step.{s}.micro.{k}.tokens, .valid, .targets and optionally .seg,
            I64 [B, T]: micro-batch k of optimiser step s (both from 0).
            The targets must be the shifted labels of tokens, valid and seg
            (attnlab's model.Batch.ShiftedTargets; -100 where no loss), and
            positions are counted over real tokens, restarting at segment
            changes (model.Batch.Positions).
  metadata  steps, accum, lr_peak, lr_min, warmup, total (train.Schedule),
            beta1, beta2, eps, weight_decay, clip (0: no clipping).

Each step does what attnlab's train.Trainer.TrainStep does, the usual PyTorch
way: zero_grad; for each micro-batch, the mean cross-entropy over its counted
targets, backward of loss / accum; clip_grad_norm_(clip) over every
parameter; the learning rate of the step set on every parameter group; step
of torch.optim.AdamW (single-tensor path) with two parameter groups, weight
decay on every matrix but the norms and embeddings (train.DecayFor) and none
on those. The learning rate comes from the metadata: linear warmup to lr_peak
over warmup steps, then cosine decay to lr_min at step total.

OUT receives:

  loss        F64 [steps]  mean over the step's micro-batches of their mean loss
  grad_norm   F64 [steps]  global gradient norm before clipping
  lr          F64 [steps]  learning rate of the step
  tokens      I64 [steps]  targets counted in the step
  weight.<HF name>         every parameter after the last step, as in the
                           checkpoint (a tied LM head is the embedding: one
                           parameter, model.embed_tokens.weight)

Several CHECKPOINT BATCHES OUT triples may be given, so one Python start
serves many runs. Nothing is printed on success; the first error is printed
as one line on stderr, exit status 1, and its OUT file is not written.

Benchmark (bench). CONFIG is a JSON object: config (a LlamaConfig, as
config.json), batch_size, seq_len, segment_length (packed documents of that
many tokens per window), windows, threads, warmup_steps, seed, init_std,
lr_peak, lr_min, warmup, total, beta1, beta2, eps, weight_decay, clip. The
same model is written as nn.Modules in float32, the way Hugging Face's Llama
eager code does it (repeat_kv, matmul, additive causal and segment mask,
softmax, matmul), trained with torch.optim.AdamW (defaults otherwise) and
clip_grad_norm_ on random tokens with torch.set_num_threads(threads).

The timed steps are driven through stdin, so that a caller can interleave
them with its own and both see the same machine load: after warmup_steps,
one JSON line is printed on stdout, {"ready": true, "threads", "torch",
"blas" (the BLAS and LAPACK libraries the process has loaded), "check",
"tokens_per_step"}; then, for each line "step" read on stdin, one timed
training step and one JSON line {"seconds", "loss"}; end of input ends the
run. check is max |a-b|/(1+|b|) between the nn.Module model in float64 and
torch_oracle.py's decoder on the loss and every gradient of one small batch:
the benchmark times the model the oracle defines. By hand:

    yes step | head -20 | /usr/bin/python3 torch_train.py bench CONFIG.json
"""

import json
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_oracle as oracle  # noqa: E402  (sets 1 thread; bench sets its own)
from torch_oracle import OracleError  # noqa: E402

F = torch.nn.functional
IGNORE_INDEX = oracle.IGNORE_INDEX

RUN_META = ["steps", "accum", "lr_peak", "lr_min", "warmup", "total", "beta1", "beta2", "eps", "weight_decay", "clip"]


def decay_for(name):
    """attnlab's train.DecayFor: weight decay on every matrix but the norms and
    the embeddings."""
    return not name.endswith("norm.weight") and "embed_tokens" not in name


def schedule(step, peak, lo, warmup, total):
    """attnlab's train.Schedule.At: the learning rate of step (0-based)."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if step >= total:
        return lo
    progress = (step - warmup) / max(1, total - warmup)
    return lo + 0.5 * (peak - lo) * (1 + math.cos(math.pi * progress))


# ---------------------------------------------------------------- training run


def run_meta(meta):
    m = oracle.parse_meta("training run", meta, {
        "steps": oracle.integer(1),
        "accum": oracle.integer(1),
        "lr_peak": oracle.finite(lambda v: v >= 0, "a finite rate >= 0"),
        "lr_min": oracle.finite(lambda v: v >= 0, "a finite rate >= 0"),
        "warmup": oracle.integer(0),
        "total": oracle.integer(0),
        "beta1": oracle.finite(lambda v: 0 <= v < 1, "a number in [0, 1)"),
        "beta2": oracle.finite(lambda v: 0 <= v < 1, "a number in [0, 1)"),
        "eps": oracle.finite(lambda v: v >= 0, "a finite eps >= 0"),
        "weight_decay": oracle.finite(lambda v: v >= 0, "a finite weight decay >= 0"),
        "clip": oracle.finite(lambda v: v >= 0, "a finite norm >= 0 (0: no clipping)"),
    })
    for key in RUN_META:
        if key not in m:
            raise OracleError("metadata %s: missing" % json.dumps(key))
    return m


def micro_batch(tensors, s, k, c):
    """The tokens, valid, seg (or None) and targets of micro-batch k of step s."""
    pre = "step.%d.micro.%d." % (s, k)
    if pre + "tokens" not in tensors:
        raise OracleError("tensor %s: missing" % json.dumps(pre + "tokens"))
    a = tensors[pre + "tokens"]
    if a.dtype != np.dtype("<i8") or a.ndim != 2 or 0 in a.shape:
        raise OracleError("tensor %s: want I64 [B, T], got %s %s" % (json.dumps(pre + "tokens"), a.dtype, list(a.shape)))
    tokens = torch.from_numpy(a.astype(np.int64))
    B, T = tokens.shape
    valid = oracle.bool_tensor(tensors, pre + "valid", [B, T])
    seg = oracle.int_tensor(tensors, pre + "seg", [B, T])
    targets = oracle.int_tensor(tensors, pre + "targets", [B, T])
    if targets is None:
        raise OracleError("tensor %s: missing" % json.dumps(pre + "targets"))
    V = c["vocab_size"]
    bad = (valid & ((tokens < 0) | (tokens >= V))).reshape(-1)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise OracleError("tensor %s: [%d, %d] = %d is outside the vocabulary [0, %d)"
                          % (json.dumps(pre + "tokens"), i // T, i % T, int(tokens.reshape(-1)[i]), V))
    want = oracle.shifted_targets(tokens, valid, seg)
    if not torch.equal(targets, want):
        i = int((targets != want).reshape(-1).nonzero()[0])
        raise OracleError("tensor %s: [%d, %d] = %d, the shifted labels give %d"
                          % (json.dumps(pre + "targets"), i // T, i % T, int(targets.reshape(-1)[i]), int(want.reshape(-1)[i])))
    return tokens, valid, seg, targets


def decoder_loss(c, params, tokens, valid, seg, targets):
    """torch_oracle.py's decoder on one batch: (mean cross-entropy over the
    counted targets, or None when there is none; their number)."""
    B, T = tokens.shape
    pos = oracle.counted_positions(valid, seg)
    if (pos >= c["max_position_embeddings"]).any():
        raise OracleError("a token is at position %d, beyond max_position_embeddings = %d"
                          % (int(pos.max()), c["max_position_embeddings"]))
    embed = params["model.embed_tokens.weight"]
    x = F.embedding(torch.where(valid, tokens, torch.zeros_like(tokens)), embed)
    vis = oracle.visibility(B, T, T, True, 0, "position", pos, pos, valid, valid, seg, seg)
    live = vis.any(dim=-1)
    if (valid & ~live).any():
        b, i = (int(e) for e in (valid & ~live).nonzero()[0])
        raise OracleError("batch %d, row %d sees no key" % (b, i))
    Hq, Hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    for i in range(c["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        x = oracle.llama_layer(x, {n: params[pre + n] for n in oracle.BLOCK_WEIGHTS}, pos, vis, live, Hq, Hkv, hd, eps, theta)
    x = oracle.rms_norm(x, params["model.norm.weight"], eps)
    logits = F.linear(x, embed if c["tie_word_embeddings"] else params["lm_head.weight"])
    count = int((targets != IGNORE_INDEX).sum())
    if count == 0:  # attnlab: loss 0 and no gradient (F.cross_entropy would give NaN)
        return None, 0
    V = c["vocab_size"]
    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=IGNORE_INDEX), count


def train(ckpt, batches):
    try:
        c, weights = oracle.read_checkpoint(ckpt)
    except OracleError as e:
        raise OracleError("checkpoint %s: %s" % (ckpt, e))
    tensors, meta = oracle.read_safetensors(batches)
    m = run_meta(meta)
    steps, accum = m["steps"], m["accum"]
    known = set()
    for s in range(steps):
        for k in range(accum):
            known.update("step.%d.micro.%d.%s" % (s, k, f) for f in ("tokens", "valid", "seg", "targets"))
    extra = sorted(set(tensors) - known)
    if extra:
        raise OracleError("tensor %s: not an input of a run of %d steps of %d micro-batches" % (json.dumps(extra[0]), steps, accum))

    names = list(weights)  # the checkpoint's order, attnlab's model.Tensors order
    params = {n: torch.nn.Parameter(weights[n]) for n in names}
    groups = [
        {"params": [params[n] for n in names if decay_for(n)], "weight_decay": m["weight_decay"]},
        {"params": [params[n] for n in names if not decay_for(n)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=m["lr_peak"], betas=(m["beta1"], m["beta2"]),
                            eps=m["eps"], foreach=False)
    plist = [params[n] for n in names]
    losses, norms, lrs, counts = [], [], [], []
    for s in range(steps):
        opt.zero_grad(set_to_none=False)
        for p in plist:  # every parameter gets a gradient, zero if the step gives it none
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        loss_sum, count_sum = 0.0, 0
        for k in range(accum):
            loss, count = decoder_loss(c, params, *micro_batch(tensors, s, k, c))
            count_sum += count
            if loss is None:
                continue
            (loss / accum).backward()
            loss_sum += float(loss) / accum
        if m["clip"] > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(plist, m["clip"]))
        else:
            norm = float(torch.norm(torch.stack([torch.norm(p.grad) for p in plist])))
        if not math.isfinite(norm) or not math.isfinite(loss_sum):
            raise OracleError("step %d: loss %r, gradient norm %r: not finite" % (s, loss_sum, norm))
        lr = schedule(s, m["lr_peak"], m["lr_min"], m["warmup"], m["total"])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(loss_sum)
        norms.append(norm)
        lrs.append(lr)
        counts.append(count_sum)

    out = {
        "loss": np.array(losses, dtype=np.float64),
        "grad_norm": np.array(norms, dtype=np.float64),
        "lr": np.array(lrs, dtype=np.float64),
        "tokens": np.array(counts, dtype=np.int64),
    }
    for n in names:
        out["weight." + n] = params[n].detach().numpy()
    return oracle.no_nan(out), {"torch": torch.__version__, "steps": str(steps)}


def main_train(argv):
    if len(argv) < 3 or len(argv) % 3 != 0:
        sys.stderr.write("usage: torch_train.py CHECKPOINT BATCHES.safetensors OUT.safetensors [CHECKPOINT BATCHES OUT ...]\n"
                         "       torch_train.py bench CONFIG.json\n")
        return 2
    for ckpt, batches, dst in zip(argv[0::3], argv[1::3], argv[2::3]):
        try:
            out, meta = train(ckpt, batches)
            oracle.write_safetensors(dst, out, meta)
        except OracleError as e:
            sys.stderr.write("torch_train: %s: %s\n" % (batches, " ".join(str(e).split())))
            return 1
        except Exception as e:  # an I/O error or a bug: still one line, with where it arose
            where = traceback.extract_tb(e.__traceback__)[-1]
            sys.stderr.write("torch_train: %s: %s: %s (at %s:%d)\n" % (
                batches, type(e).__name__, " ".join(str(e).split()), os.path.basename(where.filename), where.lineno))
            return 1
    return 0


# ---------------------------------------------------------------- data-parallel training


class Decoder(torch.nn.Module):
    """torch_oracle.py's decoder as a Module (DistributedDataParallel wraps
    Modules): its parameters under their HF names, dots spelled "__"."""

    def __init__(self, c, weights, dtype):
        super().__init__()
        self.c = c
        self.names = list(weights)  # the checkpoint's order: attnlab's model.Tensors
        self.p = torch.nn.ParameterDict({n.replace(".", "__"): torch.nn.Parameter(weights[n].to(dtype)) for n in self.names})

    def params(self):
        return {n: self.p[n.replace(".", "__")] for n in self.names}

    def forward(self, tokens, valid, seg, targets):
        """The summed cross-entropy over the counted targets, and their count."""
        loss, count = decoder_loss(self.c, self.params(), tokens, valid, seg, targets)
        if loss is None:
            return sum(p.sum() * 0 for p in self.p.values()), 0  # every parameter in the graph
        return loss * count, count


def read_run(run):
    """The prepared run of attnlab train -prepare: (config, weights, state,
    data tensors, data metadata)."""
    ckpt = os.path.join(run, "checkpoint")
    try:
        with open(os.path.join(ckpt, "config.json")) as f:
            kind = json.load(f).get("attnlab_kind", "language-model")
    except OSError as e:
        raise OracleError("%s: %s (want the folder of attnlab train -prepare)" % (ckpt, e.strerror or e))
    if kind != "language-model":
        raise OracleError("%s holds a %s checkpoint, not a language model" % (ckpt, kind))
    c, weights = oracle.read_checkpoint(ckpt)
    with open(os.path.join(ckpt, "trainer_state.json")) as f:
        state = json.load(f)
    data, meta = oracle.read_safetensors(os.path.join(run, "data.safetensors"))
    for name in ("tokens", "valid", "order"):
        if name not in data:
            raise OracleError("%s: tensor %s missing" % (os.path.join(run, "data.safetensors"), json.dumps(name)))
    return c, weights, state, data, meta


class Cursor:
    """attnlab's train.Cursor over the exported epoch orders."""

    def __init__(self, order, epoch=0, nxt=0):
        self.order, self.epoch, self.next = order, epoch, nxt

    def take(self, n):
        out = []
        while len(out) < n:
            if self.next >= self.order.shape[1]:
                self.epoch, self.next = self.epoch + 1, 0
                if self.epoch >= self.order.shape[0]:
                    raise OracleError("the data holds the order of %d epochs; prepare the run for more steps" % self.order.shape[0])
            out.append(int(self.order[self.epoch, self.next]))
            self.next += 1
        return out


def save_checkpoint(dst, src_ckpt, model, c, dtype):
    """Writes the weights as a checkpoint directory attnlab loads (config.json
    and tokenizer.json copied from the run, model.safetensors in the
    dtype), whole: built beside dst and renamed into place."""
    parent = os.path.dirname(os.path.abspath(dst))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(dst) + ".tmp-", dir=parent)
    for name in ("config.json", "tokenizer.json"):
        src = os.path.join(src_ckpt, name)
        if os.path.exists(src):
            with open(src, "rb") as f, open(os.path.join(tmp, name), "wb") as g:
                g.write(f.read())
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    weights = {n: t.detach().numpy().astype(np_dtype) for n, t in model.params().items()}
    oracle.write_safetensors(os.path.join(tmp, "model.safetensors"), weights, {"format": "pt"})
    old = None
    if os.path.exists(dst):
        old = tmp + ".old"
        os.rename(dst, old)
    os.rename(tmp, dst)
    if old:
        import shutil
        shutil.rmtree(old)


def ddp(argv):
    """The ddp subcommand: see the module documentation."""
    import argparse
    import torch.distributed as dist
    ap = argparse.ArgumentParser(prog="torch_train.py ddp")
    ap.add_argument("--run", required=True, help="the folder of attnlab train -prepare")
    ap.add_argument("--out", help="where checkpoints go (default RUN/torch)")
    ap.add_argument("--steps", type=int, help="optimiser steps (default: the run's)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--save-every", type=int, default=0, help="checkpoint every N steps (0: at the end only)")
    ap.add_argument("--log", help="a JSON line per step: step, loss, grad_norm, lr, tokens (rank 0)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = torch.float32 if a.dtype == "float32" else torch.float64
    c, weights, state, data, meta = read_run(a.run)
    o = state["options"]
    B, accum = o["BatchSize"], o["Accum"]
    if B % world != 0:
        raise OracleError("the run's batch of %d windows does not split over %d processes" % (B, world))
    per = B // world
    steps = a.steps if a.steps is not None else o["Steps"]
    sch = o["Schedule"]
    tokens = torch.from_numpy(data["tokens"].astype(np.int64))
    valid = torch.from_numpy(data["valid"].astype(np.int64)) != 0
    seg = torch.from_numpy(data["seg"].astype(np.int64)) if "seg" in data else None
    cursor = Cursor(data["order"], state["epoch"], state["next"])

    model = Decoder(c, weights, dtype)
    net = torch.nn.parallel.DistributedDataParallel(model)
    names = model.names
    params = model.params()
    decay_all = o.get("DecayAll", False)
    groups = [
        {"params": [params[n] for n in names if decay_all or decay_for(n)], "weight_decay": o["WeightDecay"]},
        {"params": [params[n] for n in names if not (decay_all or decay_for(n))], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=sch["Peak"], betas=(o["Beta1"], o["Beta2"]),
                            eps=o["Eps"], foreach=False)
    plist = [params[n] for n in names]
    out = a.out or os.path.join(a.run, "torch")
    log = open(a.log, "w") if a.log and rank == 0 else None
    start = state["step"]
    for s in range(start, start + steps):
        opt.zero_grad(set_to_none=False)
        loss_sum, count_sum = 0.0, 0
        for k in range(accum):
            idx = cursor.take(B)[rank * per:(rank + 1) * per]  # every rank draws the whole micro-batch, keeps its part
            t, v = tokens[idx], valid[idx]
            g = seg[idx] if seg is not None else None
            targets = oracle.shifted_targets(t, v, g)
            local = torch.tensor([float((targets != IGNORE_INDEX).sum())], dtype=torch.float64)
            dist.all_reduce(local)  # the micro-batch's targets over all ranks
            count = int(local.item())
            ctx = net.no_sync() if k < accum - 1 else _nullcontext()
            with ctx:
                lsum, n = net(t, v, g, targets)
                # attnlab's loss is the micro-batch's mean over all its
                # targets; DDP averages the ranks' gradients, so each rank
                # scales its sum by world / count
                scaled = lsum * (world / max(count, 1)) / accum
                scaled.backward()
            total = torch.tensor([float(lsum.detach())], dtype=torch.float64)
            dist.all_reduce(total)
            if count > 0:
                loss_sum += float(total.item()) / count / accum
            count_sum += count
        if o["Clip"] > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(plist, o["Clip"]))
        else:
            norm = float(torch.norm(torch.stack([torch.norm(p.grad) for p in plist])))
        if not math.isfinite(norm) or not math.isfinite(loss_sum):
            raise OracleError("step %d: loss %r, gradient norm %r: not finite" % (s + 1, loss_sum, norm))
        lr = schedule(s, sch["Peak"], sch["Min"], sch["Warmup"], sch["Total"])
        for grp in opt.param_groups:
            grp["lr"] = lr
        opt.step()
        if log:
            log.write(json.dumps({"step": s + 1, "loss": loss_sum, "grad_norm": norm, "lr": lr, "tokens": count_sum}) + "\n")
            log.flush()
        if rank == 0 and a.save_every and (s + 1) % a.save_every == 0:
            save_checkpoint(os.path.join(out, "checkpoint"), os.path.join(a.run, "checkpoint"), model, c, dtype)
    if rank == 0:
        save_checkpoint(os.path.join(out, "checkpoint"), os.path.join(a.run, "checkpoint"), model, c, dtype)
    dist.barrier()
    dist.destroy_process_group()
    return 0


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main_ddp(argv):
    try:
        return ddp(argv)
    except OracleError as e:
        sys.stderr.write("torch_train ddp: %s\n" % " ".join(str(e).split()))
        return 1


# ---------------------------------------------------------------- benchmark


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Attention(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        D, self.Hq, self.Hkv, self.hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = torch.nn.Linear(D, self.Hq * self.hd, bias=False)
        self.k_proj = torch.nn.Linear(D, self.Hkv * self.hd, bias=False)
        self.v_proj = torch.nn.Linear(D, self.Hkv * self.hd, bias=False)
        self.o_proj = torch.nn.Linear(self.Hq * self.hd, D, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.Hq, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.Hkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.Hkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = oracle.repeat_kv(k, self.Hq // self.Hkv)
        v = oracle.repeat_kv(v, self.Hq // self.Hkv)
        s = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5 + mask
        # in float32 at least, as HF upcasts half precision
        p = torch.softmax(s, dim=-1, dtype=torch.promote_types(s.dtype, torch.float32)).to(q.dtype)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, T, self.Hq * self.hd)
        return self.o_proj(o)


class MLP(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        D, Fd = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = torch.nn.Linear(D, Fd, bias=False)
        self.up_proj = torch.nn.Linear(D, Fd, bias=False)
        self.down_proj = torch.nn.Linear(Fd, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = torch.nn.ModuleList(DecoderLayer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class LlamaForCausalLM(torch.nn.Module):
    """HF's LlamaForCausalLM, parameters under the same names, for packed rows
    with no padding: attention is causal within a segment and positions
    restart at each segment."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = LlamaModel(c)
        self.lm_head = torch.nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight
        hd = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)),
                             persistent=False)

    def forward(self, tokens, seg, targets):
        B, T = tokens.shape
        dtype = self.model.embed_tokens.weight.dtype
        idx = torch.arange(T)
        starts = torch.ones(B, T, dtype=torch.bool)
        starts[:, 1:] = seg[:, 1:] != seg[:, :-1]
        pos = idx - torch.cummax(torch.where(starts, idx, torch.zeros_like(idx)), dim=1).values
        angles = pos.to(torch.float64)[..., None] * self.inv_freq
        emb = torch.cat((angles, angles), dim=-1)[:, None]  # [B, 1, T, hd]
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        vis = (seg[:, :, None] == seg[:, None, :]) & (idx[:, None] >= idx[None, :])
        mask = torch.zeros(B, 1, T, T, dtype=dtype).masked_fill(~vis[:, None], torch.finfo(dtype).min)
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        logits = self.lm_head(self.model.norm(x))
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), ignore_index=IGNORE_INDEX)


def init_module(model, std, gen):
    """HF's _init_weights: N(0, std²) for linear layers and the embedding, 1 for norms."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * std)


def packed_batch(B, T, V, seg_len, gen):
    tokens = torch.randint(0, V, (B, T), generator=gen)
    seg = (torch.arange(T) // seg_len).expand(B, T).contiguous()
    targets = oracle.shifted_targets(tokens, torch.ones(B, T, dtype=torch.bool), seg)
    return tokens, seg, targets


def module_check(c, std, seg_len):
    """max |a-b|/(1+|b|) over the loss and every gradient between the nn.Module
    model in float64 and torch_oracle.py's decoder, on one small packed batch."""
    gen = torch.Generator().manual_seed(7)
    model = LlamaForCausalLM(c).double()
    init_module(model, std, gen)
    T = min(64, c["max_position_embeddings"])
    tokens, seg, targets = packed_batch(2, T, c["vocab_size"], min(seg_len, T // 2), gen)
    loss = model(tokens, seg, targets)
    loss.backward()
    named = dict(model.named_parameters())
    params = {n: p.detach().clone().requires_grad_(True) for n, p in named.items()}
    ref, _ = decoder_loss(c, params, tokens, torch.ones_like(tokens, dtype=torch.bool), seg, targets)
    ref.backward()
    worst = abs(float(loss) - float(ref)) / (1 + abs(float(ref)))
    for n, p in named.items():
        worst = max(worst, float(((p.grad - params[n].grad).abs() / (1 + params[n].grad.abs())).max()))
    return worst


def loaded_blas():
    """The BLAS/LAPACK libraries mapped into this process, by their real paths."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            base = os.path.basename(path).lower()
            if path.startswith("/") and any(k in base for k in ("blas", "lapack", "blis", "mkl", "atlas")):
                libs.add(os.path.realpath(path))
    return sorted(libs)


def bench(path, stdin, stdout):
    with open(path) as f:
        cfg = json.load(f)
    with tempfile.TemporaryDirectory() as d:  # read_config reads a config.json file
        cpath = os.path.join(d, "config.json")
        with open(cpath, "w") as f:
            json.dump(cfg["config"], f)
        c = oracle.read_config(cpath)
    torch.set_num_threads(int(cfg["threads"]))
    B, T, seg_len = cfg["batch_size"], cfg["seq_len"], cfg["segment_length"]
    check = module_check(c, cfg["init_std"], seg_len)

    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    model = LlamaForCausalLM(c)  # float32
    init_module(model, cfg["init_std"], gen)
    named = list(model.named_parameters())
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if decay_for(n)], "weight_decay": cfg["weight_decay"]},
        {"params": [p for n, p in named if not decay_for(n)], "weight_decay": 0.0},
    ], lr=cfg["lr_peak"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    data = [packed_batch(B, T, c["vocab_size"], seg_len, gen) for _ in range(max(1, cfg["windows"] // B))]

    def step(i):
        tokens, seg, targets = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, seg, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
        lr = schedule(i, cfg["lr_peak"], cfg["lr_min"], cfg["warmup"], cfg["total"])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        return float(loss)

    def say(obj):
        stdout.write(json.dumps(obj) + "\n")
        stdout.flush()

    for i in range(cfg["warmup_steps"]):
        step(i)
    say({"ready": True, "threads": torch.get_num_threads(), "torch": torch.__version__, "blas": loaded_blas(),
         "check": check, "tokens_per_step": B * T})
    i = cfg["warmup_steps"]
    for line in stdin:
        if line.strip() != "step":
            raise OracleError("stdin: %s, want step" % json.dumps(line.strip()))
        t0 = time.perf_counter()
        loss = step(i)
        dt = time.perf_counter() - t0
        if not math.isfinite(loss):
            raise OracleError("loss %r after %d steps: not finite" % (loss, i + 1))
        say({"seconds": dt, "loss": loss})
        i += 1


def main_bench(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: torch_train.py bench CONFIG.json\n")
        return 2
    try:
        bench(argv[0], sys.stdin, sys.stdout)
    except BrokenPipeError:
        return 1
    except Exception as e:
        where = traceback.extract_tb(e.__traceback__)[-1]
        sys.stderr.write("torch_train: bench %s: %s: %s (at %s:%d)\n" % (
            argv[0], type(e).__name__, " ".join(str(e).split()), os.path.basename(where.filename), where.lineno))
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["bench"]:
        sys.exit(main_bench(sys.argv[2:]))
    if sys.argv[1:2] == ["ddp"]:
        sys.exit(main_ddp(sys.argv[2:]))
    sys.exit(main_train(sys.argv[1:]))
