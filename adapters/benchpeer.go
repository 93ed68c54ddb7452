package adapters

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// benchScripts are the ONNX Runtime bench peer and the modules it requires.
//
//go:embed node/ort_bench.js node/ort_attention.js node/conform_io.js
var benchScripts embed.FS

// ORTBenchPeer is the ONNX Runtime peer of attnlab bench, node/ort_bench.js
// (docs/bench-peers.md), made ready to run as Resolve makes an adapter: the
// program and its arguments (node and the script, written with
// ort_attention.js and conform_io.js, which it requires, to a private
// temporary folder), the
// environment to add (NODE_PATH, where onnxruntime-node is) and the
// function that removes the folder. It fails saying what to install when
// node or onnxruntime-node is missing.
func ORTBenchPeer() (argv, env []string, cleanup func(), err error) {
	modules, why := nodeModules(npmORT)
	if why != "" {
		return nil, nil, nil, errors.New(why)
	}
	dir, err := os.MkdirTemp("", "attnlab-bench-peer-") // mode 0700: ours alone
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	for _, name := range []string{"ort_bench.js", "ort_attention.js", "conform_io.js"} {
		data, err := benchScripts.ReadFile("node/" + name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o600)
		}
		if err != nil {
			cleanup()
			return nil, nil, nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return []string{"node", filepath.Join(dir, "ort_bench.js")}, []string{"NODE_PATH=" + modules}, cleanup, nil
}
