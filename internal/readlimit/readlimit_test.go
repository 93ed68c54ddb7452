package readlimit

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// zeros is an endless stream of zero bytes, like /dev/zero, that counts
// what was read from it.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

func TestAll(t *testing.T) {
	for _, c := range []struct {
		data  string
		limit int64
		ok    bool
	}{
		{"", 0, true}, {"", 5, true}, {"abcde", 5, true}, {"abcdef", 5, false}, {"a", 0, false},
		{strings.Repeat("x", 100000), 100000, true}, {strings.Repeat("x", 100001), 100000, false},
	} {
		got, err := All(strings.NewReader(c.data), "NAME", c.limit)
		if c.ok {
			if err != nil || string(got) != c.data {
				t.Errorf("All(%d bytes, limit %d) = %d bytes, %v; want the bytes", len(c.data), c.limit, len(got), err)
			}
			continue
		}
		var tl *TooLargeError
		if !errors.As(err, &tl) || err.Error() != "NAME: larger than "+strconv.FormatInt(c.limit, 10)+" bytes" {
			t.Errorf("All(%d bytes, limit %d): error %v, want NAME: larger than %d bytes", len(c.data), c.limit, err, c.limit)
		}
	}
}

// TestAllEndlessStream: reading /dev/zero stops one byte past the limit.
func TestAllEndlessStream(t *testing.T) {
	z := &zeros{}
	if _, err := All(z, "stream", 1<<20); err == nil {
		t.Fatal("All of an endless stream succeeded")
	}
	if z.n > 1<<20+1 {
		t.Errorf("All read %d bytes of an endless stream, limit %d", z.n, 1<<20)
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := File(path, 5); err != nil || string(got) != "hello" {
		t.Errorf("File(limit 5) = %q, %v", got, err)
	}
	_, err := File(path, 4)
	if want := path + ": larger than 4 bytes"; err == nil || err.Error() != want {
		t.Errorf("File(limit 4): %v, want %s", err, want)
	}
	if _, err := File(filepath.Join(dir, "missing"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("File of a missing file: %v, want fs.ErrNotExist", err)
	}
	var pe *fs.PathError
	if _, err := File(dir, 5); !errors.As(err, &pe) || pe.Path != dir {
		t.Errorf("File of a folder: %v, want a *fs.PathError naming it", err)
	}
}

// TestFileDevZero: a character device reports size 0 and never ends.
func TestFileDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero:", err)
	}
	_, err := File("/dev/zero", 1<<16)
	if want := "/dev/zero: larger than 65536 bytes"; err == nil || err.Error() != want {
		t.Errorf("File(/dev/zero): %v, want %s", err, want)
	}
}

func TestAllReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("ab")), errReader{boom})
	if _, err := All(r, "x", 10); !errors.Is(err, boom) {
		t.Errorf("All: %v, want the read error", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
