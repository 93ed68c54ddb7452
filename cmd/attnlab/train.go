package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/attnlab/attnlab/corpus"
	"io"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/train"
)

var trainCmd = register(&command{
	name:  "train",
	usage: "[-src DIR] [-out DIR] [-steps N] [-resume | -force] [model and optimiser flags]",
	short: "train the Llama-style model from scratch on Go source",
	long: `Train trains a small Llama-style model from scratch on Go source code: by
default the non-test .go files of the local Go installation ($GOROOT/src),
with whole packages held out for validation. It trains a byte-level BPE
tokenizer on the training files (or loads -tokenizer), packs documents into
windows with segment ids so that they never attend to each other, and runs
AdamW with warmup and cosine decay, gradient clipping and accumulation.

It shows a progress bar (a line every 30 s when stderr is not a terminal),
writes OUT/curves.csv and OUT/loss.png, and checkpoints OUT/checkpoint
every -save-every steps (atomically: a checkpoint is complete or absent).

An OUT that holds a run is refused: -resume continues it exactly where its
checkpoint left off, -force starts over. Ctrl-C or SIGTERM stops after the
current step and saves (exit 130 or 143); an interrupt before the first
step writes nothing. A NaN or infinite loss stops the run and says which
checkpoint is kept (the last good one; with none saved, nothing of the run
is left). -resume checks that the data, the options and the saved state are
the run's, naming what differs.

At the end it reports validation bits per byte on the held-out bytes, beside
gzip -9, zstd -19 and xz -9e on the same bytes (those installed), and writes
them with the run's options and its time to OUT/result.json, which only a
finished run's folder holds.

Example: attnlab train -out run1`,
	define: trainFlags,
})

func trainFlags(fs *flag.FlagSet) runFunc {
	o := new(train.DefaultRunOptions()) // each flag's default is the value o starts with
	fs.StringVar(&o.Src, "src", o.Src, "folder of Go source (default: $(go env GOROOT)/src)")
	fs.StringVar(&o.Corpus, "corpus", o.Corpus, "folder of Debian Go packages (attnlab corpus fetch) read after -src")
	fs.Float64Var(&o.TokenizerMB, "tokenizer-mb", o.TokenizerMB, "train the tokenizer on a seeded sample of this many MB of the training files (0: all)")
	fs.StringVar(&o.Out, "out", o.Out, "output folder: checkpoint, curves, plot")
	fs.Float64Var(&o.CorpusMB, "corpus-mb", o.CorpusMB, "use at most this many MB of source files (a seeded sample of files; 0: all)")
	fs.Float64Var(&o.ValFrac, "val-frac", o.ValFrac, "share of packages held out (by a hash of the import path)")
	fs.IntVar(&o.ValKB, "val-kb", o.ValKB, "validate on at most this many KB of held-out source")
	fs.StringVar(&o.Tokenizer, "tokenizer", o.Tokenizer, "tokenizer.json to use instead of training one")
	fs.IntVar(&o.Vocab, "vocab", o.Vocab, "tokenizer vocabulary size")
	fs.IntVar(&o.Model.HiddenSize, "dim", o.Model.HiddenSize, "model width (hidden_size)")
	fs.IntVar(&o.Model.NumHiddenLayers, "layers", o.Model.NumHiddenLayers, "blocks")
	fs.IntVar(&o.Model.NumAttentionHeads, "heads", o.Model.NumAttentionHeads, "query heads")
	fs.IntVar(&o.Model.NumKeyValueHeads, "kv-heads", o.Model.NumKeyValueHeads, "key/value heads")
	fs.IntVar(&o.Model.IntermediateSize, "ffn", o.Model.IntermediateSize, "SwiGLU hidden width (intermediate_size)")
	fs.IntVar(&o.Window, "window", o.Window, "tokens per training window")
	fs.IntVar(&o.BatchSize, "batch", o.BatchSize, "windows per micro-batch")
	fs.IntVar(&o.Accum, "accum", o.Accum, "micro-batches per optimiser step")
	fs.IntVar(&o.Shards, "shards", o.Shards, "split each micro-batch into this many parts trained at once, one core each (the result depends on the number, not on the cores)")
	fs.IntVar(&o.Steps, "steps", o.Steps, "optimiser steps")
	fs.Float64Var(&o.Schedule.Peak, "lr", o.Schedule.Peak, "peak learning rate (> 0)")
	fs.Float64Var(&o.Schedule.Min, "min-lr", o.Schedule.Min, "final learning rate")
	fs.IntVar(&o.Schedule.Warmup, "warmup", o.Schedule.Warmup, "warmup steps")
	fs.Float64Var(&o.WeightDecay, "wd", o.WeightDecay, "weight decay (not on norms and embeddings)")
	fs.Float64Var(&o.Clip, "clip", o.Clip, "global gradient-norm clip (0: none)")
	fs.Float64Var(&o.InitStd, "init-std", o.InitStd, "standard deviation of the initial weights")
	fs.BoolVar(&o.NoPack, "no-pack", o.NoPack, "one document per window (truncated) instead of packing")
	fs.IntVar(&o.EvalEvery, "eval-every", o.EvalEvery, "validate every N steps")
	fs.IntVar(&o.SaveEvery, "save-every", o.SaveEvery, "checkpoint every N steps")
	oldName(fs, "ckpt-every", "save-every")
	fs.BoolVar(&o.Resume, "resume", o.Resume, "continue the run in OUT")
	fs.BoolVar(&o.Force, "force", o.Force, "start over in an OUT that holds a run")
	fs.BoolVar(&o.Prepare, "prepare", o.Prepare, "write the step-0 checkpoint and the training windows (OUT/data.safetensors) and stop: the input of the PyTorch trainer (python/torch_train.py ddp)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for initialisation, data order and sampling of files")
	fs.BoolVar(&o.CheckpointActivations, "checkpoint-activations", o.CheckpointActivations, "recompute each block's activations in the backward (less memory, same gradients)")
	quiet := fs.Bool("quiet", false, "no progress")
	preset := fs.String("preset", "", "a documented recipe of flag values (flags given explicitly win): "+strings.Join(train.PresetNames(), ", "))
	return func(ctx context.Context, args []string, stdout io.Writer) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *preset != "" {
			given := givenFlags(fs)
			if err := train.ApplyPreset(*preset, given, fs.Set); err != nil {
				return usageError{err.Error()}
			}
		}
		o.Derive()
		if o.Src == "" {
			o.Src = filepath.Join(corpus.GoRoot(), "src")
		}
		if err := o.Validate(); err != nil {
			return usageError{err.Error()}
		}
		if o.Out == "" {
			return usagef(`-out "": want the run's folder`)
		}
		return runTrain(ctx, o, *quiet, stdout)
	}
}

func runTrain(ctx context.Context, o *train.RunOptions, quiet bool, stdout io.Writer) error {
	bar := newProgress(o.Steps, "training", quiet)
	res, err := train.Run(ctx, *o, train.Events{
		Log:      func(msg string) { fmt.Fprintln(stdout, msg) },
		Progress: bar.trainProgress(),
	})
	if ctx.Err() != nil {
		if res == nil || res.Loop.Steps() == 0 {
			fmt.Fprintf(stdout, "interrupted before the first step: nothing written\n")
		} else {
			fmt.Fprintf(stdout, "interrupted at step %d: checkpoint saved in %s; continue with -resume\n", res.Loop.To, res.Checkpoint)
		}
		return err
	}
	if err != nil {
		return err
	}
	if o.Prepare {
		fmt.Fprintf(stdout, "prepared: the step-0 checkpoint %s and the training windows %s\n", res.Checkpoint, filepath.Join(o.Out, train.DataFile))
		return nil
	}
	l := res.Loop
	if l.Steps() == 0 {
		fmt.Fprintf(stdout, "the run in %s is already at step %d of %d: nothing to do\n", o.Out, l.To, o.Steps)
		return nil
	}
	fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); train loss %.3f → %.3f; validation loss %.3f nats/token\n",
		l.Steps(), l.Time.Seconds(), float64(l.Steps()*o.BatchSize*o.Accum*o.Window)/l.Time.Seconds(), l.First["loss"], l.Last["loss"], res.ValLoss)
	fmt.Fprintf(stdout, "held-out %d bytes: attnlab %.3f bits/byte", res.ValBytes, res.ValBPB)
	for _, c := range res.Compressors {
		fmt.Fprintf(stdout, ", %s %.3f", c.Tool, c.BitsPerByte)
	}
	fmt.Fprintf(stdout, "\ncheckpoint: %s; curves: %s\n", res.Checkpoint, filepath.Join(o.Out, train.CurvesFile))
	return nil
}
