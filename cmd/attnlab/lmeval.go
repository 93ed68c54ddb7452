package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/models"

	"github.com/attnlab/attnlab/train"
)

var lmEvalCmd = register(&command{
	name:  "lm-eval",
	usage: "[-model DIR] (-src DIR | -files LIST [-root DIR]) [-json] [-window W] [-stride S]",
	short: "bits per byte of a language model on Go files, beside gzip, zstd and xz on the same bytes",
	long: `Lm-eval measures a language-model checkpoint on Go files: each file is read
on its own (the context restarts at each file, from the end-of-text token),
through windows of -window tokens that advance by -stride, so every token is
predicted from at least window − stride tokens before it in its file. It
prints bits per byte and nats per token, and beside them gzip -9, zstd -19
and xz -9e (those installed) on exactly the same bytes: on the files
concatenated (the strong bound, since a compressor then finds repeats
across files while the model reads each file alone) and on each file alone.

-src reads every non-test, non-generated .go file under a folder (vendor,
testdata and hidden folders skipped); -files reads a list of paths, one a
line, relative to -root (absolute paths as they are). With -json the
result holds bits_per_byte, nats_per_token, bytes, tokens, files,
xz_bits_per_byte, xz_per_file_bits_per_byte and every compressor.

Example: attnlab lm-eval -model run1/checkpoint -src $(go env GOROOT)/src/net/http`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &train.LMEvalOptions{Compressors: true}
		fs.StringVar(&o.Model, "model", "", "language-model checkpoint folder (default: the shipped language model)")
		fs.StringVar(&o.Src, "src", "", "folder of Go source to evaluate on")
		list := fs.String("files", "", "file listing the Go files to evaluate on, one a line")
		root := fs.String("root", ".", "folder the paths of -files are relative to")
		fs.IntVar(&o.Window, "window", 0, "tokens per window (0: the model's max_position_embeddings)")
		fs.IntVar(&o.Stride, "stride", 0, "new tokens scored per window after a file's first (0: window/2)")
		fs.IntVar(&o.Batch, "batch", 8, "windows per forward pass")
		noComp := fs.Bool("no-compressors", false, "do not run gzip, zstd and xz")
		asJSON := fs.Bool("json", false, "print the result as JSON")
		quiet := fs.Bool("quiet", false, "no progress")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			switch {
			case (o.Src == "") == (*list == ""):
				return usagef("give one of -src DIR and -files LIST")
			case o.Window < 0 || o.Stride < 0 || o.Batch < 1 || o.Batch > train.MaxBatch:
				return usagef("-window %d, -stride %d, -batch %d: want window and stride >= 0, batch in [1, %d]", o.Window, o.Stride, o.Batch, train.MaxBatch)
			}
			if *list != "" {
				files, err := readFileList(*list, *root)
				if err != nil {
					return err
				}
				o.Files = files
			}
			if o.Model == "" {
				dir, err := shippedModel(models.LM)
				if err != nil {
					return err
				}
				o.Model = dir
			}
			o.Compressors = !*noComp
			var bar *progress
			o.Progress = func(done, n int) {
				if bar == nil {
					bar = newProgress(n, "scoring", *quiet)
				}
				bar.set(done, "")
			}
			return runLMEval(ctx, o, *asJSON, stdout)
		}
	},
})

func runLMEval(ctx context.Context, o *train.LMEvalOptions, asJSON bool, stdout io.Writer) error {
	// scoring stops between batches; an interrupt does not wait for the
	// forward pass in progress (lm-eval writes nothing)
	r, err := await(ctx, func() (*train.LMReport, error) { return train.EvaluateLM(ctx, *o) })
	if err != nil {
		return optionError(err)
	}
	if asJSON {
		r.Score.Files = nil // the per-file scores stay out of the summary
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "%s on %d files, %d bytes, %d tokens (window %d, stride %d):\n", r.Model, r.Files, r.Bytes, r.Tokens, r.Window, r.Stride)
	fmt.Fprintf(stdout, "  attnlab   %.3f bits/byte  (%.3f nats/token)\n", r.BitsPerByte, r.NatsPerToken)
	for _, c := range r.Compressors {
		fmt.Fprintf(stdout, "  %-9s %.3f bits/byte on the files concatenated, %.3f on each file alone\n", c.Tool, c.BitsPerByte, c.PerFileBitsPerByte)
	}
	return nil
}

// readFileList reads a list of paths, one a line (blank lines and lines
// starting with # skipped), relative to root.
func readFileList(list, root string) ([]string, error) {
	f, err := os.Open(list)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var files []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(root, filepath.FromSlash(line))
		}
		if fi, err := os.Stat(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", list, n, err)
		} else if fi.IsDir() {
			return nil, fmt.Errorf("%s:%d: %s is a folder, not a file", list, n, line)
		}
		files = append(files, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", list, err) // a line beyond 64 KiB (/dev/zero) too
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s lists no file", list)
	}
	return files, nil
}
