package oracle_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

// FuzzRun: the ops `attnlab ref` runs on a safetensors input never panic
// on any file Parse accepts; an error is one line; a result is a file
// that writes and reads back. (The decoder op is left out: it loads the
// checkpoint its metadata names from the file system.)
func FuzzRun(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 7))
	var seeds []*safetensors.File
	for _, c := range torchCases() {
		seeds = append(seeds, c.file(r))
	}
	for _, cases := range [][]opCase{ropeCases(r), rmsCases(r), swigluCases(r), blockCases(r)} {
		for _, c := range cases {
			seeds = append(seeds, c.in)
		}
	}
	for _, s := range seeds {
		data, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		if len(data) <= 16<<10 { // small seeds: the mutator works on every byte
			f.Add(data)
		}
	}
	ops := slices.DeleteFunc(slices.Clone(oracle.Ops), func(op string) bool { return op == "decoder" })
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := safetensors.Parse(data)
		if err != nil {
			return
		}
		for _, op := range ops {
			for _, dtype := range []string{"float64", "float32"} {
				out, err := oracle.Run(op, in, dtype)
				if err != nil {
					if strings.Contains(err.Error(), "\n") {
						t.Fatalf("%s %s: error %q is not one line", op, dtype, err)
					}
					continue
				}
				b, err := out.MarshalBinary()
				if err != nil {
					t.Fatalf("%s %s: the result does not write: %v", op, dtype, err)
				}
				if _, err := safetensors.Parse(b); err != nil {
					t.Fatalf("%s %s: the result written does not read: %v", op, dtype, err)
				}
			}
		}
	})
}
