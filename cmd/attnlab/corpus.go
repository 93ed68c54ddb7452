package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/internal/output"
)

var corpusCmd = register(&command{
	name:  "corpus",
	usage: "fetch | stats  [flags]",
	short: "fetch the Debian Go packages of the language model's corpus; count what the corpus holds",
	long: `Corpus gathers the Go source the language model trains on: "corpus fetch"
downloads and unpacks the listed Debian Go packages, "corpus stats" counts
what the standard library and those packages hold once tests, generated
files, vendored copies and duplicates are dropped, and lists the held-out
files.

Example: attnlab corpus fetch -out ~/.cache/attnlab/corpus && attnlab corpus stats -corpus ~/.cache/attnlab/corpus`,
	subs: []*command{corpusFetchCmd, corpusStatsCmd},
})

var corpusFetchCmd = &command{
	name:  "fetch",
	usage: "[-list FILE] -out DIR",
	short: "download and unpack the listed Debian Go packages (resumable)",
	long: `Corpus fetch downloads each package of -list (Debian package names, one a
line, '#' comments; by default corpus/debian-go-packages.txt of the
repository, built into the binary: the 300 packages the shipped models were
trained from) with apt-get download and unpacks it with dpkg -x into
-out/pkgs/NAME, recording it in -out/manifest.json. It is resumable and
idempotent: packages already unpacked are skipped, an interrupted fetch
leaves no half package, and a package apt cannot fetch is named in the
summary without stopping the others. Run apt-get update first when apt
does not know the packages.

Example: attnlab corpus fetch -out ~/.cache/attnlab/corpus
         attnlab corpus fetch -list my-packages.txt -out corpus`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &corpusOpts{}
		fs.StringVar(&o.list, "list", "", "file of Debian package names, one a line (default: corpus/"+corpus.ListFile+", the shipped models' list, built in)")
		fs.StringVar(&o.out, "out", "", "corpus folder: created, or completed when it exists (required)")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runCorpusFetch(ctx, o, stdout)
		}
	},
}

var corpusStatsCmd = &command{
	name:  "stats",
	usage: "[-corpus DIR] [-std=false] [-val-frac F] [-list-heldout FILE [-root DIR] [-force]]",
	short: "count the corpus and its held-out packages; write the held-out file list",
	long: `Corpus stats reads the corpus meant for the language model: the standard
library ($(go env GOROOT)/src) and the Go source of the packages in -corpus,
non-test .go files only; generated files, vendored copies (vendor,
third_party), testdata, hidden folders and files over -max-file-kb are
skipped, and a file equal to one read before (up to trailing white space)
is dropped. It prints what was kept and skipped, and the packages held out
by -val-frac (whole import paths, by hash); -list-heldout writes their
files for "attnlab lm-eval -files".

Example: attnlab corpus stats -corpus ~/.cache/attnlab/corpus -list-heldout heldout.txt`,
	define: func(fs *flag.FlagSet) runFunc {
		o := &corpusOpts{}
		fs.StringVar(&o.dir, "corpus", "", "corpus folder made by corpus fetch, as train -corpus (none: the standard library alone)")
		oldName(fs, "dir", "corpus")
		fs.BoolVar(&o.std, "std", true, "read the standard library, $(go env GOROOT)/src, first")
		fs.Float64Var(&o.frac, "val-frac", 0.1, "share of packages held out (by a hash of the import path, as train -val-frac)")
		fs.Int64Var(&o.maxKB, "max-file-kb", 1024, "skip files larger than this (0: no limit)")
		fs.StringVar(&o.heldout, "list-heldout", "", "write the held-out files to this file, one a line, relative to -root")
		fs.StringVar(&o.root, "root", "", "folder the -list-heldout paths are relative to (default: the deepest one holding them all)")
		fs.BoolVar(&o.force, "force", false, "replace an existing -list-heldout file")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runCorpusStats(ctx, o, stdout)
		}
	},
}

type corpusOpts struct {
	list, out, dir, heldout, root string
	std, force                    bool
	frac                          float64
	maxKB                         int64
}

func runCorpusFetch(ctx context.Context, o *corpusOpts, stdout io.Writer) error {
	if o.out == "" {
		return usageError{"-out is required"}
	}
	names := corpus.DefaultList()
	if o.list != "" {
		var err error
		if names, err = corpus.ReadList(o.list); err != nil {
			return err
		}
	}
	start := time.Now()
	var bar *progress
	res, err := corpus.Fetch(ctx, names, o.out, corpus.FetchOptions{Progress: func(p corpus.Progress) {
		if bar == nil && p.Done < p.Total {
			bar = newProgress(p.Total, "fetching", false)
		}
		if bar != nil {
			bar.set(p.Done, fmt.Sprintf("%-32.32s", p.Package))
		}
	}})
	if res == nil {
		return err
	}
	werr := res.WriteText(stdout, o.out, time.Since(start), err == nil)
	return cmp.Or(err, werr) // the fetch's error first: an interrupt keeps its exit status
}

func runCorpusStats(ctx context.Context, o *corpusOpts, stdout io.Writer) error {
	so := corpus.SurveyOptions{Std: o.std, Dir: o.dir, MaxFileKB: o.maxKB, Frac: o.frac}
	if err := so.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if o.std {
		so.GoRoot = corpus.GoRoot()
	}
	if o.heldout != "" {
		claim, err := output.Target{Path: o.heldout, Flag: "-list-heldout", Replace: o.force, Inputs: []string{o.dir, so.GoRoot}}.ClaimFile()
		if err != nil {
			return err
		}
		defer claim.Release()
		if err := writable("-list-heldout", o.heldout, false); err != nil {
			return err
		}
	}
	sv, err := corpus.TakeSurvey(ctx, so)
	if err != nil {
		return err
	}
	if err := sv.WriteText(stdout); err != nil || o.heldout == "" {
		return err
	}
	if len(sv.HeldDocs) == 0 {
		return fmt.Errorf("-list-heldout %s: no package is held out at -val-frac %g", o.heldout, o.frac)
	}
	if o.root == "" {
		o.root = corpus.CommonDir(sv.HeldDocs)
	}
	if err := corpus.WriteFileList(o.heldout, sv.HeldDocs, o.root); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d held-out files to %s, relative to %s\n", len(sv.HeldDocs), o.heldout, o.root)
	return nil
}
