package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/models"
)

var versionCmd = register(&command{
	name:  "version",
	usage: "[-json]",
	short: "the version, commit, Go toolchain, SIMD kernels and shipped-model cache of this binary",
	long: `Version prints what a bug report needs about this binary: the module
version (a tag for "go install …@v1.2.3", "(devel)" for a build from a
checkout), the commit and its time as the build recorded them (with
"modified" when the checkout had uncommitted changes; "unknown" when go
build ran outside a git checkout or with -buildvcs=false), the Go toolchain
and platform, the SIMD kernels this process runs (avx512, avx2 or generic:
a CPU without AVX2 and FMA, another architecture, or -tags purego), and the
folder the shipped models are extracted into on first use ($XDG_CACHE_HOME
or ~/.cache, then attnlab/models). "attnlab -version" prints the same.

Example: attnlab version`,
	define: func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print the fields as a JSON object")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return printVersion(stdout, *asJSON)
		}
	},
})

// buildVersion is what attnlab version prints.
type buildVersion struct {
	Module   string   `json:"module"`
	Version  string   `json:"version"`
	Commit   string   `json:"commit"`         // "unknown" when the build recorded none
	Time     string   `json:"commit_time"`    // RFC 3339, "" when unknown
	Modified bool     `json:"modified"`       // the checkout had uncommitted changes
	Go       string   `json:"go"`             // the toolchain: go1.26.0
	Platform string   `json:"platform"`       // GOOS/GOARCH
	Kernels  string   `json:"kernels"`        // vec.Path
	Models   string   `json:"models_cache"`   // models.Cache
	Shipped  []string `json:"shipped_models"` // models.Shipped
	Tags     string   `json:"build_tags,omitempty"`
}

// readVersion reads the version of this binary from its build
// information, info (debug.ReadBuildInfo's; nil: none recorded).
func readVersion(info *debug.BuildInfo) buildVersion {
	v := buildVersion{Module: "github.com/attnlab/attnlab", Version: "(devel)", Commit: "unknown", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Kernels: vec.Path(), Models: models.Cache(), Shipped: models.Shipped()}
	if info == nil {
		return v
	}
	if info.Main.Path != "" {
		v.Module = info.Main.Path
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "-tags":
			v.Tags = s.Value
		}
	}
	return v
}

func printVersion(w io.Writer, asJSON bool) error {
	info, _ := debug.ReadBuildInfo()
	v := readVersion(info)
	if asJSON {
		return writeJSON(w, v)
	}
	commit := v.Commit
	var notes []string
	if v.Time != "" {
		notes = append(notes, v.Time)
	}
	if v.Modified {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		commit += " (" + strings.Join(notes, ", ") + ")"
	}
	kernels := v.Kernels
	if v.Tags != "" {
		kernels += " (build tags " + v.Tags + ")"
	}
	fmt.Fprintf(w, "attnlab %s\n", v.Version)
	fmt.Fprintf(w, "module   %s\n", v.Module)
	fmt.Fprintf(w, "commit   %s\n", commit)
	fmt.Fprintf(w, "go       %s %s\n", v.Go, v.Platform)
	fmt.Fprintf(w, "kernels  %s\n", kernels)
	fmt.Fprintf(w, "models   %s (shipped: %s)\n", v.Models, strings.Join(v.Shipped, ", "))
	return nil
}
