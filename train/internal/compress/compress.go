// Package compress measures general-purpose compressors on given bytes: the
// bar a language model of source code has to clear. A model that predicts
// the next byte with p spends −log2 p bits on it; a compressor's output
// size in bits over the input's bytes is the same measure.
package compress

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
)

// A Tool is a compressor run as a command reading stdin and writing stdout.
type Tool struct {
	Name string   // as reported: "xz -9e"
	Cmd  string   // the program
	Args []string // its arguments
}

// Tools are the compressors attnlab compares against, strongest last.
var Tools = []Tool{
	{"gzip -9", "gzip", []string{"-9", "-c", "-n"}},
	{"zstd -19", "zstd", []string{"-19", "-c", "-q"}},
	{"xz -9e", "xz", []string{"-9e", "-c"}},
}

// Available reports whether the tool's program is on the PATH.
func (t Tool) Available() bool {
	_, err := exec.LookPath(t.Cmd)
	return err == nil
}

// Size returns the size in bytes of data compressed by t.
func (t Tool) Size(ctx context.Context, data []byte) (int, error) {
	cmd := exec.CommandContext(ctx, t.Cmd, t.Args...)
	cmd.Stdin = bytes.NewReader(data)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("compress: %s: %v %s", t.Name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Len(), nil
}

// Result is a tool's measure on a set of files.
type Result struct {
	Tool               string  `json:"tool"`
	Bytes              int     `json:"bytes"`                  // input bytes
	Concat             int     `json:"concat"`                 // compressed size of the files concatenated
	PerFile            int     `json:"per_file"`               // sum of the compressed sizes of each file alone
	BitsPerByte        float64 `json:"bits_per_byte"`          // 8·Concat/Bytes: the strong bound (context across files)
	PerFileBitsPerByte float64 `json:"per_file_bits_per_byte"` // 8·PerFile/Bytes: each file on its own, as a model reads them
}

// Measure compresses the files concatenated (in order) and each on its own.
func (t Tool) Measure(ctx context.Context, files [][]byte) (Result, error) {
	r := Result{Tool: t.Name}
	var all []byte
	for _, f := range files {
		all = append(all, f...)
		n, err := t.Size(ctx, f)
		if err != nil {
			return r, err
		}
		r.PerFile += n
	}
	r.Bytes = len(all)
	if r.Bytes == 0 {
		return r, fmt.Errorf("compress: %s: no bytes to compress", t.Name)
	}
	n, err := t.Size(ctx, all)
	if err != nil {
		return r, err
	}
	r.Concat = n
	r.BitsPerByte = 8 * float64(r.Concat) / float64(r.Bytes)
	r.PerFileBitsPerByte = 8 * float64(r.PerFile) / float64(r.Bytes)
	return r, nil
}

// MeasureAll measures every available tool of Tools.
func MeasureAll(ctx context.Context, files [][]byte) ([]Result, error) {
	var out []Result
	for _, t := range Tools {
		if !t.Available() {
			continue
		}
		r, err := t.Measure(ctx, files)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
