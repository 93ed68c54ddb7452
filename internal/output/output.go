// Package output holds the one rule of attnlab's commands for what they
// write: nothing already written is lost. A command checks its targets
// before any work:
//
//   - an existing result (a file, or a folder that is not empty) is refused
//     unless the user asked to replace or continue it (-force, -resume);
//   - a target that is one of the command's inputs or holds one (so that
//     replacing it would destroy an input) is refused, whatever the flags;
//   - temporaries that an earlier, killed run left behind (package
//     atomicfile's names) are removed first, and do not make a folder
//     count as non-empty.
//
// The writes themselves go through package atomicfile (a temporary name,
// then a rename), so a failure or an interrupt leaves the previous state as
// it was.
package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// ErrExists is wrapped by the error for a target that holds a result the
// command was not told to replace.
var ErrExists = errors.New("exists")

// ErrInput is wrapped by the error for a target that is or holds one of
// the command's inputs.
var ErrInput = errors.New("is an input")

// Target is something a command is about to write.
type Target struct {
	Path    string
	Replace bool     // the user asked to replace (or continue) an existing result
	Hint    string   // what the user may do instead, for the refusal ("-force replaces it")
	Inputs  []string // files and folders the command reads: never written over
}

// File checks the target as a file (see the package doc).
func (t Target) File() error {
	if err := t.inputs(); err != nil {
		return err
	}
	if _, err := atomicfile.CleanStale(filepath.Dir(t.Path)); err != nil {
		return fmt.Errorf("%s: %w", t.Path, err)
	}
	fi, err := os.Stat(t.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a folder, not a file", t.Path)
	case !t.Replace:
		return t.exists("exists")
	}
	return nil
}

// Dir checks the target as a folder (see the package doc). A folder that
// holds only stale temporaries is cleaned and counts as empty.
func (t Target) Dir() error {
	if err := t.inputs(); err != nil {
		return err
	}
	// a ReplaceDir of the folder itself keeps its temporaries beside it
	if err := cleanStaleOf(t.Path); err != nil {
		return err
	}
	fi, err := os.Stat(t.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a folder", t.Path)
	}
	if _, err := atomicfile.CleanStale(t.Path); err != nil {
		return fmt.Errorf("%s: %w", t.Path, err)
	}
	entries, err := os.ReadDir(t.Path)
	if err != nil {
		return err
	}
	if len(entries) > 0 && !t.Replace {
		return t.exists("is not empty")
	}
	return nil
}

// cleanStaleOf removes the temporaries of path left beside it.
func cleanStaleOf(path string) error {
	dir, base := filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // a missing parent holds nothing stale
	}
	for _, e := range entries {
		if atomicfile.IsTemporary(e.Name()) && strings.HasPrefix(e.Name(), "."+base+".tmp") {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t Target) exists(what string) error {
	msg := fmt.Sprintf("%s %s", t.Path, what)
	if t.Hint != "" {
		msg += ": " + t.Hint
	} else {
		msg += ": -force replaces it"
	}
	return fmt.Errorf("%s (%w)", msg, ErrExists)
}

// inputs refuses a target that is or holds an input.
func (t Target) inputs() error {
	out, err := filepath.Abs(t.Path)
	if err != nil {
		return err
	}
	outInfo, outErr := os.Stat(out)
	for _, in := range t.Inputs {
		if in == "" {
			continue
		}
		abs, err := filepath.Abs(in)
		if err != nil {
			return err
		}
		same := abs == out || within(abs, out)
		if !same && outErr == nil {
			if inInfo, err := os.Stat(abs); err == nil && os.SameFile(outInfo, inInfo) {
				same = true
			}
		}
		if same {
			return fmt.Errorf("%s: the output would overwrite the input %s (%w)", t.Path, in, ErrInput)
		}
	}
	return nil
}

// within reports whether path lies inside dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// File checks that path may be written as a file: see Target.File.
func File(path string, force bool, inputs ...string) error {
	return Target{Path: path, Replace: force, Inputs: inputs}.File()
}

// Dir checks that dir may be written as a folder: see Target.Dir.
func Dir(dir string, force bool, inputs ...string) error {
	return Target{Path: dir, Replace: force, Inputs: inputs}.Dir()
}
