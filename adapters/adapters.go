package adapters

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/attnlab/attnlab/conform"
)

//go:embed python/*.py node/ort_attention.js
var scripts embed.FS

// Python is the interpreter of the PyTorch adapters: Debian's python3-torch
// installs PyTorch for it.
const Python = "/usr/bin/python3"

// ORTVersion is the onnxruntime-node the Node adapter is written against
// (node/package.json).
const ORTVersion = "1.30.0"

// Shipped is an adapter shipped with attnlab, run by name:
// attnlab conform -exec torch-composite.
type Shipped struct {
	Name   string // e.g. "torch-composite"
	Runs   string // the implementation it runs
	script string // in scripts, e.g. "python/torch_composite.py"
	args   []string
}

// node reports whether s is run by node (otherwise by Python).
func (s Shipped) node() bool { return strings.HasPrefix(s.script, "node/") }

// Command is how s is run, with the script named as it is shipped.
func (s Shipped) Command() string {
	interp := Python
	if s.node() {
		interp = "node"
	}
	return strings.Join(append([]string{interp, "adapters/" + s.script}, s.args...), " ")
}

var shipped = []Shipped{
	{"torch-composite", "PyTorch composite attention (matmul, masked_fill, softmax, autograd), attnlab's mask rule", "python/torch_composite.py", nil},
	{"torch-composite-plain", "the same composite without special-casing a row with no visible key (NaN there)", "python/torch_composite.py", []string{"--plain"}},
	{"torch-sdpa", "PyTorch 1.13 _scaled_dot_product_attention (is_causal or a boolean mask)", "python/torch_sdpa.py", nil},
	{"torch-mha", "torch.nn.MultiheadAttention with identity projections", "python/torch_mha.py", nil},
	{"ort-attention", "ONNX Attention op (opset 24) on onnxruntime-node, the keys before the chunk as past_key/past_value", "node/ort_attention.js", []string{"attention"}},
	{"ort-attention-no-cache", "ONNX Attention op (opset 24) on onnxruntime-node, every key as K/V", "node/ort_attention.js", []string{"attention", "--no-cache"}},
	{"ort-gqa", "com.microsoft GroupQueryAttention on onnxruntime-node", "node/ort_attention.js", []string{"gqa"}},
}

// List returns the shipped adapters.
func List() []Shipped { return slices.Clone(shipped) }

// Lookup returns the shipped adapter called name.
func Lookup(name string) (Shipped, bool) {
	i := slices.IndexFunc(shipped, func(s Shipped) bool { return s.Name == name })
	if i < 0 {
		return Shipped{}, false
	}
	return shipped[i], true
}

// Missing says why s cannot run on this machine, with what to install, or
// is "" when its runtime is found.
func (s Shipped) Missing() string {
	if s.node() {
		_, why := ortModules()
		return why
	}
	return torchMissing()
}

// torchMissing is why Python cannot run the PyTorch adapters, or "" (asked
// once: the interpreter's path is fixed).
var torchMissing = sync.OnceValue(func() string {
	if _, err := os.Stat(Python); err != nil {
		return Python + " is not installed: install Debian's python3-torch"
	}
	// find_spec, not import: it answers in milliseconds
	out, err := exec.Command(Python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)").CombinedOutput()
	if err != nil {
		if len(out) > 0 {
			return fmt.Sprintf("%s cannot look for torch (%s)", Python, strings.TrimSpace(string(out)))
		}
		return "PyTorch is not installed for " + Python + ": install Debian's python3-torch"
	}
	return ""
})

// ortModules finds a node_modules folder holding onnxruntime-node, in this
// order: the folders of NODE_PATH; attnlab's own, in the user's cache
// folder (where the error tells to install it); adapters/node/node_modules
// in the current folder or one above it (a checkout of attnlab); the global
// folder of the node on PATH. It returns the folder, or "" and why none.
func ortModules() (dir, why string) {
	nodePath, err := exec.LookPath("node")
	if err != nil {
		return "", "node is not installed: install Node.js 18 or later"
	}
	var candidates []string
	for _, d := range filepath.SplitList(os.Getenv("NODE_PATH")) {
		if d != "" {
			candidates = append(candidates, d)
		}
	}
	cache := CacheModules()
	if cache != "" {
		candidates = append(candidates, cache)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "adapters", "node", "node_modules"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if real, err := filepath.EvalSymlinks(nodePath); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(filepath.Dir(real)), "lib", "node_modules"))
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "onnxruntime-node", "package.json")); err == nil {
			return d, ""
		}
	}
	prefix := "~/.cache/attnlab/node"
	if cache != "" {
		prefix = filepath.Dir(cache)
	}
	return "", fmt.Sprintf("onnxruntime-node is not installed (looked in NODE_PATH, %s, adapters/node/node_modules here and above, and node's global folder): "+
		"install it with: npm install --prefix %s --ignore-scripts onnxruntime-node@%s", prefix, prefix, ORTVersion)
}

// CacheModules is the node_modules folder of attnlab's own onnxruntime-node
// install, under the user's cache folder ("" when there is none).
func CacheModules() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "attnlab", "node", "node_modules")
}

// Resolve makes the shipped adapter called name ready to run: its scripts
// are written to a private temporary folder, removed by the Program's
// Cleanup, and it is run by its interpreter (node with NODE_PATH set to
// where onnxruntime-node is). It fails naming what to install when the
// runtime is missing.
func Resolve(name string) (conform.Program, error) {
	s, ok := Lookup(name)
	if !ok {
		return conform.Program{}, fmt.Errorf("adapters: no shipped adapter %q (attnlab conform -list shows them)", name)
	}
	interp, env := Python, []string(nil)
	if s.node() {
		modules, why := ortModules()
		if why != "" {
			return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
		}
		interp, env = "node", []string{"NODE_PATH=" + modules}
	} else if why := torchMissing(); why != "" {
		return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
	}
	dir, err := os.MkdirTemp("", "attnlab-adapter-") // mode 0700: ours alone
	if err != nil {
		return conform.Program{}, fmt.Errorf("adapters: %s: %w", name, err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	// the whole folder of the script: the Python ones import conform_io
	folder := path.Dir(s.script)
	entries, err := fs.ReadDir(scripts, folder)
	if err == nil {
		for _, e := range entries {
			var data []byte
			if data, err = scripts.ReadFile(folder + "/" + e.Name()); err != nil {
				break
			}
			if err = os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600); err != nil {
				break
			}
		}
	}
	if err != nil {
		cleanup()
		return conform.Program{}, fmt.Errorf("adapters: %s: writing its script: %w", name, err)
	}
	argv := append([]string{interp, filepath.Join(dir, path.Base(s.script))}, s.args...)
	return conform.Program{Name: name, Argv: argv, Env: env, Cleanup: cleanup}, nil
}

// Start starts exe, a shipped adapter's name or a command line (as
// conform.Start takes it), and exchanges the hello. A shipped adapter whose
// runtime is missing is a *conform.Error at "start" saying what to
// install, as a program that is not there is.
func Start(ctx context.Context, exe string, timeout time.Duration) (*conform.Adapter, error) {
	if _, ok := Lookup(exe); !ok {
		return conform.Start(ctx, exe, timeout)
	}
	p, err := Resolve(exe)
	if err != nil {
		// a runtime that is missing fails the adapter as a program that is missing does
		return nil, &conform.Error{Adapter: exe, Request: "start", Err: errors.New(strings.TrimPrefix(err.Error(), "adapters: "+exe+": "))}
	}
	return conform.StartProgram(ctx, p, timeout)
}
