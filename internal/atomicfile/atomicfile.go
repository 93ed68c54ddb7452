// Package atomicfile replaces files so that a reader, or a crash, sees the
// old content or the new, never a part: the new content goes to a
// temporary file in the same directory, which is synced and renamed over
// the old one. On error the temporary file is removed and the old file is
// left as it was.
package atomicfile

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// Write replaces the file at path with what write writes (buffered), with
// permissions perm for a new file; a replaced regular file keeps its own.
// The error of write, or of writing the file, is returned as is.
func Write(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil { // CreateTemp makes it 0600
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// make the rename durable where the platform allows it
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteFile replaces the file at path with data (see Write).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// ReplaceDir builds the directory dir whole: fill writes its contents into
// a fresh temporary directory beside dir, which is then given permissions
// 0755 and renamed into place. An existing dir is moved aside first and
// removed after, so at no moment is a half-written directory at dir, and
// on error dir is left as it was (or put back). The error of fill, or of
// the renames, is returned as is.
func ReplaceDir(dir string, fill func(tmp string) error) error {
	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return err
	}
	var old string
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}

// stale matches the names of the temporaries Write and ReplaceDir make:
// ".NAME.tmp123" (a file), ".NAME.tmp-123" (a folder) and ".NAME.tmp-123.old"
// (the folder a ReplaceDir moved aside).
var stale = regexp.MustCompile(`^\..+\.tmp-?[0-9]+(\.old)?$`)

// IsTemporary reports whether name is that of a temporary file or folder
// of this package.
func IsTemporary(name string) bool { return stale.MatchString(name) }

// CleanStale removes the temporaries that a process killed in the middle of
// a Write or ReplaceDir left in dir, and returns their names. A missing dir
// holds none.
func CleanStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !IsTemporary(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
