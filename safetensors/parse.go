package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/attnlab/attnlab/internal/memlimit"
)

const (
	// MaxHeaderLen is the largest header, in bytes, that Parse accepts
	// and MarshalBinary produces.
	MaxHeaderLen = 100 << 20

	// headerStart is the file offset of the first byte of the header.
	headerStart = 8

	// maxDepth limits the nesting of JSON arrays and objects in the
	// header, so that skipping an unknown field cannot use unbounded
	// memory.
	maxDepth = 128
)

// A FormatError reports that the input is not a valid safetensors file.
type FormatError struct {
	Offset int64  // byte offset in the file where the problem was found, or -1
	Msg    string // description of the problem
}

// Error returns the message, prefixed with "safetensors: " and followed
// by the offset when it is not negative.
func (e *FormatError) Error() string {
	if e.Offset < 0 {
		return "safetensors: " + e.Msg
	}
	return "safetensors: " + e.Msg + " (offset " + strconv.FormatInt(e.Offset, 10) + ")"
}

// formatErrorf returns a *FormatError at offset off.
func formatErrorf(off int64, format string, args ...any) *FormatError {
	return &FormatError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// A fileError wraps an error with the name of the file it concerns.
type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string {
	return "safetensors: " + e.path + ": " + strings.TrimPrefix(e.err.Error(), "safetensors: ")
}

func (e *fileError) Unwrap() error { return e.err }

// ReadFile reads and parses the safetensors file at path.
// Errors name the path and wrap the underlying error, so that
// errors.As can retrieve a [*FormatError].
//
// It reads no more than the header asks for: the 8-byte length, a header
// of at most MaxHeaderLen bytes, then the data its tensors cover and one
// byte more (to find trailing bytes). Data that would not fit in memory
// is refused before it is read, so a stream that does not end (a FIFO,
// /dev/zero) or a header claiming petabytes is a one-line error.
func ReadFile(path string) (*File, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, &fileError{path, err}
	}
	defer r.Close()
	size := int64(-1)
	if fi, err := r.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	data, err := readBounded(r, size)
	if err != nil {
		return nil, &fileError{path, err}
	}
	f, err := Parse(data)
	if err != nil {
		return nil, &fileError{path, err}
	}
	return f, nil
}

// readBounded reads a safetensors file from r for Parse, reading only
// what the header asks for. size is the file's size when r is a regular
// file, else -1. Where the prefix or the header is malformed it returns
// the bytes read so far, for Parse to report.
func readBounded(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, headerStart)
	if n, err := io.ReadFull(r, data); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return data[:n], nil
		}
		return nil, err
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderLen {
		return data, nil
	}
	header, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, err
	}
	data = append(data, header...)
	need, ok := dataLen(header)
	if !ok {
		return data, nil
	}
	out := bytes.NewBuffer(data)
	if size < 0 || size-int64(len(data)) >= need {
		// the data may be there: the memory for it (the decoded tensors
		// hold as many bytes again) before it is read
		if err := memlimit.Check(fmt.Sprintf("tensor data of %d bytes (the header's data_offsets)", need), memlimit.Mul(2, int(need)), "memory"); err != nil {
			return nil, err
		}
		if size >= 0 {
			out.Grow(int(need) + bytes.MinRead) // one allocation for a regular file
		}
	}
	// else a regular file shorter than the header says: read what it
	// holds, for Parse to report
	lim := need
	if lim < math.MaxInt64 {
		lim++
	}
	if _, err := out.ReadFrom(io.LimitReader(r, lim)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// dataLen returns the length of the data buffer the tensors of header
// cover (the largest end of their data_offsets), or false when the header
// is malformed.
func dataLen(header []byte) (int64, bool) {
	if len(header) == 0 || !utf8.Valid(header) || header[0] != '{' {
		return 0, false
	}
	p := &headerParser{header: header, bufLen: math.MaxInt64}
	p.dec = json.NewDecoder(bytes.NewReader(header))
	p.dec.UseNumber()
	entries, _, err := p.parse()
	if err != nil {
		return 0, false
	}
	var end int64
	for _, e := range entries {
		end = max(end, e.end)
	}
	return end, true
}

// An entry is one tensor as described by the header.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end int64
}

// Parse parses a safetensors file held in data. The returned File does
// not share memory with data; its Tensors and Metadata maps are non-nil.
//
// Malformed input is reported as a [*FormatError]. A well-formed tensor
// whose dtype is not F32, F64, BF16, F16 or I64 is reported with an error naming the
// tensor and its dtype.
func Parse(data []byte) (*File, error) {
	if len(data) < headerStart {
		return nil, formatErrorf(0, "file is %d bytes, too short to hold the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderLen {
		return nil, formatErrorf(0, "header length %d exceeds the limit of %d bytes", n, MaxHeaderLen)
	}
	if rest := uint64(len(data) - headerStart); n > rest {
		return nil, formatErrorf(0, "header length %d exceeds the %d bytes remaining in the file", n, rest)
	}
	header := data[headerStart : headerStart+n]
	buf := data[headerStart+n:]

	if len(header) == 0 {
		return nil, formatErrorf(headerStart, "header is empty")
	}
	if !utf8.Valid(header) {
		i := 0
		for i < len(header) {
			r, size := utf8.DecodeRune(header[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return nil, formatErrorf(headerStart+int64(i), "header is not valid UTF-8")
	}
	if header[0] != '{' {
		return nil, formatErrorf(headerStart, "header is not a JSON object")
	}

	p := &headerParser{header: header, bufLen: int64(len(buf))}
	p.dec = json.NewDecoder(bytes.NewReader(header))
	p.dec.UseNumber()
	entries, meta, err := p.parse()
	if err != nil {
		return nil, err
	}
	if err := checkCoverage(entries, int64(len(buf)), headerStart+int64(n)); err != nil {
		return nil, err
	}

	f := &File{Tensors: make(map[string]*Tensor, len(entries)), Metadata: meta}
	for _, e := range entries {
		f.Tensors[e.name] = decode(e, buf[e.begin:e.end])
	}
	return f, nil
}

// checkCoverage reports whether the tensors cover the data buffer of
// length bufLen exactly, without overlaps or holes. dataStart is the
// file offset of the data buffer.
func checkCoverage(entries []entry, bufLen, dataStart int64) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), strings.Compare(a.name, b.name))
	})
	var pos int64
	prev := -1
	for i, e := range sorted {
		switch {
		case e.begin < pos:
			p := sorted[prev]
			return formatErrorf(dataStart+e.begin, "tensors %q and %q overlap: data_offsets [%d %d] and [%d %d]",
				p.name, e.name, p.begin, p.end, e.begin, e.end)
		case e.begin > pos:
			return formatErrorf(dataStart+pos, "data bytes [%d %d) before tensor %q are not used by any tensor", pos, e.begin, e.name)
		}
		pos = e.end
		prev = i
	}
	if pos < bufLen {
		if len(sorted) == 0 {
			return formatErrorf(dataStart, "data buffer holds %d bytes but there are no tensors", bufLen)
		}
		return formatErrorf(dataStart+pos, "data bytes [%d %d) after tensor %q are not used by any tensor", pos, bufLen, sorted[prev].name)
	}
	return nil
}

// decode returns the tensor described by e, whose data is b.
func decode(e entry, b []byte) *Tensor {
	t := &Tensor{DType: e.dtype, Shape: e.shape}
	switch e.dtype {
	case F32:
		t.F32 = make([]float32, len(b)/4)
		for i := range t.F32 {
			t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F64:
		t.F64 = make([]float64, len(b)/8)
		for i := range t.F64 {
			t.F64[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case BF16, F16:
		bits := make([]uint16, len(b)/2)
		for i := range bits {
			bits[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		if e.dtype == BF16 {
			t.BF16 = bits
		} else {
			t.F16 = bits
		}
	case I64:
		t.I64 = make([]int64, len(b)/8)
		for i := range t.I64 {
			t.I64[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return t
}

// A headerParser walks the JSON header token by token, so that it can
// detect duplicate keys and report the offsets of problems.
type headerParser struct {
	dec    *json.Decoder
	header []byte
	bufLen int64
}

// offset returns the file offset of the next token, skipping the
// whitespace and the separator that precede it.
func (p *headerParser) offset() int64 {
	i := p.dec.InputOffset()
	sep := false
	for i < int64(len(p.header)) {
		switch c := p.header[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case (c == ':' || c == ',') && !sep:
			sep = true
		default:
			return headerStart + i
		}
		i++
	}
	return headerStart + i
}

// token returns the next JSON token.
func (p *headerParser) token() (json.Token, error) {
	off := p.offset()
	tok, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, formatErrorf(headerStart+se.Offset, "header is not valid JSON: %v", se)
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil, formatErrorf(headerStart+int64(len(p.header)), "header JSON ends unexpectedly")
		default:
			return nil, formatErrorf(off, "header is not valid JSON: %v", err)
		}
	}
	return tok, nil
}

// delim consumes the next token, which must be the delimiter d;
// otherwise it returns a *FormatError saying that what is not an object
// (for '{') or an array (for '[').
func (p *headerParser) delim(d json.Delim, what string) error {
	off := p.offset()
	tok, err := p.token()
	if err != nil {
		return err
	}
	if tok != d {
		kind := "a JSON object"
		if d == '[' {
			kind = "a JSON array"
		}
		return formatErrorf(off, "%s is not %s", what, kind)
	}
	return nil
}

// key returns the next object key. The decoder guarantees that a token
// in key position is a string.
func (p *headerParser) key() (string, error) {
	off := p.offset()
	tok, err := p.token()
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok {
		return "", formatErrorf(off, "header is not valid JSON: object key is not a string")
	}
	return k, nil
}

// end consumes the closing delimiter of an object or array.
func (p *headerParser) end() error {
	_, err := p.token()
	return err
}

// parse walks the whole header and returns its tensor entries, in header
// order, and its metadata.
func (p *headerParser) parse() ([]entry, map[string]string, error) {
	if err := p.delim('{', "header"); err != nil {
		return nil, nil, err
	}
	var entries []entry
	meta := make(map[string]string)
	seen := make(map[string]bool)
	for p.dec.More() {
		off := p.offset()
		k, err := p.key()
		if err != nil {
			return nil, nil, err
		}
		if seen[k] {
			if k == metadataKey {
				return nil, nil, formatErrorf(off, "duplicate key %q in header", k)
			}
			return nil, nil, formatErrorf(off, "duplicate tensor %q in header", k)
		}
		seen[k] = true
		if k == metadataKey {
			if meta, err = p.metadata(); err != nil {
				return nil, nil, err
			}
			continue
		}
		e, err := p.tensor(k)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if err := p.end(); err != nil {
		return nil, nil, err
	}
	off := p.dec.InputOffset()
	for i, c := range p.header[off:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, nil, formatErrorf(headerStart+off+int64(i), "header has data after the JSON object")
		}
	}
	return entries, meta, nil
}

// metadata parses the value of "__metadata__".
func (p *headerParser) metadata() (map[string]string, error) {
	if err := p.delim('{', `"__metadata__"`); err != nil {
		return nil, err
	}
	meta := make(map[string]string)
	for p.dec.More() {
		off := p.offset()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		if _, dup := meta[k]; dup {
			return nil, formatErrorf(off, "duplicate key %q in \"__metadata__\"", k)
		}
		off = p.offset()
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, formatErrorf(off, "\"__metadata__\" value for key %q is not a string", k)
		}
		meta[k] = v
	}
	return meta, p.end()
}

// tensor parses the entry of the tensor called name.
func (p *headerParser) tensor(name string) (entry, error) {
	e := entry{name: name}
	start := p.offset()
	if err := p.delim('{', fmt.Sprintf("tensor %q: entry", name)); err != nil {
		return e, err
	}
	seen := make(map[string]bool)
	for p.dec.More() {
		off := p.offset()
		k, err := p.key()
		if err != nil {
			return e, err
		}
		if seen[k] {
			return e, formatErrorf(off, "tensor %q: duplicate key %q", name, k)
		}
		seen[k] = true
		switch k {
		case "dtype":
			off := p.offset()
			tok, err := p.token()
			if err != nil {
				return e, err
			}
			s, ok := tok.(string)
			if !ok {
				return e, formatErrorf(off, "tensor %q: dtype is not a string", name)
			}
			e.dtype = DType(s)
		case "shape":
			if e.shape, err = p.ints(name, "shape"); err != nil {
				return e, err
			}
		case "data_offsets":
			off := p.offset()
			offs, err := p.ints(name, "data_offsets")
			if err != nil {
				return e, err
			}
			if len(offs) != 2 {
				return e, formatErrorf(off, "tensor %q: data_offsets holds %d values, want 2", name, len(offs))
			}
			e.begin, e.end = int64(offs[0]), int64(offs[1])
		default:
			if err := p.skip(); err != nil {
				return e, err
			}
		}
	}
	if err := p.end(); err != nil {
		return e, err
	}
	for _, k := range [...]string{"dtype", "shape", "data_offsets"} {
		if !seen[k] {
			return e, formatErrorf(start, "tensor %q: missing %q", name, k)
		}
	}
	return e, p.check(&e)
}

// ints parses an array of non-negative integers that fit in an int,
// the value of the field called field of tensor name.
func (p *headerParser) ints(name, field string) ([]int, error) {
	if err := p.delim('[', fmt.Sprintf("tensor %q: %s", name, field)); err != nil {
		return nil, err
	}
	out := []int{}
	for p.dec.More() {
		off := p.offset()
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, formatErrorf(off, "tensor %q: %s is not an array of integers", name, field)
		}
		s := string(num)
		v, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err == nil && v >= 0 && v <= math.MaxInt:
			out = append(out, int(v))
			continue
		case err == nil && v < 0, strings.HasPrefix(s, "-") && errors.Is(err, strconv.ErrRange):
			return nil, formatErrorf(off, "tensor %q: %s holds negative value %s", name, field, abbrev(s))
		case err == nil, errors.Is(err, strconv.ErrRange):
			return nil, formatErrorf(off, "tensor %q: %s value %s is too large", name, field, abbrev(s))
		default:
			return nil, formatErrorf(off, "tensor %q: %s value %s is not an integer", name, field, abbrev(s))
		}
	}
	return out, p.end()
}

// skip consumes one JSON value of any kind.
func (p *headerParser) skip() error {
	depth := 0
	for {
		off := p.offset()
		tok, err := p.token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > maxDepth {
				return formatErrorf(off, "header nests arrays and objects more than %d deep", maxDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// check validates the entry e against its dtype and the data buffer.
func (p *headerParser) check(e *entry) error {
	size := e.dtype.Size()
	if size == 0 {
		return unsupported(e.name, e.dtype)
	}
	n, ok := numElements(e.shape)
	if !ok || n > math.MaxInt/size {
		return formatErrorf(-1, "tensor %q: shape %v of %s has too many elements", e.name, e.shape, e.dtype)
	}
	nbytes := int64(n * size)
	switch {
	case e.begin > e.end:
		return formatErrorf(-1, "tensor %q: data_offsets [%d %d]: begin is after end", e.name, e.begin, e.end)
	case e.end > p.bufLen:
		return formatErrorf(-1, "tensor %q: data_offsets [%d %d] extend beyond the %d-byte data buffer", e.name, e.begin, e.end, p.bufLen)
	case e.end-e.begin != nbytes:
		return formatErrorf(-1, "tensor %q: data_offsets [%d %d] hold %d bytes, shape %v of %s needs %d",
			e.name, e.begin, e.end, e.end-e.begin, e.shape, e.dtype, nbytes)
	}
	return nil
}

// abbrev shortens a long number for an error message.
func abbrev(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
