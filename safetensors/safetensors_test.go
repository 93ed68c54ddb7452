package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sample returns a file exercising every dtype, a scalar, a zero-size
// tensor and metadata.
func sample() *File {
	f := New()
	f.SetF32("w", []int{2, 3}, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.25})
	f.SetF64("b", []int{3}, []float64{math.Pi, -1e300, math.SmallestNonzeroFloat64})
	f.SetI64("ids", []int{2, 2}, []int64{math.MinInt64, -1, 0, math.MaxInt64})
	f.SetF64("scale", []int{}, []float64{0.125})
	f.SetF32("empty", []int{0, 4}, nil)
	f.SetI64("step", nil, []int64{42})
	f.Metadata["format"] = "pt"
	f.Metadata["note"] = `<a & "b">`
	return f
}

// equalFiles reports whether a and b hold the same tensors, compared bit
// for bit, and the same metadata.
func equalFiles(a, b *File) bool {
	if !slices.Equal(a.Names(), b.Names()) || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for k, v := range a.Metadata {
		if w, ok := b.Metadata[k]; !ok || w != v {
			return false
		}
	}
	for name, x := range a.Tensors {
		y := b.Tensors[name]
		if x.DType != y.DType || !slices.Equal(x.Shape, y.Shape) || !slices.Equal(x.I64, y.I64) ||
			!slices.Equal(x.BF16, y.BF16) || !slices.Equal(x.F16, y.F16) ||
			len(x.F32) != len(y.F32) || len(x.F64) != len(y.F64) {
			return false
		}
		for i := range x.F32 {
			if math.Float32bits(x.F32[i]) != math.Float32bits(y.F32[i]) {
				return false
			}
		}
		for i := range x.F64 {
			if math.Float64bits(x.F64[i]) != math.Float64bits(y.F64[i]) {
				return false
			}
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	f := sample()
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Fatalf("round trip changed the file:\n got %+v\nwant %+v", g, f)
	}
	again, err := g.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Error("MarshalBinary of the parsed file differs from the original encoding")
	}
	for range 5 {
		if b, _ := sample().MarshalBinary(); !bytes.Equal(b, data) {
			t.Fatal("MarshalBinary is not deterministic")
		}
	}

	n := binary.LittleEndian.Uint64(data)
	if (8+n)%8 != 0 {
		t.Errorf("data buffer starts at %d, not a multiple of 8", 8+n)
	}
	header := string(data[8 : 8+n])
	if !strings.HasPrefix(header, `{"__metadata__":{"format":"pt","note":"<a & \"b\">"},"b":`) {
		t.Errorf("header does not start with sorted metadata then the first tensor: %s", header)
	}
	if i, j := strings.Index(header, `"scale"`), strings.Index(header, `"step"`); i < 0 || j < i {
		t.Errorf("tensors not ordered by name: %s", header)
	}

	if v, shape, err := g.Float64("scale"); err != nil || !slices.Equal(v, []float64{0.125}) || len(shape) != 0 {
		t.Errorf(`Float64("scale") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := g.Float32("empty"); err != nil || len(v) != 0 || !slices.Equal(shape, []int{0, 4}) {
		t.Errorf(`Float32("empty") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := g.Int64("ids"); err != nil || v[0] != math.MinInt64 || !slices.Equal(shape, []int{2, 2}) {
		t.Errorf(`Int64("ids") = %v, %v, %v`, v, shape, err)
	}
}

func TestEmptyFile(t *testing.T) {
	data, err := New().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{8, 0, 0, 0, 0, 0, 0, 0}, "{}      "...)
	if !bytes.Equal(data, want) {
		t.Fatalf("MarshalBinary of an empty file = %q, want %q", data, want)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 0 || len(f.Metadata) != 0 || f.Tensors == nil || f.Metadata == nil {
		t.Errorf("Parse of an empty file = %+v", f)
	}
	var zero File
	if b, err := zero.MarshalBinary(); err != nil || !bytes.Equal(b, want) {
		t.Errorf("MarshalBinary of a zero File = %q, %v", b, err)
	}
}

// handBuilt is a safetensors file written out byte by byte, laid out the
// way other implementations write it: tensors in the header in data
// order rather than name order, and the header padded with spaces.
var handBuilt = slices.Concat(
	// Header length N = 256 as a little-endian uint64.
	[]byte{0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},
	// 252 bytes of JSON followed by 4 spaces of padding: 256 bytes.
	[]byte(`{"__metadata__":{"format":"pt"},`+
		`"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},`+
		`"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},`+
		`"w":{"dtype":"F32","shape":[2,1],"data_offsets":[16,24]},`+
		`"e":{"dtype":"F32","shape":[0,3],"data_offsets":[24,24]}}`+
		`    `),
	// Data buffer, starting at file offset 8+256 = 264.
	[]byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f}, // x: F64 0.5
	[]byte{0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // b: I64 -3
	[]byte{0x00, 0x00, 0x80, 0x3f},                         // w[0]: F32 1.0
	[]byte{0x00, 0x00, 0x20, 0xc0},                         // w[1]: F32 -2.5
)

func TestHandBuilt(t *testing.T) {
	if len(handBuilt) != 8+256+24 {
		t.Fatalf("hand-built file is %d bytes, want %d", len(handBuilt), 8+256+24)
	}
	if handBuilt[8] != '{' || handBuilt[8+256-1] != ' ' || handBuilt[8+256-5] != '}' {
		t.Fatal("hand-built header does not occupy bytes [8, 264)")
	}
	f, err := Parse(handBuilt)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !slices.Equal(got, []string{"b", "e", "w", "x"}) {
		t.Errorf("Names() = %q", got)
	}
	if f.Metadata["format"] != "pt" || len(f.Metadata) != 1 {
		t.Errorf("Metadata = %v", f.Metadata)
	}
	if v, shape, err := f.Float64("x"); err != nil || !slices.Equal(v, []float64{0.5}) || !slices.Equal(shape, []int{1}) {
		t.Errorf(`Float64("x") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := f.Int64("b"); err != nil || !slices.Equal(v, []int64{-3}) || len(shape) != 0 {
		t.Errorf(`Int64("b") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := f.Float32("w"); err != nil || !slices.Equal(v, []float32{1, -2.5}) || !slices.Equal(shape, []int{2, 1}) {
		t.Errorf(`Float32("w") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := f.Float64("w"); err != nil || !slices.Equal(v, []float64{1, -2.5}) || !slices.Equal(shape, []int{2, 1}) {
		t.Errorf(`Float64("w") = %v, %v, %v`, v, shape, err)
	}
	if v, shape, err := f.Float32("e"); err != nil || len(v) != 0 || !slices.Equal(shape, []int{0, 3}) {
		t.Errorf(`Float32("e") = %v, %v, %v`, v, shape, err)
	}

	// Re-encoding orders the tensors by name, so the data moves, but the
	// values survive.
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Error("re-encoding the hand-built file changed its contents")
	}
}

// raw returns a file with the given header, its length prefix, and a
// data buffer of n zero bytes.
func raw(header string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

// rawLen returns a file whose length prefix is n, followed by rest.
func rawLen(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

const okW = `"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name   string
		data   []byte
		want   []string // substrings of the error
		format bool     // whether the error is a *FormatError
	}{
		// Length prefix.
		{"empty file", nil, []string{"0 bytes", "too short"}, true},
		{"7-byte file", []byte{1, 2, 3, 4, 5, 6, 7}, []string{"7 bytes", "too short"}, true},
		{"header beyond file", rawLen(100, "{}"), []string{"header length 100", "exceeds the 2 bytes remaining"}, true},
		{"header beyond file, huge", rawLen(math.MaxUint64, "{}"), []string{"header length 18446744073709551615", "limit"}, true},
		{"header over 100 MiB", rawLen(100<<20+1, "{}"), []string{"header length 104857601", "limit of 104857600"}, true},
		{"empty header", raw("", 0), []string{"header is empty"}, true},

		// Header JSON.
		{"not JSON", raw("nonsense", 0), []string{"not a JSON object"}, true},
		{"JSON array", raw("[1,2]", 0), []string{"not a JSON object"}, true},
		{"leading space", raw(" {}", 0), []string{"not a JSON object"}, true},
		{"truncated JSON", raw(`{"w":{"dtype":"F32"`, 0), []string{"ends unexpectedly"}, true},
		{"missing colon", raw(`{"w" {}}`, 0), []string{"not valid JSON", "invalid character"}, true},
		{"trailing comma", raw(`{`+okW+`,}`, 8), []string{"not valid JSON"}, true},
		{"bad string escape", raw(`{"\q":1}`, 0), []string{"not valid JSON"}, true},
		{"trailing garbage", raw(`{}x`, 0), []string{"data after the JSON object", "offset 10"}, true},
		{"two objects", raw(`{}{}`, 0), []string{"data after the JSON object"}, true},
		{"trailing NUL padding", raw("{}\x00\x00", 0), []string{"data after the JSON object"}, true},
		{"invalid UTF-8", raw("{\"w\xff\":1}", 0), []string{"not valid UTF-8", "offset 11"}, true},
		{"deep nesting", raw(`{"w":{"x":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}}`, 0),
			[]string{"more than 128 deep"}, true},

		// Tensor entries.
		{"entry not object", raw(`{"w":[0,8]}`, 8), []string{`tensor "w"`, "not a JSON object"}, true},
		{"entry string", raw(`{"w":"F32"}`, 8), []string{`tensor "w"`, "not a JSON object"}, true},
		{"missing dtype", raw(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, `missing "dtype"`}, true},
		{"missing shape", raw(`{"w":{"dtype":"F32","data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, `missing "shape"`}, true},
		{"missing data_offsets", raw(`{"w":{"dtype":"F32","shape":[2]}}`, 8), []string{`tensor "w"`, `missing "data_offsets"`}, true},
		{"dtype not string", raw(`{"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "dtype is not a string"}, true},
		{"shape not array", raw(`{"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "shape is not a JSON array"}, true},
		{"shape nested", raw(`{"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "shape is not an array of integers"}, true},
		{"shape string", raw(`{"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "shape is not an array of integers"}, true},
		{"shape fraction", raw(`{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "shape value 1.5 is not an integer"}, true},
		{"shape exponent", raw(`{"w":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "not an integer"}, true},
		{"negative dimension", raw(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "shape holds negative value -2"}, true},
		{"huge negative dimension", raw(`{"w":{"dtype":"F32","shape":[-99999999999999999999],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "negative"}, true},
		{"dimension too large", raw(`{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "too large"}, true},
		{"shape overflow", raw(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "too many elements"}, true},
		{"byte size overflow", raw(`{"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, "too many elements"}, true},
		{"shape overflow past zero", raw(`{"w":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}`, 0), []string{`tensor "w"`, "too many elements"}, true},
		{"data_offsets one value", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, 8), []string{`tensor "w"`, "data_offsets holds 1 values, want 2"}, true},
		{"data_offsets three values", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, 8), []string{`tensor "w"`, "holds 3 values"}, true},
		{"data_offsets negative", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, 8), []string{`tensor "w"`, "data_offsets holds negative value -8"}, true},
		{"data_offsets null", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":null}}`, 8), []string{`tensor "w"`, "data_offsets is not a JSON array"}, true},
		{"begin after end", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`, 8), []string{`tensor "w"`, "data_offsets [8 0]: begin is after end"}, true},
		{"end beyond buffer", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), []string{`tensor "w"`, "[0 8] extend beyond the 4-byte data buffer"}, true},
		{"end far beyond buffer", raw(`{"w":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}}`, 8), []string{`tensor "w"`, "extend beyond"}, true},
		{"size mismatch", raw(`{"k":{"dtype":"F64","shape":[2,3,4],"data_offsets":[0,96]}}`, 96),
			[]string{`safetensors: tensor "k": data_offsets [0 96] hold 96 bytes, shape [2 3 4] of F64 needs 192`}, true},
		{"scalar with no bytes", raw(`{"s":{"dtype":"I64","shape":[],"data_offsets":[0,0]}}`, 0), []string{`tensor "s"`, "hold 0 bytes", "needs 8"}, true},
		{"zero-size with bytes", raw(`{"z":{"dtype":"F32","shape":[3,0],"data_offsets":[0,4]}}`, 4), []string{`tensor "z"`, "hold 4 bytes", "needs 0"}, true},

		// Coverage of the data buffer.
		{"overlap", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
			[]string{`tensors "a" and "b" overlap`, "[0 8] and [4 12]"}, true},
		{"same offsets", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, 8),
			[]string{`tensors "a" and "b" overlap`}, true},
		{"zero-size inside another", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, 8),
			[]string{`tensors "a" and "z" overlap`}, true},
		{"hole", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}`, 20),
			[]string{`data bytes [8 12) before tensor "b" are not used`}, true},
		{"hole at start", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
			[]string{`data bytes [0 4) before tensor "a" are not used`}, true},
		{"unused tail", raw(`{`+okW+`}`, 12), []string{`data bytes [8 12) after tensor "w" are not used`}, true},
		{"data without tensors", raw(`{}`, 4), []string{"4 bytes but there are no tensors"}, true},
		{"data without tensors, metadata only", raw(`{"__metadata__":{}}`, 8), []string{"8 bytes but there are no tensors"}, true},

		// Metadata.
		{"metadata string", raw(`{"__metadata__":"pt"}`, 0), []string{`"__metadata__" is not a JSON object`}, true},
		{"metadata null", raw(`{"__metadata__":null}`, 0), []string{`"__metadata__" is not a JSON object`}, true},
		{"metadata number value", raw(`{"__metadata__":{"epoch":3}}`, 0), []string{`"__metadata__" value for key "epoch" is not a string`}, true},
		{"metadata object value", raw(`{"__metadata__":{"cfg":{"a":"b"}}}`, 0), []string{`key "cfg" is not a string`}, true},
		{"metadata null value", raw(`{"__metadata__":{"cfg":null}}`, 0), []string{`key "cfg" is not a string`}, true},

		// Duplicate keys.
		{"duplicate tensor", raw(`{`+okW+`,`+okW+`}`, 8), []string{`duplicate tensor "w"`}, true},
		{"duplicate tensor via escape", raw(`{`+okW+`,"\u0077":{}}`, 8), []string{`duplicate tensor "w"`}, true},
		{"duplicate metadata", raw(`{"__metadata__":{},"__metadata__":{}}`, 0), []string{`duplicate key "__metadata__"`}, true},
		{"duplicate metadata key", raw(`{"__metadata__":{"a":"1","a":"2"}}`, 0), []string{`duplicate key "a" in "__metadata__"`}, true},
		{"duplicate field", raw(`{"w":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}}`, 8), []string{`tensor "w"`, `duplicate key "dtype"`}, true},
		{"duplicate unknown field", raw(`{"w":{"x":1,"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":2}}`, 8), []string{`tensor "w"`, `duplicate key "x"`}, true},

		// Unsupported dtypes, reported per tensor.
		{"F8_E4M3", raw(`{"q":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}`, 2),
			[]string{`safetensors: tensor "q": dtype F8_E4M3 not supported (want F32, F64, BF16, F16 or I64)`}, false},
		{"U16", raw(`{`+okW+`,"h":{"dtype":"U16","shape":[2],"data_offsets":[8,12]}}`, 12), []string{`tensor "h": dtype U16 not supported`}, false},
		{"I32", raw(`{"i":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, 4), []string{`tensor "i": dtype I32 not supported`}, false},
		{"U8", raw(`{"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), []string{`tensor "u": dtype U8 not supported`}, false},
		{"BOOL", raw(`{"m":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, 1), []string{`tensor "m": dtype BOOL not supported`}, false},
		{"lower case", raw(`{"m":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, 4), []string{`tensor "m": dtype f32 not supported`}, false},
		{"odd dtype", raw(`{"m":{"dtype":"F\n32","shape":[1],"data_offsets":[0,4]}}`, 4), []string{`tensor "m": dtype "F\n32" not supported`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.data)
			if err == nil {
				t.Fatalf("Parse succeeded with %d tensors, want an error", len(f.Tensors))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "safetensors: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line starting with \"safetensors: \"", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			var fe *FormatError
			if got := errors.As(err, &fe); got != tt.format {
				t.Errorf("error %q: is *FormatError = %v, want %v", msg, got, tt.format)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"no padding", raw(`{`+okW+`}`, 8)},
		{"space padding", raw(`{`+okW+`}`+strings.Repeat(" ", 37), 8)},
		{"JSON whitespace", raw("{ \"w\" : {\"dtype\":\"F32\",\n\"shape\":[ 2 ],\t\"data_offsets\":[0,8]} }\r\n", 8)},
		{"unknown fields", raw(`{"w":{"extra":{"a":[1,{"b":null}]},"dtype":"F32","shape":[2],"data_offsets":[0,8],"z":true}}`, 8)},
		{"empty metadata", raw(`{"__metadata__":{},`+okW+`}`, 8)},
		{"metadata last", raw(`{`+okW+`,"__metadata__":{"k":"v"}}`, 8)},
		{"zero-size at end", raw(`{`+okW+`,"z":{"dtype":"F64","shape":[0],"data_offsets":[8,8]}}`, 8)},
		{"zero-size at start", raw(`{`+okW+`,"z":{"dtype":"F64","shape":[5,0,2],"data_offsets":[0,0]}}`, 8)},
		{"only zero-size", raw(`{"z":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}}`, 0)},
		{"zero dims before huge dims", raw(`{"z":{"dtype":"I64","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			data, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if !equalFiles(f, g) {
				t.Error("round trip changed the file")
			}
		})
	}
}

func TestSetPanics(t *testing.T) {
	tests := []struct {
		name string
		set  func(f *File)
		want string
	}{
		{"short data", func(f *File) { f.SetF64("a", []int{2, 3}, make([]float64, 5)) }, `tensor "a": shape [2 3] needs 6 elements, data has 5`},
		{"scalar without data", func(f *File) { f.SetF32("a", nil, nil) }, "needs 1 elements, data has 0"},
		{"negative dimension", func(f *File) { f.SetI64("a", []int{-1}, nil) }, "invalid shape [-1]"},
		{"overflow", func(f *File) { f.SetI64("a", []int{math.MaxInt, 3}, nil) }, "invalid shape"},
		{"reserved name", func(f *File) { f.SetF64(metadataKey, nil, []float64{1}) }, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "safetensors: ") || !strings.Contains(msg, tt.want) {
					t.Errorf("panic %v, want a message containing %q", r, tt.want)
				}
			}()
			tt.set(New())
		})
	}
}

func TestSetCopies(t *testing.T) {
	shape := []int{2}
	data := []float64{1, 2}
	var f File // the zero File is usable
	f.SetF64("a", shape, data)
	shape[0], data[0] = 7, 7
	got, gotShape, err := f.Float64("a")
	if err != nil || !slices.Equal(got, []float64{1, 2}) || !slices.Equal(gotShape, []int{2}) {
		t.Fatalf("Float64 = %v, %v, %v after changing the caller's slices", got, gotShape, err)
	}
	got[0] = 9
	if f.Tensors["a"].F64[0] != 1 {
		t.Error("Float64 returned the tensor's own slice")
	}
	if !f.Has("a") || f.Has("b") {
		t.Error("Has is wrong")
	}
}

func TestAccessorErrors(t *testing.T) {
	f := sample()
	f.Tensors["bad"] = &Tensor{DType: F32, Shape: []int{3}, F32: []float32{1}}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"missing Float64", func() error { _, _, err := f.Float64("nope"); return err }, `tensor "nope" not found`},
		{"missing Float32", func() error { _, _, err := f.Float32("nope"); return err }, `tensor "nope" not found`},
		{"missing Int64", func() error { _, _, err := f.Int64("nope"); return err }, `tensor "nope" not found`},
		{"Float64 of I64", func() error { _, _, err := f.Float64("ids"); return err }, `tensor "ids": dtype I64, want F32, F64, BF16 or F16`},
		{"Float32 of I64", func() error { _, _, err := f.Float32("ids"); return err }, `tensor "ids": dtype I64, want F32, F64, BF16 or F16`},
		{"Int64 of F32", func() error { _, _, err := f.Int64("w"); return err }, `tensor "w": dtype F32, want I64`},
		{"inconsistent", func() error { _, _, err := f.Float32("bad"); return err }, `tensor "bad": shape [3] needs 3 elements, F32 data has 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}

	v, _, err := f.Float32("b")
	if err != nil || v[0] != float32(math.Pi) {
		t.Errorf(`Float32("b") = %v, %v; want F64 converted`, v, err)
	}
}

func TestMarshalRejects(t *testing.T) {
	tests := []struct {
		name   string
		tensor *Tensor
		tname  string
		meta   map[string]string
		want   string
	}{
		{"nil tensor", nil, "a", nil, `tensor "a" is nil`},
		{"unsupported dtype", &Tensor{DType: "I32", Shape: []int{1}}, "q", nil, `tensor "q": dtype I32 not supported (want F32, F64, BF16, F16 or I64)`},
		{"empty dtype", &Tensor{Shape: []int{1}}, "q", nil, `tensor "q": dtype "" not supported`},
		{"length mismatch", &Tensor{DType: F64, Shape: []int{2}, F64: []float64{1}}, "a", nil, `tensor "a": shape [2] needs 2 elements, F64 data has 1`},
		{"wrong slice", &Tensor{DType: F64, Shape: []int{1}, F32: []float32{1}}, "a", nil, `tensor "a": dtype F64 but F32 data is set`},
		{"two slices", &Tensor{DType: I64, Shape: []int{1}, I64: []int64{1}, F64: []float64{1}}, "a", nil, `tensor "a": dtype I64 but F64 data is set`},
		{"negative dimension", &Tensor{DType: I64, Shape: []int{-1}}, "a", nil, `tensor "a": invalid shape [-1]`},
		{"reserved name", &Tensor{DType: I64, Shape: []int{}, I64: []int64{1}}, metadataKey, nil, "reserved"},
		{"invalid UTF-8 name", &Tensor{DType: I64, Shape: []int{}, I64: []int64{1}}, "a\xff", nil, "not valid UTF-8"},
		{"invalid UTF-8 metadata", &Tensor{DType: I64, Shape: []int{}, I64: []int64{1}}, "a", map[string]string{"k": "\xff"}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &File{Tensors: map[string]*Tensor{tt.tname: tt.tensor}, Metadata: tt.meta}
			_, err := f.MarshalBinary()
			if err == nil || !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNaNPreserved(t *testing.T) {
	f := New()
	f.SetF32("a", []int{2}, []float32{math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00000)})
	f.SetF64("b", []int{1}, []float64{math.Float64frombits(0x7ff8000000000001)})
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Error("NaN payloads not preserved")
	}
}

// dirEntries returns the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	f := sample()
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Error("ReadFile(WriteFile(f)) differs from f")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("new file has mode %v, want 0644", fi.Mode().Perm())
	}

	// Replacing keeps the permissions and leaves no temporary files.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f.SetI64("extra", []int{1}, []int64{5})
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	if g, err := ReadFile(path); err != nil || !g.Has("extra") {
		t.Fatalf("ReadFile after replacing: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced file has mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"model.safetensors"}) {
		t.Errorf("directory holds %q, want only the file", got)
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.safetensors")
	_, err := ReadFile(missing)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "safetensors: "+missing+": ") {
		t.Errorf("ReadFile of a missing file: %v", err)
	}

	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, raw(`{"w":1}`, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(bad)
	var fe *FormatError
	if err == nil || !errors.As(err, &fe) || fe.Offset != 13 {
		t.Fatalf("ReadFile of a bad file: %v, want a *FormatError at offset 13", err)
	}
	want := "safetensors: " + bad + `: tensor "w": entry is not a JSON object (offset 13)`
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nope", "model.safetensors")
	err := WriteFile(path, sample())
	if err == nil || !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v", err)
	}
	if got := dirEntries(t, dir); len(got) != 0 {
		t.Errorf("directory holds %q, want nothing", got)
	}
}

func TestWriteFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	old := []byte("previous contents")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T) {
		t.Helper()
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
			t.Errorf("existing file changed: %q, %v", got, err)
		}
		if got := dirEntries(t, dir); !slices.Equal(got, []string{"model.safetensors"}) {
			t.Errorf("directory holds %q, want only the old file", got)
		}
	}

	t.Run("invalid file", func(t *testing.T) {
		bad := New()
		bad.Tensors["x"] = &Tensor{DType: F32, Shape: []int{2}}
		err := WriteFile(path, bad)
		if err == nil || !strings.Contains(err.Error(), `tensor "x"`) {
			t.Errorf("WriteFile of an inconsistent file: %v", err)
		}
		check(t)
	})

	t.Run("write error", func(t *testing.T) {
		injected := errors.New("disk full")
		defer func(w func(io.Writer, []byte) error) { writeData = w }(writeData)
		writeData = func(w io.Writer, b []byte) error {
			w.Write(b[:len(b)/2])
			return injected
		}
		err := WriteFile(path, sample())
		if !errors.Is(err, injected) || err.Error() != "safetensors: "+path+": disk full" {
			t.Errorf("WriteFile with a failing write: %v", err)
		}
		check(t)
	})

	t.Run("rename error", func(t *testing.T) {
		// A non-empty directory cannot be replaced by a file.
		target := filepath.Join(dir, "model.safetensors.d")
		if err := os.MkdirAll(filepath.Join(target, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(target)
		if err := WriteFile(target, sample()); err == nil {
			t.Error("WriteFile over a non-empty directory succeeded")
		}
		if got := dirEntries(t, dir); !slices.Equal(got, []string{"model.safetensors", "model.safetensors.d"}) {
			t.Errorf("directory holds %q, want no temporary files", got)
		}
	})
}

func FuzzParse(f *testing.F) {
	valid, err := sample().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := New().MarshalBinary()
	f.Add(valid)
	f.Add(empty)
	f.Add(handBuilt)
	f.Add(raw(`{`+okW+`}`, 8))
	f.Add(raw(`{"__metadata__":{"a":"b"},"z":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}}`, 0))
	f.Add(raw(`{"w":{"x":[[{}]],"dtype":"F64","shape":[],"data_offsets":[0,8]}}   `, 8))
	// Broken seeds.
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:20])
	f.Add(rawLen(1<<40, "{}"))
	f.Add(raw(`{"k":{"dtype":"F64","shape":[2,3,4],"data_offsets":[0,96]}}`, 96))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12))
	f.Add(raw(`{"q":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, 4))
	f.Add(raw(`{"__metadata__":{"a":"1","a":"2"}}`, 0))

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "safetensors: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line starting with \"safetensors: \"", msg)
			}
			return
		}
		out, err := file.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of a parsed file: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse of MarshalBinary output: %v", err)
		}
		if !equalFiles(file, again) {
			t.Fatal("Parse(MarshalBinary(Parse(data))) differs from Parse(data)")
		}
		if out2, err := again.MarshalBinary(); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("MarshalBinary is not stable: %v", err)
		}
	})
}
