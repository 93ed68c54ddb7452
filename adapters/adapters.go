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

//go:embed python/*.py node/*.js
var scripts embed.FS

// Python is the interpreter of the PyTorch adapters: Debian's python3-torch
// installs PyTorch for it.
const Python = "/usr/bin/python3"

// ORTVersion is the onnxruntime-node the Node adapters are written against
// (node/package.json); 1.24.3 and 1.27.0 are installed beside it under npm
// aliases, and onnxruntime-web at the same version.
const ORTVersion = "1.30.0"

// TFJSVersion is the TensorFlow.js of the tfjs-mha adapter (node/package.json).
const TFJSVersion = "4.22.0"

// npm install specs of the packages the Node adapters need, as
// node/package.json names them.
const (
	npmORT    = "onnxruntime-node@" + ORTVersion
	npmORT124 = "onnxruntime-node-1.24@npm:onnxruntime-node@1.24.3"
	npmORT127 = "onnxruntime-node-1.27@npm:onnxruntime-node@1.27.0"
	npmORTWeb = "onnxruntime-web@" + ORTVersion
	npmTFJS   = "@tensorflow/tfjs@" + TFJSVersion
)

// Shipped is an adapter shipped with attnlab, run by name:
// attnlab conform -exec torch-composite.
type Shipped struct {
	Name string // e.g. "torch-composite"
	Runs string // the implementation it runs
	// in scripts, e.g. "python/torch_composite.py"; or a Go module's folder
	// under adapters/, e.g. "gomlx"; or a program of adapters/ggml, built
	// by its build tool into GGMLDir: "ggml/ggml-conform"
	script string
	args   []string
	// needs is the Python module a Python adapter imports beside torch
	// ("" for none)
	needs string
	npm   string // a Node adapter's npm package, as npm install takes it
}

// node reports whether s is run by node.
func (s Shipped) node() bool { return strings.HasPrefix(s.script, "node/") }

// ggml reports whether s is a program of adapters/ggml (cgo, compiled by
// that module's build tool with ggml's C sources, minutes on a first
// build, so not built on demand: it is looked for in GGMLDir).
func (s Shipped) ggml() bool { return strings.HasPrefix(s.script, "ggml/") }

// goModule reports whether s is a Go program in a module of its own under
// adapters/ (its dependencies kept out of attnlab's module), built from a
// checkout of attnlab.
func (s Shipped) goModule() bool { return !strings.Contains(s.script, "/") }

// Command is how s is run from the repository's root, with the script
// named as it is shipped.
func (s Shipped) Command() string {
	if s.ggml() {
		dir := GGMLDir()
		if home, err := os.UserHomeDir(); err == nil && home != "" && strings.HasPrefix(dir, home+string(filepath.Separator)) {
			dir = "~" + dir[len(home):]
		}
		return strings.Join(append([]string{filepath.Join(dir, path.Base(s.script))}, s.args...), " ")
	}
	if s.goModule() {
		return strings.Join(append([]string{"go", "-C", "adapters/" + s.script, "run", "."}, s.args...), " ")
	}
	interp := Python
	if s.node() {
		interp = "node"
	}
	return strings.Join(append([]string{interp, "adapters/" + s.script}, s.args...), " ")
}

var shipped = []Shipped{
	{"torch-composite", "PyTorch composite attention (matmul, masked_fill, softmax, autograd), attnlab's mask rule", "python/torch_composite.py", nil, "", ""},
	{"torch-composite-plain", "the same composite without special-casing a row with no visible key (NaN there)", "python/torch_composite.py", []string{"--plain"}, "", ""},
	{"torch-sdpa", "PyTorch 1.13 _scaled_dot_product_attention (is_causal or a boolean mask)", "python/torch_sdpa.py", nil, "", ""},
	{"torch-mha", "torch.nn.MultiheadAttention with identity projections", "python/torch_mha.py", nil, "", ""},
	{"ort-attention", "ONNX Attention op (opset 24) on onnxruntime-node, the keys before the chunk as past_key/past_value", "node/ort_attention.js", []string{"attention"}, "", npmORT},
	{"ort-attention-no-cache", "ONNX Attention op (opset 24) on onnxruntime-node, every key as K/V", "node/ort_attention.js", []string{"attention", "--no-cache"}, "", npmORT},
	{"ort-gqa", "com.microsoft GroupQueryAttention on onnxruntime-node", "node/ort_attention.js", []string{"gqa"}, "", npmORT},
	{"torchtext-sdp", "torchtext 0.14 nn.ScaledDotProduct (boolean attn_mask, True = blocked)", "python/torchtext_sdp.py", nil, "torchtext", ""},
	{"gomlx-mha", "GoMLX layers.MultiHeadAttention with identity projections, pure-Go backend (Go module adapters/gomlx)", "gomlx", nil, "", ""},
	{"gomlx-masked-softmax", "GoMLX graph.MaskedSoftmax between two Einsums, pure-Go backend (Go module adapters/gomlx)", "gomlx", []string{"--masked-softmax"}, "", ""},
	{"spago", "spaGO attention.ScaledDotProductAttention, the core of its self-attention (Go module adapters/spago)", "spago", nil, "", ""},
	{"ort-mha", "com.microsoft MultiHeadAttention on onnxruntime-node (unidirectional, key_padding_mask), the keys before the chunk as past_key/past_value", "node/ort_attention.js", []string{"mha"}, "", npmORT},
	{"ort-mha-no-cache", "com.microsoft MultiHeadAttention on onnxruntime-node, every key as key/value", "node/ort_attention.js", []string{"mha", "--no-cache"}, "", npmORT},
	{"ort-attention-1.24", "ONNX Attention op (opset 24) on onnxruntime-node 1.24.3, past_key/past_value", "node/ort_attention.js", []string{"attention", "--ort", "1.24"}, "", npmORT124},
	{"ort-attention-1.27", "ONNX Attention op (opset 24) on onnxruntime-node 1.27.0, past_key/past_value", "node/ort_attention.js", []string{"attention", "--ort", "1.27"}, "", npmORT127},
	{"ort-web-attention", "ONNX Attention op (opset 24) on onnxruntime-web (WASM), past_key/past_value", "node/ort_attention.js", []string{"attention", "--wasm"}, "", npmORTWeb},
	{"ort-web-attention-no-cache", "ONNX Attention op (opset 24) on onnxruntime-web (WASM), every key as K/V", "node/ort_attention.js", []string{"attention", "--no-cache", "--wasm"}, "", npmORTWeb},
	{"ort-web-gqa", "com.microsoft GroupQueryAttention on onnxruntime-web (WASM)", "node/ort_attention.js", []string{"gqa", "--wasm"}, "", npmORTWeb},
	{"ort-web-mha", "com.microsoft MultiHeadAttention on onnxruntime-web (WASM), past_key/past_value", "node/ort_attention.js", []string{"mha", "--wasm"}, "", npmORTWeb},
	{"ort-web-mha-no-cache", "com.microsoft MultiHeadAttention on onnxruntime-web (WASM), every key as key/value", "node/ort_attention.js", []string{"mha", "--no-cache", "--wasm"}, "", npmORTWeb},
	{"tfjs-mha", "TF.js MultiHeadAttention (tfjs-layers 4.22) on the pure-JavaScript CPU backend, the heads split as identity projections split them", "node/tfjs_mha.js", nil, "", npmTFJS},
	{"ggml-flash-attn", "ggml_flash_attn_ext on ggml's CPU backend (llama.cpp with flash attention on), F32 K/V, llama.cpp's KV-cache mask", "ggml/ggml-conform", []string{"-flash=true"}, "", ""},
	{"ggml-softmax", "ggml mul_mat → soft_max_ext → mul_mat on ggml's CPU backend (llama.cpp with flash attention off), F32 K/V, llama.cpp's KV-cache mask", "ggml/ggml-conform", []string{"-flash=false"}, "", ""},
	{"ggml-ollama-mask", "ggml_flash_attn_ext on ggml's CPU backend with the mask of ollama's own Go KV cache (kvcache.Causal, its code run), F32 K/V", "ggml/ggml-conform", []string{"-flash=true", "-mask", "ollama"}, "", ""},
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
	switch {
	case s.node():
		_, why := nodeModules(s.npm)
		return why
	case s.ggml():
		_, why := GGMLProgram(path.Base(s.script))
		return why
	case s.goModule():
		_, why := goModuleDir(s.script)
		return why
	case s.needs != "":
		if why := torchMissing(); why != "" {
			return why
		}
		return pythonModuleMissing(s.needs)
	}
	return torchMissing()
}

// GGMLBuild is the command that builds adapters/ggml's programs into
// GGMLDir, from a checkout of attnlab.
const GGMLBuild = "(cd adapters/ggml && go run ./cmd/build)"

// GGMLDir is the folder where adapters/ggml's build tool puts its
// programs (ggml-conform, ggml-peer, ggml-lm) and where attnlab looks for
// them: $ATTNLAB_GGML when set, else attnlab/ggml in the user's cache
// folder ("" when there is none).
func GGMLDir() string {
	if d := os.Getenv("ATTNLAB_GGML"); d != "" {
		return d
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "attnlab", "ggml")
}

// GGMLProgram finds the program name (ggml-conform, ggml-peer, ggml-lm) of
// adapters/ggml in GGMLDir. It returns its path, or "" and why it is not
// there with how to install it.
func GGMLProgram(name string) (file, why string) {
	dir := GGMLDir()
	if dir == "" {
		return "", "no user cache folder to find adapters/ggml's programs in: set ATTNLAB_GGML"
	}
	file = filepath.Join(dir, name)
	if fi, err := os.Stat(file); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Sprintf("%s is not built (looked in %s): install it with %s from a checkout of attnlab (needs gcc and the Go module proxy)", name, dir, GGMLBuild)
	}
	return file, ""
}

// pythonModuleMissing says why Python cannot find module (asked once per
// module).
func pythonModuleMissing(module string) string {
	v, _ := pythonModules.LoadOrStore(module, sync.OnceValue(func() string {
		// find_spec of a top-level name locates it without importing it
		out, err := exec.Command(Python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)", module).CombinedOutput()
		if err != nil {
			if len(out) > 0 {
				return fmt.Sprintf("%s cannot look for %s (%s)", Python, module, strings.TrimSpace(string(out)))
			}
			return fmt.Sprintf("%s is not installed for %s: install Debian's python3-%s", module, Python, module)
		}
		return ""
	}))
	return v.(func() string)()
}

var pythonModules sync.Map // module name → func() string

// goModuleDir finds the folder of the Go module adapters/NAME of a
// checkout of attnlab, in the current folder or above, with the Go
// toolchain and every module it needs in the module cache. It returns the
// folder, or "" and why it cannot be built (what to do).
func goModuleDir(name string) (dir, why string) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", "go is not on PATH: the adapter is the Go module adapters/" + name + " of attnlab's repository, built by go; install Go 1.26 or later"
	}
	want := "module github.com/attnlab/attnlab/adapters/" + name
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidate := filepath.Join(d, "adapters", name)
			if data, err := os.ReadFile(filepath.Join(candidate, "go.mod")); err == nil && firstLineOf(string(data)) == want {
				dir = candidate
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if dir == "" {
		return "", fmt.Sprintf("adapters/%s, the Go module of this adapter, is not in the current folder or above: run attnlab in a checkout of attnlab (it builds the adapter there), "+
			"or install the adapter from one (go -C adapters/%s build -o %s-adapter .) and give -exec its path", name, name, name)
	}
	// asked once per folder and module cache
	v, _ := goModules.LoadOrStore(dir+"\x00"+os.Getenv("GOMODCACHE"), sync.OnceValue(func() string {
		// go list resolves every package the build needs without compiling
		// it; with GOPROXY=off it downloads nothing
		cmd := exec.Command(goTool, "list", "-deps", ".")
		cmd.Dir = dir
		cmd.Env = goEnv("GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Sprintf("the Go module cache lacks what %s needs (%s): run go -C %s mod download", dir, lastLine(string(out), err), dir)
		}
		return ""
	}))
	return dir, v.(func() string)()
}

var goModules sync.Map // module folder and GOMODCACHE → func() string

// buildGo builds the Go module adapters/NAME of a checkout into dir
// (CGO_ENABLED=0: the adapters are pure Go) and returns the binary.
func buildGo(ctx context.Context, name, dir string) (string, error) {
	src, why := goModuleDir(name)
	if why != "" {
		return "", errors.New(why)
	}
	bin := filepath.Join(dir, name+"-adapter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %s", src, lastLine(string(out), err))
	}
	return bin, nil
}

// goEnv is the environment of the go commands that look for and build a Go
// adapter, with extra added: no cgo (the adapters are pure Go), go.mod and
// go.sum as they are (-mod=readonly), no version-control stamp (a checkout
// without git, or one git distrusts, still builds), the user's GOFLAGS kept.
func goEnv(extra ...string) []string {
	flags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=readonly -buildvcs=false")
	return append(os.Environ(), append(extra, "CGO_ENABLED=0", "GOFLAGS="+flags)...)
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// lastLine is the last line a failed command wrote, or its error.
func lastLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
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

// npmName is the folder an npm install spec puts its package in:
// "onnxruntime-node-1.24" for "onnxruntime-node-1.24@npm:onnxruntime-node@1.24.3",
// "@tensorflow/tfjs" for "@tensorflow/tfjs@4.22.0".
func npmName(spec string) string {
	if i := strings.Index(spec[min(1, len(spec)):], "@"); i >= 0 {
		return spec[:i+1]
	}
	return spec
}

// nodeModules finds a node_modules folder holding the npm package of the
// install spec npm, in this order: the folders of NODE_PATH; attnlab's own,
// in the user's cache folder (where the error tells to install it);
// adapters/node/node_modules in the current folder or one above it (a
// checkout of attnlab); the global folder of the node on PATH. It returns
// the folder, or "" and why none.
func nodeModules(npm string) (dir, why string) {
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
	name := npmName(npm)
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(name), "package.json")); err == nil {
			return d, ""
		}
	}
	prefix := "~/.cache/attnlab/node"
	if cache != "" {
		prefix = filepath.Dir(cache)
	}
	return "", fmt.Sprintf("%s is not installed (looked in NODE_PATH, %s, adapters/node/node_modules here and above, and node's global folder): "+
		"install it with: npm install --prefix %s --ignore-scripts %s", name, prefix, prefix, npm)
}

// CacheModules is the node_modules folder of attnlab's own npm installs
// (onnxruntime-node and the others the Node adapters need), under the
// user's cache folder ("" when there is none).
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
// the node_modules folder holding its npm package). An adapter that is a Go module of its own is
// built with go build from the checkout of attnlab in the current folder
// or above into that folder. It fails naming what to install when the
// runtime is missing.
func Resolve(name string) (conform.Program, error) {
	return resolve(context.Background(), name)
}

func resolve(ctx context.Context, name string) (conform.Program, error) {
	s, ok := Lookup(name)
	if !ok {
		return conform.Program{}, fmt.Errorf("adapters: no shipped adapter %q (attnlab conform -list shows them)", name)
	}
	if s.ggml() {
		file, why := GGMLProgram(path.Base(s.script))
		if why != "" {
			return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
		}
		return conform.Program{Name: name, Argv: append([]string{file}, s.args...)}, nil
	}
	if s.goModule() {
		if _, why := goModuleDir(s.script); why != "" {
			return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
		}
		dir, err := os.MkdirTemp("", "attnlab-adapter-")
		if err != nil {
			return conform.Program{}, fmt.Errorf("adapters: %s: %w", name, err)
		}
		bin, err := buildGo(ctx, s.script, dir)
		if err != nil {
			os.RemoveAll(dir)
			return conform.Program{}, fmt.Errorf("adapters: %s: %w", name, err)
		}
		return conform.Program{Name: name, Argv: append([]string{bin}, s.args...), Cleanup: func() { os.RemoveAll(dir) }}, nil
	}
	interp, env := Python, []string(nil)
	if s.node() {
		modules, why := nodeModules(s.npm)
		if why != "" {
			return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
		}
		interp, env = "node", []string{"NODE_PATH=" + modules}
	} else if why := s.Missing(); why != "" {
		return conform.Program{}, fmt.Errorf("adapters: %s: %s", name, why)
	}
	dir, err := os.MkdirTemp("", "attnlab-adapter-") // mode 0700: ours alone
	if err != nil {
		return conform.Program{}, fmt.Errorf("adapters: %s: %w", name, err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	// the whole folder of the script: every adapter imports conform_io
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
	p, err := resolve(ctx, exe)
	if err != nil {
		// a runtime that is missing fails the adapter as a program that is missing does
		return nil, &conform.Error{Adapter: exe, Request: "start", Err: errors.New(strings.TrimPrefix(err.Error(), "adapters: "+exe+": "))}
	}
	return conform.StartProgram(ctx, p, timeout)
}
