package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/safetensors"
)

// Converted reports what Convert wrote.
type Converted struct {
	Files    int   // files in the new checkpoint
	Tensors  int   // tensors whose dtype changed
	InBytes  int64 // total size of the files read
	OutBytes int64 // total size of the files written
}

// Convert writes a copy of the checkpoint directory in to out, with the
// floating-point tensors of every *.safetensors file stored as dtype d (F32,
// F64, BF16 or F16; see safetensors.File.Convert: narrowing rounds to
// nearest, ties to even, and a finite value beyond the range of d is an
// error). Integer tensors, metadata and every other file (config.json,
// tokenizer.json, dense.json, …) are copied as they are, and a safetensors
// file with nothing to convert is copied byte for byte. Load, and the
// loaders built on it, read the converted checkpoint as they read the
// original, so a BF16 or F16 copy ships the weights at half the size of F32.
//
// in must hold config.json and only files: a folder inside it (a dense
// index's encoder/, say) is an error, as a converted encoder would no longer
// be the one that made the index's embeddings. Temporaries that an
// interrupted write left in it are skipped.
//
// out may not be in, lie inside it or hold it. It is written whole under a
// temporary name beside it and renamed into place, replacing an existing
// out only once complete (as Save does), so a failed or interrupted Convert
// leaves no half-written directory. Whether an existing out may be replaced
// is the caller's decision. Errors name the file, and the tensor when there
// is one.
func Convert(ctx context.Context, in, out string, d safetensors.DType) (Converted, error) {
	var c Converted
	if !d.IsFloat() {
		return c, fmt.Errorf("model: convert: dtype %q: want F32, F64, BF16 or F16", d)
	}
	if fi, err := os.Stat(in); err != nil {
		return c, fmt.Errorf("model: convert: %w", err)
	} else if !fi.IsDir() {
		return c, fmt.Errorf("model: convert: %s is a file, not a checkpoint directory", in)
	}
	if err := separate(in, out); err != nil {
		return c, err
	}
	entries, err := os.ReadDir(in)
	if err != nil {
		return c, fmt.Errorf("model: convert: %w", err)
	}
	if _, err := os.Stat(filepath.Join(in, ConfigFile)); err != nil {
		return c, fmt.Errorf("model: convert: %s holds no %s: not a checkpoint directory", in, ConfigFile)
	}
	var names []string
	for _, e := range entries {
		if atomicfile.IsTemporary(e.Name()) {
			continue
		}
		path := filepath.Join(in, e.Name())
		fi, err := os.Stat(path) // through a symbolic link
		switch {
		case err != nil:
			return c, fmt.Errorf("model: convert: %w", err)
		case fi.IsDir():
			return c, fmt.Errorf("model: convert: %s is a folder: convert a checkpoint directory, which holds only files", path)
		case !fi.Mode().IsRegular():
			return c, fmt.Errorf("model: convert: %s is not a regular file", path)
		}
		names = append(names, e.Name())
	}
	err = atomicfile.ReplaceDir(out, func(tmp string) error {
		for _, name := range names {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			path := filepath.Join(in, name)
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			c.InBytes += int64(len(data))
			if strings.HasSuffix(name, ".safetensors") {
				f, err := safetensors.Parse(data)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				n, err := f.Convert(d)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				if n > 0 {
					if data, err = f.MarshalBinary(); err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
				}
				c.Tensors += n
			}
			if err := writeSynced(filepath.Join(tmp, name), data); err != nil {
				return err
			}
			c.Files++
			c.OutBytes += int64(len(data))
		}
		return nil
	})
	if err != nil {
		return Converted{}, fmt.Errorf("model: convert: %w", err)
	}
	return c, nil
}

// separate returns an error unless the directories in and out are apart:
// out is not in, does not lie inside it and does not hold it (symbolic
// links resolved).
func separate(in, out string) error {
	realIn, err := filepath.Abs(in)
	if err == nil {
		realIn, err = filepath.EvalSymlinks(realIn)
	}
	if err != nil {
		return fmt.Errorf("model: convert: %w", err)
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("model: convert: %w", err)
	}
	// out need not exist, but its parent must for the rename into place
	parent, err := filepath.EvalSymlinks(filepath.Dir(absOut))
	if err != nil {
		return fmt.Errorf("model: convert: the folder of the output %s: %w", out, err)
	}
	realOut := filepath.Join(parent, filepath.Base(absOut))
	if r, err := filepath.EvalSymlinks(realOut); err == nil {
		realOut = r
	}
	if realOut == realIn || within(realOut, realIn) || within(realIn, realOut) {
		return fmt.Errorf("model: convert: the output %s would overwrite the input %s (it is the input, lies inside it or holds it)", out, in)
	}
	return nil
}

// within reports whether path lies inside dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
