package models

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// extract makes sure that a directory under root holds the files of folder
// name of fsys and returns it. The directory is named after the folder and a
// hash of its contents, so that a binary with other weights never reads
// these, and it is written to a temporary directory first and renamed into
// place, so that an interrupted extraction leaves nothing half-written and
// two processes extracting at once both succeed.
func extract(fsys fs.FS, name, root string) (string, error) {
	files, err := fs.ReadDir(fsys, name)
	if err != nil {
		return "", fmt.Errorf("models: no shipped model %q", name)
	}
	h := sha256.New()
	var names []string
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		names = append(names, f.Name())
	}
	slices.Sort(names)
	for _, n := range names {
		data, err := fs.ReadFile(fsys, path.Join(name, n))
		if err != nil {
			return "", fmt.Errorf("models: %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s %d\n", n, len(data))
		h.Write(data)
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%s", name, hex.EncodeToString(h.Sum(nil))[:16]))
	if complete(dir, names) {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	tmp, err := os.MkdirTemp(root, "."+name+"-*")
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	for _, n := range names {
		if err := copyOut(fsys, path.Join(name, n), filepath.Join(tmp, n)); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if complete(dir, names) { // another process got there first
			return dir, nil
		}
		return "", fmt.Errorf("models: %w", err)
	}
	return dir, nil
}

// complete reports whether dir holds every one of names.
func complete(dir string, names []string) bool {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return len(names) > 0
}

func copyOut(fsys fs.FS, src, dst string) error {
	in, err := fsys.Open(src)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("models: %s: %w", dst, err)
	}
	return out.Close()
}

// cacheRoot is where shipped models are extracted: attnlab/models in the
// user's cache directory, or in the temporary directory when there is none.
func cacheRoot() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "attnlab", "models")
	}
	return filepath.Join(os.TempDir(), "attnlab-models")
}
