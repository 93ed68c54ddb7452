// Package build compiles the ggml programs of this module (the conform
// adapter, the bench peer, the decoder) with ggml's C sources from the Go
// module github.com/ollama/ollama and the optimisation flags of
// llama.cpp's own CPU build on the machine it runs on.
//
// llama.cpp's CMake build for a CPU, by default, compiles ggml with
// CMAKE_BUILD_TYPE=Release (-O3 -DNDEBUG), GGML_NATIVE=ON (-march=native),
// GGML_OPENMP=ON (-fopenmp, GGML_USE_OPENMP: OpenMP's thread team runs the
// graph) and GGML_LLAMAFILE=ON (GGML_USE_LLAMAFILE: llamafile's tinyBLAS
// for F32/F16 matrix products). ollama's cgo files already define NDEBUG
// and GGML_USE_LLAMAFILE and give the C files -O3; this package adds the
// rest through CGO_CFLAGS, CGO_CXXFLAGS (ops.cpp, where flash attention
// and softmax live, is C++), CGO_CPPFLAGS and CGO_LDFLAGS, with ggml's
// include folder for this module's own cgo package.
package build

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// OllamaModule is the module whose vendored ggml is built.
const OllamaModule = "github.com/ollama/ollama"

// Programs are the commands of this module, built into one folder.
var Programs = []string{"ggml-conform", "ggml-peer", "ggml-lm", "ggml-masked-row", "ollama-swa-window"}

// Config is how the programs are built.
type Config struct {
	ModuleDir string // this module's folder (adapters/ggml)
	OllamaDir string // the ollama module's folder in the module cache
	Ollama    string // its version
	Upstream  string // the llama.cpp commit ollama vendors
	CC        string
	Compiler  string // e.g. "gcc 12.2.0"
	March     string // what -march=native resolves to
	// Vars are the environment variables the build adds (CGO_CFLAGS, …);
	// Env is the whole environment of go build.
	Vars, Env []string
}

// Flags are the compiler flags added to ollama's own.
const (
	CFlags   = "-O3 -march=native -fopenmp"
	CPPFlags = "-DGGML_USE_OPENMP"
	LDFlags  = "-fopenmp"
)

// Describe is the build in one line, for a program's hello.
func (c *Config) Describe() string {
	return fmt.Sprintf("%s %s (native: %s) -DNDEBUG -DGGML_USE_LLAMAFILE %s", c.Compiler, CFlags, c.March, CPPFlags)
}

// Configure finds this module's folder (from dir, inside it), ollama's
// sources (downloading the module through the Go module proxy when it is
// not in the cache) and the C compiler. Its errors say what is missing.
func Configure(ctx context.Context, dir string) (*Config, error) {
	c := &Config{CC: os.Getenv("CC")}
	if c.CC == "" {
		c.CC = "gcc"
	}
	if _, err := exec.LookPath(c.CC); err != nil {
		return nil, fmt.Errorf("no C compiler (%s): install Debian's gcc and g++", c.CC)
	}
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		return nil, fmt.Errorf("no C++ compiler (%s) for ggml's .cpp files: install Debian's g++", cxx)
	}
	out, err := run(ctx, dir, nil, "go", "env", "GOMOD")
	if err != nil {
		return nil, err
	}
	if gomod := strings.TrimSpace(out); filepath.Base(filepath.Dir(gomod)) != "ggml" {
		return nil, fmt.Errorf("%s is not in the module adapters/ggml (go.mod %q)", dir, gomod)
	} else {
		c.ModuleDir = filepath.Dir(gomod)
	}
	if out, err = run(ctx, c.ModuleDir, nil, "go", "mod", "download", "-json", OllamaModule); err != nil {
		return nil, fmt.Errorf("downloading %s (needs the Go module proxy): %w", OllamaModule, err)
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Dir == "" {
		return nil, fmt.Errorf("downloading %s: %s %v", OllamaModule, m.Error, err)
	}
	c.OllamaDir, c.Ollama = m.Dir, m.Version
	if sync, err := os.ReadFile(filepath.Join(m.Dir, "Makefile.sync")); err == nil {
		if x := regexp.MustCompile(`(?m)^FETCH_HEAD=(\w+)`).FindSubmatch(sync); x != nil {
			c.Upstream = string(x[1])
		}
	}
	include := filepath.Join(m.Dir, "ml", "backend", "ggml", "ggml", "include")
	if _, err := os.Stat(filepath.Join(include, "ggml.h")); err != nil {
		return nil, fmt.Errorf("%s %s has no ggml headers: %w", OllamaModule, m.Version, err)
	}
	if v, err := run(ctx, dir, nil, c.CC, "-dumpfullversion"); err == nil {
		c.Compiler = filepath.Base(c.CC) + " " + strings.TrimSpace(v)
	}
	if q, err := run(ctx, dir, nil, c.CC, "-march=native", "-Q", "--help=target"); err == nil {
		if x := regexp.MustCompile(`(?m)^\s+-march=\s+(\S+)`).FindStringSubmatch(q); x != nil {
			c.March = x[1]
		}
	}
	c.Vars = []string{"CGO_ENABLED=1", "CC=" + c.CC,
		"CGO_CFLAGS=" + CFlags, "CGO_CXXFLAGS=" + CFlags,
		"CGO_CPPFLAGS=-I" + include + " " + CPPFlags, "CGO_LDFLAGS=" + LDFlags}
	c.Env = append(os.Environ(), c.Vars...)
	return c, nil
}

// Build compiles the programs into dir. The C compiler's warnings (ggml's
// sources give some) are shown only when it fails.
func (c *Config) Build(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pkg := "github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	ldflags := fmt.Sprintf("-X '%s.BuildFlags=%s' -X '%s.Upstream=%s'", pkg, c.Describe(), pkg, c.Upstream)
	args := []string{"build", "-ldflags", ldflags, "-o", dir + string(filepath.Separator)}
	for _, p := range Programs {
		args = append(args, "./cmd/"+p)
	}
	_, err := run(ctx, c.ModuleDir, c.Env, "go", args...)
	return err
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if lines := strings.Split(msg, "\n"); len(lines) > 40 {
			msg = strings.Join(lines[len(lines)-40:], "\n")
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}
