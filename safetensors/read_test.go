package safetensors

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// endless is a stream of zero bytes after prefix, like a FIFO fed from
// /dev/zero; it counts the bytes read and ends with errEndless after max.
type endless struct {
	prefix *bytes.Reader
	n, max int64
}

var errEndless = errors.New("the endless stream was read past its cap")

func (e *endless) Read(p []byte) (int, error) {
	if e.prefix.Len() > 0 {
		n, _ := e.prefix.Read(p)
		e.n += int64(n)
		return n, nil
	}
	if e.n >= e.max {
		return 0, errEndless
	}
	p = p[:min(int64(len(p)), e.max-e.n)]
	clear(p)
	e.n += int64(len(p))
	return len(p), nil
}

// TestReadFileBounded: ReadFile refuses, in one line naming the path,
// inputs that would make it read without end or allocate what a header
// merely claims.
func TestReadFileBounded(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"header claims 1e15 bytes", rawLen(1e15, "{}"), "exceeds the limit"},
		{"tensor claims 1e15 bytes", raw(`{"x":{"dtype":"I64","shape":[125000000000000],"data_offsets":[0,1000000000000000]}}`, 8), "extend beyond the 8-byte data buffer"},
	} {
		path := filepath.Join(dir, "f.safetensors")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path)
		if err == nil || !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: ReadFile: %v, want one line naming %s and saying %q", c.name, err, path, c.want)
		}
	}

	// /dev/zero: a zero header length, refused after 8 bytes
	if _, err := os.Stat("/dev/zero"); err == nil {
		done := make(chan error, 1)
		go func() { _, err := ReadFile("/dev/zero"); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != "safetensors: /dev/zero: header is empty (offset 8)" {
				t.Errorf("ReadFile(/dev/zero): %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadFile(/dev/zero) still reading after 10 s")
		}
	}

	// a FIFO whose header claims a petabyte of data: refused from the
	// header, before any of the data is read
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	huge := raw(`{"x":{"dtype":"I64","shape":[125000000000000],"data_offsets":[0,1000000000000000]}}`, 0)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.Write(huge)
		io.Copy(w, &endless{prefix: bytes.NewReader(nil), max: 1 << 40})
	}()
	_, err := ReadFile(fifo)
	if err == nil || !strings.HasPrefix(err.Error(), "safetensors: "+fifo+": tensor data of 1000000000000000 bytes (the header's data_offsets) needs 2.0 PB of memory") {
		t.Errorf("ReadFile(FIFO claiming 1e15 bytes): %v, want a refusal for memory", err)
	}
}

// FuzzReadFile checks the path commands read safetensors by (ReadFile,
// which reads with readBounded): from a regular file, readBounded gives
// Parse what Parse of the file's bytes gives; from a stream that goes on
// with zeros after the bytes (a FIFO, /dev/zero), it reads no more than
// the header asks for, one byte beyond its tensors' data. ReadFile's own
// part, opening the file and naming it in errors, is TestReadFileBounded's.
// (The bytes are not written to a file here: an exec writing one is slow
// enough that the fuzzer spends its time minimizing.)
func FuzzReadFile(f *testing.F) {
	valid, err := sample().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := New().MarshalBinary()
	for _, seed := range [][]byte{
		valid, empty, handBuilt, raw(`{`+okW+`}`, 8), valid[:len(valid)-1], valid[:20], nil, valid[:5],
		rawLen(1<<40, "{}"), rawLen(0, ""), raw(`{"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 9),
		raw(`{"x":{"dtype":"I64","shape":[125000000000000],"data_offsets":[0,1000000000000000]}}`, 8),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, perr := Parse(data)

		// a regular file of these bytes
		read, err := readBounded(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("readBounded of a %d-byte file: %v", len(data), err)
		}
		got, err := Parse(read)
		switch {
		case (err == nil) != (perr == nil):
			t.Fatalf("Parse of what readBounded read: %v; Parse of the file's bytes: %v", err, perr)
		case err != nil:
			if msg := err.Error(); !strings.HasPrefix(msg, "safetensors: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line", msg)
			}
		case !equalFiles(got, want) || !bytes.Equal(read, data):
			t.Fatal("readBounded of a valid file did not read the file")
		}

		// the same bytes as a stream that goes on with zeros
		s := &endless{prefix: bytes.NewReader(data), max: int64(len(data)) + 1<<20}
		read, err = readBounded(s, -1)
		if errors.Is(err, errEndless) {
			return // the header asks for more than a megabyte of data
		}
		if perr == nil {
			// a valid file: all of it and one byte beyond, to see that the
			// stream goes on
			if err != nil || s.n != int64(len(data))+1 || !bytes.Equal(read[:len(data)], data) {
				t.Fatalf("read %d bytes of a stream whose valid file is %d bytes (%v)", s.n, len(data), err)
			}
			if _, err := Parse(read); err == nil {
				t.Fatal("Parse accepted a valid file followed by a byte")
			}
		}
	})
}
