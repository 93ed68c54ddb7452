// Package python embeds attnlab's PyTorch scripts, so that a command built
// anywhere (go install) can run them beside attnlab: torch_oracle.py (the
// oracle file interface in PyTorch autograd), torch_train.py (the training
// step of the model, and its data-parallel trainer), torch_bench.py (the
// PyTorch side of attnlab bench) and torch_generate.py (greedy generation
// with a KV cache, the PyTorch side of bench's generate row). They need
// /usr/bin/python3 with torch.
package python

import (
	"embed"
	"os"
	"path/filepath"
)

//go:embed *.py
var scripts embed.FS

// Interpreter is the Python that has Debian's python3-torch.
const Interpreter = "/usr/bin/python3"

// Extract writes every script into dir (they import each other, so they go
// together) and returns the path of the one called name.
func Extract(dir, name string) (string, error) {
	entries, err := scripts.ReadDir(".")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := scripts.ReadFile(e.Name())
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, name)
	if _, err := scripts.Open(name); err != nil {
		return "", err
	}
	return path, nil
}
