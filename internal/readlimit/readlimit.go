// Package readlimit reads files and streams whole, but never more than a
// stated number of bytes: a file that is larger (or a stream that does not
// end, such as /dev/zero) is refused with a one-line error naming it and
// the limit, after reading at most one byte beyond the limit. Memory grows
// with the bytes actually read, so a size the file system reports is never
// trusted beyond the limit.
package readlimit

import (
	"fmt"
	"io"
	"os"
)

// A TooLargeError reports an input larger than its limit.
type TooLargeError struct {
	Name  string // the path, or what the stream holds
	Limit int64  // bytes
}

// Error returns "NAME: larger than LIMIT bytes".
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: larger than %d bytes", e.Name, e.Limit)
}

// File reads the file at path, which must hold at most limit bytes. An
// error from opening or reading is returned as os.ReadFile returns it (an
// *fs.PathError naming path); a file beyond the limit is a *TooLargeError,
// refused from its size before reading where the file is a regular one.
// It panics if limit is negative.
func File(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	if size > limit {
		return nil, &TooLargeError{path, limit}
	}
	data, err := read(f, path, limit, size)
	if err != nil {
		if _, ok := err.(*TooLargeError); ok {
			return nil, err
		}
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return data, nil
}

// SourceFileBytes bounds a source file read while walking a folder (a
// corpus, a folder to index): far above any hand-written Go file, it stops
// a link to /dev/zero or a device from being read without end.
const SourceFileBytes = 64 << 20

// All reads r to its end, which must come within limit bytes; beyond it
// the error is a *TooLargeError naming name. It panics if limit is
// negative.
func All(r io.Reader, name string, limit int64) ([]byte, error) {
	return read(r, name, limit, -1)
}

// read reads r to its end within limit bytes; size, when not negative, is
// the size the file system reports, used only to allocate once.
func read(r io.Reader, name string, limit, size int64) ([]byte, error) {
	if limit < 0 {
		panic(fmt.Sprintf("readlimit: negative limit %d for %s", limit, name))
	}
	// one byte beyond the limit tells a file of exactly limit bytes from a
	// larger one
	lr := &io.LimitedReader{R: r, N: limit + 1}
	var data []byte
	if size >= 0 {
		// the file may grow while it is read: ReadAll grows the buffer
		data = make([]byte, 0, size+1)
	}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, &TooLargeError{name, limit}
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
