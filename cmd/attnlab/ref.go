package main

import (
	"context"
	"io"

	"github.com/attnlab/attnlab/internal/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

var refCmd = register(&command{
	name:  "ref",
	usage: "-op OP -in IN.safetensors -out OUT.safetensors [-dtype float64|float32]",
	short: "reference oracle: run an op on tensors from a safetensors file",
	long: `Ref reads named tensors (F32, F64; integer tensors as I64) and string
metadata from a safetensors file, runs the reference forward and backward,
and writes outputs and gradients to another safetensors file. Bad input gives
a one-line error naming the tensor and exit status 1, and OUT is not written.

Op attention: inputs q [B,Hq,M,D], k [B,Hkv,N,D], v [B,Hkv,N,Dv] and, for
gradients, do [B,Hq,M,Dv]; optional I64 q_pos, q_valid, q_seg [B,M] and
k_pos, k_valid, k_seg [B,N]; metadata causal (true/false), window, scale,
convention (position, bottom-right, top-left). Outputs o, lse and, when do is
given, dq, dk, dv. Computation runs in float64 unless -dtype float32.

Example: attnlab ref -op attention -in case.safetensors -out result.safetensors`,
})

var (
	refOp    = refCmd.flags.String("op", "", "operation: attention")
	refIn    = refCmd.flags.String("in", "", "input safetensors file")
	refOut   = refCmd.flags.String("out", "", "output safetensors file")
	refDtype = refCmd.flags.String("dtype", "float64", "computation dtype: float64 or float32")
)

func init() { refCmd.run = runRef }

func runRef(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	switch {
	case *refOp == "":
		return usageError{"-op is required"}
	case *refIn == "":
		return usageError{"-in is required"}
	case *refOut == "":
		return usageError{"-out is required"}
	}
	in, err := safetensors.ReadFile(*refIn)
	if err != nil {
		return err
	}
	out, err := oracle.Run(*refOp, in, *refDtype)
	if err != nil {
		return err
	}
	return safetensors.WriteFile(*refOut, out)
}
