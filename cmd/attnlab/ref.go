package main

import (
	"context"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

var refCmd = register(&command{
	name:  "ref",
	usage: "-op OP -in IN.safetensors -out OUT.safetensors [-dtype float64|float32]",
	short: "reference oracle: run an op on tensors from a safetensors file",
	long: `Ref reads named tensors (F32, F64; integer tensors as I64) and string
metadata from a safetensors file, runs the reference forward and backward,
and writes outputs and gradients to another safetensors file. Computation
runs in float64 unless -dtype float32, which writes F32 outputs. Bad input
(a missing or misshapen tensor, a NaN or infinite input, a bad or unknown
metadata key, a tensor the op does not read, such as a misspelt "sink"
beside attention's sinks and alibi_slopes) gives a one-line error
naming the tensor or key and exit status 1, and OUT is not written. So does
an output that overflows to NaN or infinity from finite inputs (the error
names the output tensor); the only non-finite answer is attention's lse =
+Inf of a padding query row. An existing OUT is refused unless -force, and OUT
may never be IN.
Metadata keys starting with x- are ignored.

Gradients are computed when the output gradient (do or dy) is given. The
gradient of an activation input NAME is written as dNAME (x -> dx); the
gradient of a weight NAME as grad.NAME (w -> grad.w), so that output names
never repeat input names.

Op attention: inputs q [B,Hq,M,D], k [B,Hkv,N,D], v [B,Hkv,N,Dv] and, for
gradients, do [B,Hq,M,Dv]; optional I64 q_pos, q_valid, q_seg [B,M] and
k_pos, k_valid, k_seg [B,N]; metadata causal (true/false), window, scale,
convention (position, bottom-right, top-left). Outputs o, lse and, when do is
given, dq, dk, dv.

Op rope: inputs x [B,H,T,D] (D even), optional I64 pos [B,T] (default: token
t at position t; no negatives), optional dy [B,H,T,D]; metadata pairing
(half: k with k+D/2, the default, HF Llama; interleaved: 2k with 2k+1), base
(default 10000), scaling (none, linear, ntk) and factor (>= 1, required with
linear or ntk scaling). Outputs y and, with dy, dx.

Op rmsnorm: inputs x [...,D] (rows of D; leading dimensions are flattened),
w [D], optional dy (the shape of x); metadata eps (>= 0, default 1e-6).
Outputs y, rstd (the shape of x without D: 1/sqrt(mean(x^2)+eps)) and, with
dy, dx and grad.w.

Op swiglu: y = down(silu(gate(x)) * up(x)). Inputs x [...,D], gate_proj
[F,D], up_proj [F,D], down_proj [D,F], optional dy (the shape of x). Outputs
y and, with dy, dx, grad.gate_proj, grad.up_proj, grad.down_proj.

Op block: one pre-norm Llama decoder layer (HF LlamaDecoderLayer),
  h = x + o_proj(attention(RoPE(q_proj(n)), RoPE(k_proj(n)), v_proj(n))),
  n = input_layernorm(x);  y = h + mlp(post_attention_layernorm(h)),
with half RoPE pairing. Inputs x [B,T,Dim] and the weights under HF names
without the "model.layers.{i}." prefix: input_layernorm.weight [Dim],
self_attn.q_proj.weight [Hq*hd,Dim], self_attn.k_proj.weight and
self_attn.v_proj.weight [Hkv*hd,Dim], self_attn.o_proj.weight [Dim,Hq*hd],
post_attention_layernorm.weight [Dim], mlp.gate_proj.weight and
mlp.up_proj.weight [F,Dim], mlp.down_proj.weight [Dim,F]; optional I64 pos
(default t, as HF without position_ids: give pos for left padding), valid
(1 real, 0 padding) and seg [B,T], which serve queries and keys alike
(self-attention), and dy [B,T,Dim]. Metadata
num_attention_heads (Hq, required), num_key_value_heads (Hkv, dividing Hq;
default Hq), head_dim (hd, even; default Dim/Hq), rms_norm_eps (default
1e-6), rope_theta (default 10000), causal (default true), window (default
0: none). A padding token's attention output is zero. Outputs y and, with
dy, dx and grad.<weight name> for each weight.

Op decoder: the whole language model of a checkpoint directory
(config.json with LlamaConfig fields, model.safetensors with the tensor
names of HF LlamaForCausalLM, F32 or F64), whose path is the metadata key
checkpoint: relative to the directory of IN, or absolute. Inputs I64
tokens [B,T] and optional I64 [B,T] targets (-100: no loss; default: the
shifted labels, token t+1 of the same row and segment, none for padding and
for the last token of a row or document), valid (1 real, 0 padding, which
may hold any id), seg (packed documents) and pos (default: counted over
real tokens from 0, restarting where seg changes). Attention is causal by
position, within a segment, over real tokens. The loss is the mean
cross-entropy over the targets other than -100 (0, with zero gradients,
when there are none); backward always runs, from the loss. Real tokens
and targets must lie in [0, vocab_size), positions in
[0, max_position_embeddings), and a padding token takes no target.
Outputs logits [B,T,V], loss (a scalar, shape []), I64 count (a scalar:
the number of counted targets) and grad.<HF name> for every parameter
(grad.model.layers.0.self_attn.q_proj.weight, ...; with tied embeddings
the head's gradient is part of grad.model.embed_tokens.weight).

Example: attnlab ref -op block -in layer.safetensors -out result.safetensors`,
})

type refOpts struct {
	op, in, out, dtype string
	force              bool
}

func init() {
	refCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &refOpts{}
		fs.StringVar(&o.op, "op", "", "operation: attention, rope, rmsnorm, swiglu, block or decoder")
		fs.StringVar(&o.in, "in", "", "input safetensors file")
		fs.StringVar(&o.out, "out", "", "output safetensors file (an existing one is refused unless -force)")
		fs.StringVar(&o.dtype, "dtype", "float64", "computation dtype: float64 or float32")
		fs.BoolVar(&o.force, "force", false, "replace an existing -out file")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runRef(ctx, o)
		}
	}
}

func runRef(ctx context.Context, o *refOpts) error {
	switch {
	case o.op == "":
		return usageError{"-op is required"}
	case !slices.Contains(oracle.Ops, o.op):
		return usagef("-op %q: want one of %s", o.op, strings.Join(oracle.Ops, ", "))
	}
	var err error
	if o.dtype, err = dtypeName(o.dtype, "float64", "float32"); err != nil {
		return err
	}
	switch {
	case o.in == "":
		return usageError{"-in is required"}
	case o.out == "":
		return usageError{"-out is required"}
	}
	claim, err := output.Target{Path: o.out, Flag: "-out", Replace: o.force, Inputs: []string{o.in}}.ClaimFile()
	if err != nil {
		return err
	}
	defer claim.Release()
	if err := writable("-out", o.out, false); err != nil {
		return err
	}
	// -in may be a FIFO, whose open waits for a writer: an interrupt
	// stops the wait
	out, err := await(ctx, func() (*safetensors.File, error) {
		in, err := safetensors.ReadFile(o.in)
		if err != nil {
			return nil, err
		}
		if err := claim.CheckInputs(oracle.InputPaths(filepath.Dir(o.in), o.op, in)...); err != nil {
			return nil, err
		}
		return oracle.RunAt(filepath.Dir(o.in), o.op, in, o.dtype)
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return safetensors.WriteFile(o.out, out)
}
