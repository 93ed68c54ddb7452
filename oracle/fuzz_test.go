package oracle_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/oracle"
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
		if len(data) <= 2<<10 { // small seeds: each exec runs every op, and the fuzzer minimizes what it finds
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

// FuzzRunShapes: FuzzRun's property on inputs that stay files: a seed
// case with one tensor's dimension changed (its data resized, filled with
// a value) and one metadata key set, which explores the shape and
// metadata checks of every op that random bytes rarely reach.
func FuzzRunShapes(f *testing.F) {
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
	for i := range seeds {
		f.Add(uint8(i), uint8(0), uint8(0), uint8(1), "", "", 0.5)
	}
	f.Add(uint8(0), uint8(0), uint8(1), uint8(0), "scale", "0", 1.0)
	f.Add(uint8(1), uint8(1), uint8(2), uint8(3), "window", "-1", -2.0)
	f.Add(uint8(2), uint8(2), uint8(0), uint8(255), "causal", "maybe", 1e308)
	ops := slices.DeleteFunc(slices.Clone(oracle.Ops), func(op string) bool { return op == "decoder" })
	f.Fuzz(func(t *testing.T, seed, tensor, dim, size uint8, key, val string, fill float64) {
		src := seeds[int(seed)%len(seeds)]
		in := safetensors.New()
		for k, v := range src.Metadata {
			in.Metadata[k] = v
		}
		if key != "" {
			in.Metadata[key] = val
		}
		names := src.Names()
		changed := names[int(tensor)%len(names)]
		for _, name := range names {
			x := src.Tensors[name]
			shape := slices.Clone(x.Shape)
			if name == changed && len(shape) > 0 {
				shape[int(dim)%len(shape)] = int(size)
			}
			n := 1
			for _, d := range shape {
				n *= d
			}
			switch {
			case x.I64 != nil:
				data := slices.Clone(x.I64)
				if name == changed {
					data = make([]int64, n)
					for i := range data {
						data[i] = int64(fill)
					}
				}
				in.SetI64(name, shape, data)
			case x.F32 != nil:
				data := slices.Clone(x.F32)
				if name == changed {
					data = make([]float32, n)
					for i := range data {
						data[i] = float32(fill)
					}
				}
				in.SetF32(name, shape, data)
			default:
				data := slices.Clone(x.F64)
				if name == changed {
					data = make([]float64, n)
					for i := range data {
						data[i] = fill
					}
				}
				in.SetF64(name, shape, data)
			}
		}
		for _, op := range ops {
			out, err := oracle.Run(op, in, "float64")
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s: error %q is not one line", op, err)
				}
				continue
			}
			b, err := out.MarshalBinary()
			if err != nil {
				t.Fatalf("%s: the result does not write: %v", op, err)
			}
			if _, err := safetensors.Parse(b); err != nil {
				t.Fatalf("%s: the result written does not read: %v", op, err)
			}
		}
	})
}
