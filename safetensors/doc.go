// Package safetensors reads and writes the safetensors tensor file format
// used by Hugging Face model checkpoints.
//
// A safetensors file has three parts:
//
//   - an 8-byte little-endian unsigned integer N, the length of the header;
//   - N bytes of UTF-8 JSON holding one object, possibly followed by
//     trailing spaces. The object maps each tensor name to an object with
//     the keys "dtype", "shape" and "data_offsets", and may also hold the
//     reserved key "__metadata__", an object mapping strings to strings;
//   - the data buffer, holding the elements of every tensor in
//     little-endian byte order and row-major layout. A tensor's
//     data_offsets [begin, end] are byte offsets relative to the start of
//     the data buffer.
//
// For example, a file holding the F32 tensor "w" of shape [2] with the
// values 1 and 2, and the metadata "format": "pt", is
//
//	58 00 00 00 00 00 00 00                          N = 88
//	{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}
//	00 00 80 3f 00 00 00 40                          1.0, 2.0
//
// where the header is padded with three spaces to 88 bytes (not shown).
//
// Only the dtypes F32, F64, BF16, F16 and I64 are supported. A tensor of
// shape [] is a scalar holding one element; a shape containing a 0
// describes a tensor with no elements.
//
// # Half precision
//
// BF16 (bfloat16: sign, 8 exponent bits, 7 mantissa bits, the top half of
// a float32) and F16 (IEEE 754 binary16: sign, 5 exponent bits, 10
// mantissa bits) store weights at half the size of F32. A [Tensor] holds
// their raw bits; [File.Float32] and [File.Float64] convert them exactly,
// since every value of either format, F16's subnormals, infinities and
// NaNs included, is a float32. [File.SetBF16], [File.SetF16] and
// [File.Convert] round to nearest, ties to even; a NaN stays a NaN.
//
// Parsing is strict. [Parse] rejects headers that are truncated, not
// valid UTF-8 JSON objects, larger than 100 MiB, or that repeat a key;
// tensor entries with missing or malformed fields, negative dimensions,
// element counts that overflow, or data_offsets that disagree with the
// shape and dtype; and data buffers that are not exactly covered by the
// tensors, without overlaps, holes or unused bytes. Malformed input is
// reported as a [*FormatError]; input is never trusted to size an
// allocation before it has been checked against the length of the file.
//
// [File.MarshalBinary] is deterministic: the metadata comes first with its
// keys sorted, followed by the tensors ordered by name, whose data is laid
// out in the same order. The header is padded with spaces so that the data
// buffer starts at a multiple of 8 bytes. [WriteFile] replaces a file
// atomically.
package safetensors
