package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/attnlab/attnlab/conform"
)

var conformCmd = register(&command{
	name:  "conform",
	usage: `-exec NAME|"CMD ARGS" | -impl reference|fused | -list  [-against NAME|"CMD ARGS" [-repro DIR [-force]]] [-contract position|bottom-right|top-left] [-json] [-timeout D]`,
	short: "run the lab's attention checks on another implementation and print its semantics card",
	long: `Conform runs the lab's attention checks on an implementation that is not
attnlab's: -exec starts an adapter process that speaks the protocol of
docs/conform-protocol.md, either a shipped adapter by name (-list shows them:
PyTorch, ONNX Runtime and TF.js adapters, embedded in attnlab and run from any
folder) or any program with its arguments (a Go example is in
examples/conform-go/); -impl picks one of attnlab's own kernels instead.

It first measures the semantics card: where the causal diagonal sits for
M < N (a chunk after a cache) and M > N (position, bottom-right, top-left,
other); what a valid query row that sees no key gets (error, zero, nan,
uniform, other) and whether the backward there is the derivative of that
forward; what padding rows get; the GQA head mapping (contiguous,
interleaved, unsupported); the default scale; and the float32 error against
attnlab's float64 reference over that of a plain float32 implementation;
and for sinks, softcap and ALiBi (docs/design.md §3.1) whether each is
supported or not declared, then: with sinks, what a valid row with no
visible key gets (zero, as defined; error; other) and whether dσ comes back
right (returned, missing, wrong); whether softcap comes before the mask (a
masked key stays masked: before-mask, after-mask); and whether ALiBi's
distance is by positions or slots (a chunk after a cache with q = 0).
Then it runs every check of the attention suite that the implementation's
declared capabilities allow, then those of the variants (variants/…) where
it declares the variants they use, under the conventions the card measured
(an interleaved head mapping, a default scale of 1/D), and compares its
answers with attnlab's float64 reference.

The verdict: conformant when every check within what the implementation
declares ran and passed, its causal alignments (M < N, M > N, M = 1) are
the -contract's, a valid row with no visible key is an error wherever it
sits (DESIGN §2: never NaN, never a silent zero row), a window of W sees W
keys, extreme logits and the cache layouts give the reference's answers,
and each declared variant gives the card rows §3.1 defines; not conformant when any is measured otherwise; NOT ESTABLISHED
when a check it should answer could not be run, or none ran. What it does
not declare is listed as not covered: a skipped check never counts as a
pass.

With -against, a differential run: the implementation of -exec or -impl
(A) and that of -against (B) are both run as above, then every request made
to A that B declares it can take is replayed on B, and only where the two
differ is printed: card fields, check statuses, and how many answers differ,
with the first of them. -repro DIR writes that first differing request to
the new folder DIR (request.safetensors as the protocol sends it, both
answers, a README); an existing result there is refused unless -force.
This is how version drift and flag-dependent semantics are found.

The adapter runs in a process group of its own, ended whole when the run
ends; after its input closes it must exit 0.

Exit status: 0 conformant (with -against: the two agree), 1 not conformant
or not established (with -against: they differ), 2 usage, 3 an adapter
failed (crashed, hung past -timeout, closed its output, answered outside
the protocol, refused what it declares, or exited non-zero at the end: the
error names the adapter and the request).

Example: attnlab conform -exec torch-composite -against ort-attention -repro drift`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &conformOpts{}
		fs.StringVar(&o.exe, "exec", "", "the adapter: a shipped adapter's name (-list), or a command split into words like a shell does")
		fs.StringVar(&o.impl, "impl", "", "one of attnlab's kernels instead of an adapter: reference or fused")
		list := fs.Bool("list", false, "list the shipped adapters, what each runs and whether its runtime is installed here")
		fs.StringVar(&o.against, "against", "", "a second adapter, as -exec takes it: print only where the two differ")
		fs.StringVar(&o.repro, "repro", "", "with -against: write the first request they answer differently to this new folder")
		fs.BoolVar(&o.force, "force", false, "with -repro: replace what the folder holds")
		fs.StringVar(&o.contract, "contract", conform.AlignPosition, "the causal alignment to hold it to: "+strings.Join(conform.Contracts, ", "))
		fs.BoolVar(&o.asJSON, "json", false, "print the report (with -against: the differences) as JSON")
		fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "longest wait for one answer of the adapter")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if *list {
				if o.exe != "" || o.impl != "" || o.against != "" {
					return usagef("-list takes no -exec, -impl or -against")
				}
				return listAdapters(stdout)
			}
			switch {
			case (o.exe == "") == (o.impl == ""):
				return usagef("give one of -exec and -impl")
			case o.impl != "" && o.impl != "reference" && o.impl != "fused":
				return usagef("-impl %q: want reference or fused", o.impl)
			case !(o.timeout > 0):
				return usagef("-timeout %v: want > 0", o.timeout)
			case o.repro != "" && o.against == "":
				return usagef("-repro needs -against")
			case o.force && o.repro == "":
				return usagef("-force applies to -repro only")
			}
			known := false
			for _, c := range conform.Contracts {
				known = known || c == o.contract
			}
			if !known {
				return usagef("-contract %q: want %s", o.contract, strings.Join(conform.Contracts, ", "))
			}
			if o.against != "" {
				return runDiff(ctx, o, stdout)
			}
			return runConform(ctx, o, stdout)
		}
	},
})

// conformOpts are conform's flags.
type conformOpts struct {
	exe, impl, against, repro, contract string
	force, asJSON                       bool
	timeout                             time.Duration
}
