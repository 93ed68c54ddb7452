// Package atomicfile replaces files and folders so that a reader, or a
// crash, sees the old content or the new, never a part.
//
// A file is written to a temporary file beside it, synced and renamed over
// the old one. A folder is built whole in a temporary folder beside it,
// marked complete, and swapped in with two renames (the old one aside, the
// new one in); a kill between the two leaves both copies, and Recover puts
// the newest complete one back. On error the temporaries are removed and
// the old file or folder is left as it was (or put back).
//
// Only what is provably this package's is ever removed: a temporary's name
// carries a random part and a check of it (".NAME.attnlab-RANDOM-CHECK.KIND",
// see IsTemporary), so no name a user gives a file matches it by chance,
// and a temporary still being written is locked (flock) by the process that
// writes it, so another process never takes it for a leftover.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TestHook, when not nil, is called at each step of a write, swap or
// recovery with the step's name ("write:synced", "dir:aside", …; see
// Steps). It is for tests only: a test ends the process there (os.Exit,
// which runs no deferred cleanup) to prove that a kill at any step loses
// nothing.
var TestHook func(step string)

// Steps are the names TestHook is called with, in the order they happen:
// a file's Write, a folder's ReplaceDir, and Recover's swap of a complete
// copy into place.
var Steps = []string{
	"write:synced", "write:renamed",
	"dir:filled", "dir:marked", "dir:aside", "dir:in", "dir:unmarked", "dir:done",
	"recover:aside", "recover:in", "recover:unmarked",
}

func step(name string) {
	if TestHook != nil {
		TestHook(name)
	}
}

// Write replaces the file at path with what write writes (buffered), with
// permissions perm for a new file; a replaced regular file keeps its own.
// The error of write is returned as is; an error of the file system names
// path, not the temporary.
func Write(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	defer Saving()()
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm()
	}
	dir, base := split(path)
	f, err := createTemp(dir, base)
	if err != nil {
		return pathError("write", path, err)
	}
	closed := false
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
		if !closed {
			f.Close() // the lock goes with it
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return pathError("write", path, err)
	}
	if err := f.Chmod(perm); err != nil { // created 0600
		return pathError("write", path, err)
	}
	if err := f.Sync(); err != nil {
		return pathError("write", path, err)
	}
	step("write:synced")
	if err := os.Rename(f.Name(), path); err != nil {
		return pathError("write", path, err)
	}
	step("write:renamed")
	syncDir(dir)
	closed = true
	return f.Close()
}

// WriteFile replaces the file at path with data (see Write).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// createTemp creates and locks a new temporary file for base in dir (its
// 48 random bits make a clash of names as good as impossible; O_EXCL
// makes one an error, never a shared file).
func createTemp(dir, base string) (*os.File, error) {
	name := filepath.Join(dir, tempName(base, kindFile, newID()))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		os.Remove(name)
		return nil, err
	}
	return f, nil
}

// ReplaceDir builds the folder dir whole: fill writes its contents into a
// fresh temporary folder beside dir, which is then given permissions 0755,
// marked complete and swapped in (an existing dir renamed aside, the new
// one renamed in, the old one removed). At no moment is a half-written
// folder at dir; on error dir is left as it was (or put back); after a
// kill at any step, Recover finds the newest complete copy. The error of
// fill is returned wrapped so that it names dir where it named the
// temporary folder (errors.Is and As see it); an error of the file system
// names dir, not the temporary.
func ReplaceDir(dir string, fill func(tmp string) error) (err error) {
	defer Saving()()
	parent, base := split(dir)
	id := newID()
	tmp := filepath.Join(parent, tempName(base, kindNew, id))
	done := filepath.Join(parent, tempName(base, kindDone, id))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return pathError("write", dir, err)
	}
	// held until the swap is over: another process sees a folder in use
	lock, err := lockDir(tmp)
	if err != nil {
		os.Remove(tmp)
		return pathError("write", dir, err)
	}
	defer lock.Close()
	defer func() {
		if err != nil {
			os.Remove(done) // first: a folder without its mark is never restored
			os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return inside{err, tmp, dir}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return pathError("write", dir, err)
	}
	syncDir(tmp)
	step("dir:filled")
	// the mark: tmp is complete, and replaces what is at dir now
	fi, statErr := os.Lstat(dir)
	replaces := "none"
	if statErr == nil {
		replaces = identity(fi)
	}
	if err := writeMark(done, replaces); err != nil {
		return pathError("write", dir, err)
	}
	syncDir(parent)
	step("dir:marked")
	var old string
	if statErr == nil {
		old = filepath.Join(parent, tempName(base, kindOld, newID()))
		if l, err := lockDir(dir); err == nil { // the old copy is in use until removed
			defer l.Close()
		}
		if err := os.Rename(dir, old); err != nil {
			return pathError("write", dir, err)
		}
		step("dir:aside")
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return pathError("write", dir, err)
	}
	syncDir(parent)
	step("dir:in")
	os.Remove(done)
	step("dir:unmarked")
	if old != "" {
		os.RemoveAll(old)
	}
	step("dir:done")
	return nil
}

// inside is an error of fill, which may name files inside the temporary
// folder: it names them inside dir, where the user will look.
type inside struct {
	err      error
	tmp, dir string
}

func (e inside) Error() string { return strings.ReplaceAll(e.err.Error(), e.tmp, e.dir) }
func (e inside) Unwrap() error { return e.err }

// writeMark writes the mark of a complete temporary folder: when it was
// completed and what it replaces (the identity of the folder at its
// target then, or "none").
func writeMark(path, replaces string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %d %s\n", markMagic, time.Now().UnixNano(), replaces); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// markMagic begins the mark of a complete temporary folder.
const markMagic = "attnlab-complete"

// readMark returns the time and the replaced identity of a mark.
func readMark(path string) (int64, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, "", err
	}
	var magic, replaces string
	var t int64
	if _, err := fmt.Sscanf(string(data), "%s %d %s", &magic, &t, &replaces); err != nil || magic != markMagic {
		return 0, "", fmt.Errorf("%s: not a mark of a complete folder", path)
	}
	return t, replaces, nil
}

// split returns the folder of path ("." for a bare name) and its last
// element.
func split(path string) (dir, base string) {
	path = filepath.Clean(path)
	return filepath.Dir(path), filepath.Base(path)
}

// syncDir makes renames in dir durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// pathError reports err of an operation on path, which the user named:
// never the temporary's name, and a missing folder said as such.
func pathError(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if dir := filepath.Dir(filepath.Clean(path)); !exists(dir) {
			return &missingFolderError{op: op, path: path, dir: dir}
		}
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// missingFolderError says the folder a file was to be written in does
// not exist; it is an fs.ErrNotExist.
type missingFolderError struct{ op, path, dir string }

func (e *missingFolderError) Error() string {
	return fmt.Sprintf("%s %s: the folder %s does not exist", e.op, e.path, e.dir)
}

func (e *missingFolderError) Unwrap() error { return fs.ErrNotExist }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
