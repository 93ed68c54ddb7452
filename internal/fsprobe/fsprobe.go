// Package fsprobe checks, before a command's work, that the places it will
// write its results can be written: so that a result the work produced is
// not lost to a folder that is missing, is a file, or is read-only.
//
// A probe creates a temporary file (hidden, named .attnlab-probe-*) in the
// folder and removes it at once; nothing else is touched.
package fsprobe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// File checks that the file path can be written where it is: its folder
// exists and takes a new file (the writers of files do not create
// folders).
func File(path string) error {
	dir := filepath.Dir(filepath.Clean(path))
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: its folder %s does not exist", path, dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("cannot write %s: a parent of %s is not a folder", path, dir)
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot write %s: %s is not a folder", path, dir)
	}
	return probe(path, dir)
}

// Dir checks that the folder path can be made and written: the nearest of
// it and its parents that exists is a folder that takes a new entry (the
// writers of folders create the missing ones).
func Dir(path string) error {
	dir := filepath.Clean(path)
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("cannot write %s: %s is not a folder", path, dir)
			}
			return probe(path, dir)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) { // under a file: walk up to it
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		dir = parent
	}
}

// probe creates and removes a temporary file in dir.
func probe(path, dir string) error {
	f, err := os.CreateTemp(dir, ".attnlab-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write %s: no file can be made in %s: %w", path, dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
