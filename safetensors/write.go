package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// MarshalBinary encodes f in the safetensors format.
//
// The encoding is deterministic. The header holds "__metadata__" first,
// if f has metadata, with its keys sorted as by encoding/json, then the
// tensors ordered by name; the data buffer holds the tensors in the same
// order, without gaps. The header is padded with spaces so that the data
// buffer starts at a multiple of 8 bytes.
//
// MarshalBinary returns an error if a tensor is nil or inconsistent (see
// [Tensor]), if a tensor is named "__metadata__", or if a name or
// metadata string is not valid UTF-8.
func (f *File) MarshalBinary() ([]byte, error) {
	var hdr bytes.Buffer
	enc := json.NewEncoder(&hdr)
	enc.SetEscapeHTML(false)
	// encode appends the JSON encoding of v to hdr, without the newline
	// that the encoder adds.
	encode := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("safetensors: %v", err)
		}
		hdr.Truncate(hdr.Len() - 1)
		return nil
	}

	hdr.WriteByte('{')
	sep := false
	if len(f.Metadata) > 0 {
		for k, v := range f.Metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, fmt.Errorf("safetensors: metadata key %q: key or value is not valid UTF-8", k)
			}
		}
		hdr.WriteString(`"` + metadataKey + `":`)
		if err := encode(f.Metadata); err != nil {
			return nil, err
		}
		sep = true
	}

	names := f.Names()
	offset := 0
	for _, name := range names {
		t := f.Tensors[name]
		switch {
		case name == metadataKey:
			return nil, fmt.Errorf("safetensors: tensor name %q is reserved", name)
		case !utf8.ValidString(name):
			return nil, fmt.Errorf("safetensors: tensor %q: name is not valid UTF-8", name)
		case t == nil:
			return nil, fmt.Errorf("safetensors: tensor %q is nil", name)
		}
		nbytes, err := t.check(name)
		if err != nil {
			return nil, err
		}
		if nbytes > math.MaxInt-offset {
			return nil, fmt.Errorf("safetensors: tensor %q: data buffer too large", name)
		}
		if sep {
			hdr.WriteByte(',')
		}
		sep = true
		if err := encode(name); err != nil {
			return nil, err
		}
		hdr.WriteString(`:{"dtype":"` + string(t.DType) + `","shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, offset, offset+nbytes)
		offset += nbytes
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxHeaderLen {
		return nil, fmt.Errorf("safetensors: header is %d bytes, more than the limit of %d", hdr.Len(), MaxHeaderLen)
	}
	if offset > math.MaxInt-headerStart-hdr.Len() {
		return nil, fmt.Errorf("safetensors: file too large")
	}

	out := make([]byte, headerStart, headerStart+hdr.Len()+offset)
	binary.LittleEndian.PutUint64(out, uint64(hdr.Len()))
	out = append(out, hdr.Bytes()...)
	for _, name := range names {
		t := f.Tensors[name]
		switch t.DType {
		case F32:
			for _, v := range t.F32 {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		case F64:
			for _, v := range t.F64 {
				out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
			}
		case BF16:
			for _, v := range t.BF16 {
				out = binary.LittleEndian.AppendUint16(out, v)
			}
		case F16:
			for _, v := range t.F16 {
				out = binary.LittleEndian.AppendUint16(out, v)
			}
		case I64:
			for _, v := range t.I64 {
				out = binary.LittleEndian.AppendUint64(out, uint64(v))
			}
		}
	}
	return out, nil
}

// writeData writes b to the temporary file; tests replace it to
// simulate a failing disk.
var writeData = func(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// WriteFile writes f to path in the safetensors format, replacing path
// atomically: the data goes to a temporary file in the same directory,
// which is synced, closed and then renamed to path. On any error the
// temporary file is removed and an existing file at path is left
// untouched.
//
// A new file gets permissions 0644; a replaced file keeps its
// permissions.
func WriteFile(path string, f *File) (err error) {
	data, err := f.MarshalBinary()
	if err != nil {
		return &fileError{path, err}
	}
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return writeData(w, data) }); err != nil {
		return &fileError{path, err}
	}
	return nil
}
