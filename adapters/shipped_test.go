package adapters_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/adapters"
)

// shippedNames are the names attnlab conform -exec takes, as docs/conform.md
// lists them.
var shippedNames = []string{"torch-composite", "torch-composite-plain", "torch-sdpa", "torch-mha", "ort-attention", "ort-attention-no-cache", "ort-gqa",
	"torchtext-sdp", "gomlx-mha", "gomlx-masked-softmax", "spago",
	"ort-mha", "ort-mha-no-cache", "ort-attention-1.24", "ort-attention-1.27",
	"ort-web-attention", "ort-web-attention-no-cache", "ort-web-gqa", "ort-web-mha", "ort-web-mha-no-cache", "tfjs-mha",
	"ggml-flash-attn", "ggml-softmax", "ggml-ollama-mask"}

func TestList(t *testing.T) {
	var names []string
	for _, s := range adapters.List() {
		names = append(names, s.Name)
		if strings.HasPrefix(s.Name, "ggml-") {
			// a program of adapters/ggml, built where GGMLDir says
			if want := filepath.Join(adapters.GGMLDir(), "ggml-conform"); s.Runs == "" || !strings.Contains(s.Command(), filepath.Base(adapters.GGMLDir())+"/ggml-conform -flash=") {
				t.Errorf("%s: runs %q, command %q, want %s", s.Name, s.Runs, s.Command(), want)
			}
			if _, err := os.Stat(filepath.Join("ggml", "cmd", "ggml-conform", "main.go")); err != nil {
				t.Errorf("%s: its source is not in the repository: %v", s.Name, err)
			}
			continue
		}
		cmd := s.Command()
		script := strings.Fields(cmd)[1]
		if strings.HasPrefix(cmd, "go -C adapters/") {
			// a Go module of its own, run with go run in its folder
			script = strings.Fields(cmd)[2] + "/go.mod"
		} else if !strings.HasPrefix(cmd, adapters.Python+" adapters/python/") && !strings.HasPrefix(cmd, "node adapters/node/") {
			t.Errorf("%s: command %q", s.Name, cmd)
		}
		if s.Runs == "" {
			t.Errorf("%s: runs nothing", s.Name)
		}
		if _, err := os.Stat(script[len("adapters/"):]); err != nil {
			t.Errorf("%s: its script is not in the repository: %v", s.Name, err)
		}
	}
	if !slices.Equal(names, shippedNames) {
		t.Errorf("shipped %q, want %q", names, shippedNames)
	}
}

// TestResolveEveryName: every name resolves, where its runtime is
// installed, to its interpreter and the embedded scripts (the repository's,
// byte for byte) in a private folder that Cleanup removes; otherwise to an
// error saying what to install. An unknown name is an error naming it.
func TestResolveEveryName(t *testing.T) {
	for _, s := range adapters.List() {
		p, err := adapters.Resolve(s.Name)
		if why := s.Missing(); why != "" {
			if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), s.Name) {
				t.Errorf("%s: %v, want an error naming it and %q", s.Name, err, why)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if strings.HasPrefix(s.Name, "ggml-") {
			file, _ := adapters.GGMLProgram("ggml-conform")
			if p.Name != s.Name || p.Argv[0] != file || len(p.Argv) < 2 || !strings.HasPrefix(p.Argv[1], "-flash=") {
				t.Errorf("%s: program %q %q, want %s -flash=…", s.Name, p.Name, p.Argv, file)
			}
			continue
		}
		words := strings.Fields(s.Command())
		if words[0] == "go" {
			// built from its module into a private folder
			dir := filepath.Dir(p.Argv[0])
			if fi, err := os.Stat(p.Argv[0]); err != nil || fi.Mode()&0o100 == 0 || p.Name != s.Name || !slices.Equal(p.Argv[1:], words[5:]) {
				t.Errorf("%s: program %q %q (%v)", s.Name, p.Name, p.Argv, err)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: folder %s: %v, want a private one", s.Name, dir, err)
			}
			p.Cleanup()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s: cleanup left %s (%v)", s.Name, dir, err)
			}
			continue
		}
		want := filepath.Join("python", filepath.Base(words[1]))
		interp := adapters.Python
		if strings.HasPrefix(words[1], "adapters/node/") {
			want, interp = filepath.Join("node", filepath.Base(words[1])), "node"
			if len(p.Env) != 1 || !strings.HasPrefix(p.Env[0], "NODE_PATH=") {
				t.Errorf("%s: environment %q, want NODE_PATH", s.Name, p.Env)
			}
		}
		if p.Name != s.Name || p.Argv[0] != interp || !slices.Equal(p.Argv[2:], words[2:]) {
			t.Errorf("%s: program %q %q", s.Name, p.Name, p.Argv)
		}
		got, err := os.ReadFile(p.Argv[1])
		repo, _ := os.ReadFile(want)
		if err != nil || len(repo) == 0 || string(got) != string(repo) {
			t.Errorf("%s: the script written (%v) is not %s", s.Name, err, want)
		}
		dir := filepath.Dir(p.Argv[1])
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: folder %s: %v %v, want a private one", s.Name, dir, fi.Mode(), err)
		}
		io := map[string]string{adapters.Python: "conform_io.py", "node": "conform_io.js"}[interp]
		if _, err := os.Stat(filepath.Join(dir, io)); err != nil {
			t.Errorf("%s: %s is not beside it: %v", s.Name, io, err)
		}
		p.Cleanup()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: cleanup left %s (%v)", s.Name, dir, err)
		}
	}
	if _, err := adapters.Resolve("torch-nosuch"); err == nil || !strings.Contains(err.Error(), `"torch-nosuch"`) || !strings.Contains(err.Error(), "-list") {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestORTMissingSaysWhatToInstall: with onnxruntime-node nowhere it looks,
// the ONNX Runtime adapters say how to install it.
func TestORTMissingSaysWhatToInstall(t *testing.T) {
	t.Setenv("NODE_PATH", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	s, _ := adapters.Lookup("ort-gqa")
	why := s.Missing()
	if why == "" {
		t.Skip("onnxruntime-node is installed in node's global folder")
	}
	if !strings.Contains(why, "npm install --prefix") || !strings.Contains(why, "onnxruntime-node@"+adapters.ORTVersion) && !strings.Contains(why, "node is not installed") {
		t.Errorf("missing: %q, want what to install", why)
	}
}

// TestGGMLMissingSaysHowToBuild: with adapters/ggml's programs not built
// where attnlab looks, the ggml adapters say how to build them, and
// resolving one is an error naming it.
func TestGGMLMissingSaysHowToBuild(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ATTNLAB_GGML", dir)
	if got := adapters.GGMLDir(); got != dir {
		t.Errorf("GGMLDir %q, want $ATTNLAB_GGML %q", got, dir)
	}
	s, _ := adapters.Lookup("ggml-flash-attn")
	why := s.Missing()
	if !strings.Contains(why, adapters.GGMLBuild) || !strings.Contains(why, "install") || !strings.Contains(why, dir) {
		t.Errorf("missing: %q, want where it looked and %s", why, adapters.GGMLBuild)
	}
	if _, err := adapters.Resolve("ggml-softmax"); err == nil || !strings.Contains(err.Error(), "ggml-softmax") || !strings.Contains(err.Error(), adapters.GGMLBuild) {
		t.Errorf("resolve: %v, want an error naming it and how to build it", err)
	}
}

// TestShippedFromAnotherFolder: the shipped adapters run by name from a
// folder that is not the repository (as from a go install'ed binary),
// answer a request and exit 0; onnxruntime-node is found in the user's
// cache folder. Every script runs, and every npm package it is found in
// (torch_mha and the variants that only add arguments are left out: PyTorch
// starts in 3-4 s each, onnxruntime-web in 5, and TestResolveEveryName
// checks their programs).
func TestShippedFromAnotherFolder(t *testing.T) {
	// onnxruntime-node where an installed attnlab looks for it (the user's
	// cache folder), and not in NODE_PATH: node finds it only if Resolve
	// tells it where
	t.Setenv("NODE_PATH", "")
	t.Setenv("ATTNLAB_GGML", adapters.GGMLDir()) // where adapters/ggml's programs are, before the cache folder moves
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if modules, err := filepath.Abs(filepath.Join("node", "node_modules")); err == nil {
		if err := os.MkdirAll(filepath.Join(cache, "attnlab", "node"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(modules, adapters.CacheModules()); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir())
	for _, s := range adapters.List() {
		// variants that only add arguments to a script (and npm package
		// or program) that another name runs
		if slices.Contains([]string{"torch-composite-plain", "torch-mha", "ort-attention-no-cache", "ort-mha", "ort-mha-no-cache",
			"ort-web-attention-no-cache", "ort-web-gqa", "ort-web-mha", "ort-web-mha-no-cache", "ggml-softmax", "ggml-ollama-mask"}, s.Name) {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			if why := s.Missing(); why != "" {
				t.Skipf("%s skipped: %s", s.Name, why)
			}
			start := time.Now()
			a, err := adapters.Start(context.Background(), s.Name, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			r := newRequest(1, shape{1, 2, 2, 3, 3, 8, 8}, a.Caps.DTypes[0], false)
			if resp := call(t, a, r); len(resp.O) != len(r.Q) {
				t.Errorf("o has %d values, want %d", len(resp.O), len(r.Q))
			}
			if err := a.Close(); err != nil {
				t.Errorf("exit: %v", err)
			}
			t.Logf("%s: %s, %v", s.Name, a.Caps.Name, time.Since(start).Round(time.Millisecond))
		})
	}
}
