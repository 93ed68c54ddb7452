package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/safetensors"
)

var convertCmd = register(&command{
	name:  "convert",
	usage: "-in DIR -out DIR -dtype float32|float64|bfloat16|float16 [-force]",
	short: "copy a checkpoint with its weights in another dtype (bfloat16, float16: half the size of float32)",
	long: `Convert copies the checkpoint folder -in (a language model, dual encoder or
reranker: config.json, model.safetensors, tokenizer.json, dense.json,
rerank.json, score.safetensors, …) to -out, with the floating-point tensors
of every .safetensors file stored as -dtype: float32, float64, bfloat16 or
float16 (IEEE half precision), PyTorch's names (the short f32, f64, bf16,
f16 are still read, with a note). Integer tensors, metadata and the other files
are copied as they are. Narrowing rounds each value to the nearest, ties to
even; a value beyond the range of -dtype (65504 for float16) is an error naming
the file, the tensor and the element. Every command that loads a
checkpoint reads the converted one, widening its values exactly.

-in must hold only files (an index folder, with its encoder/ inside, is
refused). An existing -out is refused unless -force; -out may never be
-in, lie inside it or hold it. The copy is written beside -out and renamed
into place, so a failed or interrupted conversion leaves no half folder.
It prints one line: the files, the tensors converted and the bytes before
and after.

Example: attnlab convert -in run1/checkpoint -out run1-bf16 -dtype bfloat16`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &convertOpts{}
		fs.StringVar(&o.in, "in", "", "checkpoint folder to convert (required)")
		fs.StringVar(&o.out, "out", "", "folder to write (required; an existing one is refused unless -force)")
		fs.StringVar(&o.dtype, "dtype", "", "dtype of the floating-point tensors: float32, float64, bfloat16 or float16 (required; f32, f64, bf16, f16 still read)")
		fs.BoolVar(&o.force, "force", false, "replace an existing -out folder")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runConvert(ctx, o, stdout)
		}
	},
})

type convertOpts struct {
	in, out, dtype string
	force          bool
}

func runConvert(ctx context.Context, o *convertOpts, stdout io.Writer) error {
	switch {
	case o.in == "":
		return usagef("-in is required")
	case o.out == "":
		return usagef("-out is required")
	case o.dtype == "":
		return usagef("-dtype is required: %s", orList(dtypeNames))
	}
	name, err := dtypeName(o.dtype)
	if err != nil {
		return err
	}
	d := map[string]safetensors.DType{"float32": safetensors.F32, "float64": safetensors.F64, "bfloat16": safetensors.BF16, "float16": safetensors.F16}[name]
	// a new -out inside -in would become part of the checkpoint it copies
	if output.Inside(o.out, o.in) {
		return usagef("-out %s lies inside the input %s: write the copy elsewhere", o.out, o.in)
	}
	claim, err := output.Target{Path: o.out, Flag: "-out", Replace: o.force, Inputs: []string{o.in}}.ClaimDir()
	if err != nil {
		return err
	}
	defer claim.Release()
	if err := writable("-out", o.out, true); err != nil {
		return err
	}
	c, err := model.Convert(ctx, o.in, o.out, d)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s → %s: %d files, %d tensors to %s, %d → %d bytes (%.0f%%)\n",
		o.in, o.out, c.Files, c.Tensors, d, c.InBytes, c.OutBytes, 100*float64(c.OutBytes)/float64(max(c.InBytes, 1)))
	return nil
}
