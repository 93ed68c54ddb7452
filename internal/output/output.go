// Package output holds the one rule of attnlab's commands for what they
// write: nothing already written is lost. A command claims each target
// before any work:
//
//   - the target is locked for the command's process (atomicfile.Lock): a
//     second command writing it at once is refused, naming the process
//     that holds it;
//   - what an earlier, killed run of a command left is recovered
//     (atomicfile.Recover): a folder caught between the two renames of its
//     swap gets its newest complete copy back, the rest of the
//     temporaries, and only what provably is atomicfile's, is removed —
//     beside the target only the target's own, inside a target folder all;
//   - a target that is one of the command's inputs, holds one, or is an
//     existing file inside an input folder (so that writing it would
//     destroy an input) is refused, whatever the flags, comparing paths
//     with symbolic links resolved as well as the files themselves;
//   - an existing result (a file, or a folder that is not empty) is refused
//     unless the user asked to replace or continue it (-force, -resume).
//
// The writes themselves go through package atomicfile, so a failure or an
// interrupt leaves the previous state as it was.
package output

import (
	"errors"
	"fmt"
	"io/fs"
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

// ErrNoPath is wrapped by the error for an empty path: a usage error.
var ErrNoPath = errors.New("no path")

// ErrLocked is wrapped by the error for a target another process is
// writing.
var ErrLocked = atomicfile.ErrLocked

// Target is something a command is about to write.
type Target struct {
	Path    string
	Flag    string // the flag that named it ("-out"), for the errors
	Replace bool   // the user asked to replace (or continue) an existing result
	Hint    string // what the user may do instead, for the refusal ("-force replaces it")
	// Holds, when not nil, says what an existing result holds ("it holds
	// a run at step 40 of 40"), for the refusal; it is asked after the
	// recovery of interrupted writes.
	Holds  func() string
	Inputs []string // files and folders the command reads: never written over
}

// A Claim is a checked and locked target; Release it when the command is
// done writing.
type Claim struct {
	Path string
	// Recovered says what the claim recovered or removed of interrupted
	// earlier writes, a line each.
	Recovered []string
	lock      *atomicfile.PathLock
	target    Target
	made      []string // folders ClaimDir made, deepest first
}

// CheckInputs refuses the claimed target if it is, holds or would replace
// part of one of inputs: the inputs a command learns of only from its
// first input's contents (a checkpoint named inside an input file).
func (c *Claim) CheckInputs(inputs ...string) error {
	t := c.target
	t.Inputs = inputs
	return t.inputs()
}

// Release unlocks the target and removes the folders ClaimDir made for
// it that are still empty: a refused or failed command leaves nothing
// behind. A nil claim is a no-op.
func (c *Claim) Release() {
	if c == nil {
		return
	}
	c.lock.Unlock()
	removeEmpty(c.made)
}

// removeEmpty removes the folders dirs, deepest first, up to the first
// that is not empty.
func removeEmpty(dirs []string) {
	for _, dir := range dirs {
		if os.Remove(dir) != nil {
			return
		}
	}
}

// ClaimFile checks the target as a file and locks it (see the package
// doc). The folder it lies in must exist.
func (t Target) ClaimFile() (*Claim, error) {
	if err := t.named(); err != nil {
		return nil, err
	}
	if dir := filepath.Dir(filepath.Clean(t.Path)); !isDir(dir) {
		return nil, fmt.Errorf("%s: the folder %s does not exist", t.Path, dir)
	}
	c, err := t.claim()
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(t.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = nil
	case err != nil:
	case fi.IsDir():
		err = fmt.Errorf("%s is a folder, not a file", t.Path)
	case !t.Replace:
		err = t.exists("exists")
	}
	if err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

// ClaimDir checks the target as a folder and locks it (see the package
// doc). Missing folders it lies in are made. A folder that holds only
// temporaries of interrupted writes counts as empty.
func (t Target) ClaimDir() (*Claim, error) {
	if err := t.named(); err != nil {
		return nil, err
	}
	var made []string
	if parent := filepath.Dir(filepath.Clean(t.Path)); !isDir(parent) {
		for d := parent; !exists(d); d = filepath.Dir(d) {
			made = append(made, d)
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%s: cannot make the folder %s: %w", t.Path, parent, err)
		}
	}
	c, err := t.claim()
	if err != nil {
		removeEmpty(made)
		return nil, err
	}
	c.made = made
	if err := t.checkDir(c); err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

func (t Target) checkDir(c *Claim) error {
	fi, err := os.Stat(t.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a folder", t.Path)
	}
	did, err := atomicfile.RecoverIn(t.Path)
	c.Recovered = append(c.Recovered, did...)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Path, err)
	}
	entries, err := os.ReadDir(t.Path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !atomicfile.IsTemporary(e.Name()) && !t.Replace {
			return t.exists("is not empty")
		}
	}
	return nil
}

// claim locks the target, recovers what is beside it, and refuses inputs.
func (t Target) claim() (*Claim, error) {
	lock, err := atomicfile.Lock(t.Path)
	if err != nil {
		return nil, err
	}
	c := &Claim{Path: t.Path, lock: lock, target: t}
	did, err := atomicfile.Recover(t.Path)
	c.Recovered = did
	if err == nil {
		err = t.inputs()
	}
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	return c, nil
}

// named refuses an empty path.
func (t Target) named() error {
	if strings.TrimSpace(t.Path) == "" {
		flag := t.Flag
		if flag == "" {
			flag = "the output"
		}
		return refusal{fmt.Sprintf("%s is empty: name a path to write", flag), ErrNoPath}
	}
	return nil
}

func (t Target) exists(what string) error {
	msg := fmt.Sprintf("%s %s", t.Path, what)
	if t.Holds != nil {
		msg += ": " + t.Holds()
	}
	if t.Hint != "" {
		msg += ": " + t.Hint
	} else {
		msg += ": -force replaces it"
	}
	return refusal{msg, ErrExists}
}

// refusal is an error that says msg and wraps kind (ErrExists, ErrInput).
type refusal struct {
	msg  string
	kind error
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.kind }

// inputs refuses a target that is or holds an input, or that would replace
// a file inside an input folder, by the paths as typed and with symbolic
// links resolved, and by the files themselves (a hard link).
func (t Target) inputs() error {
	outs, err := spellings(t.Path)
	if err != nil {
		return err
	}
	outInfo, outErr := os.Stat(t.Path) // outInfo nil when missing: SameFile is then false
	outExists := outErr == nil
	for _, in := range t.Inputs {
		if in == "" {
			continue
		}
		ins, err := spellings(in)
		if err != nil {
			return err
		}
		inInfo, inErr := os.Stat(in)
		clash := os.SameFile(outInfo, inInfo)
		for _, o := range outs {
			for _, i := range ins {
				if o == i || within(i, o) { // the input itself, or inside the output
					clash = true
				}
				if outExists && inErr == nil && inInfo.IsDir() && within(o, i) { // would replace part of an input folder
					clash = true
				}
			}
		}
		if clash {
			return refusal{fmt.Sprintf("%s: the output would overwrite the input %s", t.Path, in), ErrInput}
		}
	}
	return nil
}

// spellings returns path made absolute, and with symbolic links resolved
// (as far as it exists: a path to be made is resolved through its nearest
// existing folder).
func spellings(path string) ([]string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	real, rest := abs, ""
	for {
		r, err := filepath.EvalSymlinks(real)
		if err == nil {
			real = filepath.Join(r, rest)
			break
		}
		parent := filepath.Dir(real)
		if parent == real {
			real = abs
			break
		}
		rest = filepath.Join(filepath.Base(real), rest)
		real = parent
	}
	if real == abs {
		return []string{abs}, nil
	}
	return []string{abs, real}, nil
}

// Inside reports whether path lies inside the folder dir, by the paths as
// typed or with symbolic links resolved.
func Inside(path, dir string) bool {
	ps, err1 := spellings(path)
	ds, err2 := spellings(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, p := range ps {
		for _, d := range ds {
			if within(p, d) {
				return true
			}
		}
	}
	return false
}

// within reports whether path lies inside dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// File claims path as a file (see Target.ClaimFile).
func File(path string, force bool, inputs ...string) (*Claim, error) {
	return Target{Path: path, Replace: force, Inputs: inputs}.ClaimFile()
}

// Dir claims dir as a folder (see Target.ClaimDir).
func Dir(dir string, force bool, inputs ...string) (*Claim, error) {
	return Target{Path: dir, Replace: force, Inputs: inputs}.ClaimDir()
}
