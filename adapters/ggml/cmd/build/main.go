// Command build compiles this module's ggml programs — ggml-conform (the
// conform adapter), ggml-peer (the bench peer) and ggml-lm (the decoder) —
// with ggml's C sources from github.com/ollama/ollama and the flags of
// llama.cpp's own CPU build (package internal/build), into the folder
// where attnlab looks for them:
//
//	cd adapters/ggml && go run ./cmd/build [-o DIR]
//
// With -env it builds nothing and prints the environment (shell export
// lines) under which go vet and go test compile this module's cgo
// packages:
//
//	eval "$(go run ./cmd/build -env)" && go vet ./... && go test ./...
//
// It needs gcc and the Go module proxy (or ollama's module in the module
// cache). The first build compiles ggml (a few minutes on 2 cores); later
// ones come from Go's build cache.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/adapters/ggml/internal/build"
)

func main() {
	out := flag.String("o", adapters.GGMLDir(), "the folder to put the programs in")
	env := flag.Bool("env", false, "print the build's environment as shell export lines, build nothing")
	flag.Parse()
	if flag.NArg() > 0 || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: go run ./cmd/build [-o DIR]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := build.Configure(ctx, ".")
	if err == nil && *env {
		for _, v := range c.Vars {
			name, value, _ := strings.Cut(v, "=")
			fmt.Printf("export %s='%s'\n", name, strings.ReplaceAll(value, "'", `'\''`))
		}
		return
	}
	if err == nil {
		fmt.Fprintf(os.Stderr, "building %v into %s\n  ggml: %s %s (llama.cpp %s)\n  flags: %s\n", build.Programs, *out, build.OllamaModule, c.Ollama, c.Upstream, c.Describe())
		err = c.Build(ctx, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}
