// Package atomicfile replaces files so that a reader, or a crash, sees the
// old content or the new, never a part: the new content goes to a
// temporary file in the same directory, which is synced and renamed over
// the old one. On error the temporary file is removed and the old file is
// left as it was.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
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
