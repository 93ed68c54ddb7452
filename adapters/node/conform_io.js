// The adapter side of attnlab's conformance protocol, in plain Node.js: the
// Node twin of adapters/python/conform_io.py, shared by ort_attention.js
// (ONNX Runtime, native and WASM) and tfjs_mha.js (TF.js).
//
// The protocol is docs/conform-protocol.md: attnlab starts the adapter once
// and writes frames on its standard input, each `uint64 little-endian
// length | that many bytes of one safetensors file`; the adapter answers
// every frame with one frame on its standard output. The first request is a
// hello, answered with the capabilities; then come attention requests, one
// at a time. When attnlab closes the input, the adapter exits 0.
//
// An adapter is an object with two methods, given to serve():
//
//   capabilities()               the hello answer, a plain object
//   async attention(tensors, meta)
//                                {name: {dtype, shape, data}} in and out;
//                                a thrown error (the implementation refused
//                                the input) becomes an error response,
//                                metadata {"error": "one line"}, and the
//                                adapter keeps serving
//
// Standard output carries frames and nothing else: main() sends
// console.log and its kin to standard error before the adapter loads its
// runtime, so that a library's message cannot corrupt a frame.

'use strict';

const PROTOCOL = 'attnlab-conform/1';

let prefix = 'adapter';

// log writes one line to standard error (attnlab shows its last lines).
function log(msg) {
  process.stderr.write(prefix + ': ' + msg + '\n');
}

// ------------------------------------------------------------ safetensors

const DTYPES = {
  F32: { size: 4, array: Float32Array },
  F64: { size: 8, array: Float64Array },
  I64: { size: 8, array: BigInt64Array },
};

// decode returns {tensors: {name: {dtype, shape, data}}, meta} of one
// safetensors file (a Buffer). data is a typed array of its own (copied, so
// that it is aligned).
function decode(buf) {
  if (buf.length < 8) throw new Error(`a safetensors file of ${buf.length} bytes`);
  const n = Number(buf.readBigUInt64LE(0));
  if (n > buf.length - 8) throw new Error(`header length ${n} exceeds the file (${buf.length} bytes)`);
  const header = JSON.parse(buf.toString('utf8', 8, 8 + n));
  const meta = header.__metadata__ || {};
  delete header.__metadata__;
  const data = buf.subarray(8 + n);
  const tensors = {};
  let covered = 0;
  for (const [name, e] of Object.entries(header)) {
    const dt = DTYPES[e.dtype];
    if (!dt) throw new Error(`tensor ${name}: dtype ${e.dtype} (want F32, F64 or I64)`);
    const count = e.shape.reduce((a, b) => a * b, 1);
    const [begin, end] = e.data_offsets;
    if (begin < 0 || end > data.length || end - begin !== count * dt.size) {
      throw new Error(`tensor ${name}: data_offsets [${begin}, ${end}] do not hold shape [${e.shape}] of ${e.dtype}`);
    }
    const bytes = new Uint8Array(end - begin);
    bytes.set(data.subarray(begin, end));
    tensors[name] = { dtype: e.dtype, shape: e.shape, data: new dt.array(bytes.buffer) };
    covered += end - begin;
  }
  if (covered !== data.length) throw new Error(`the tensors cover ${covered} of the ${data.length} data bytes`);
  return { tensors, meta };
}

// encode returns the safetensors file of {name: {dtype, shape, data}} and
// string metadata, as a Buffer.
function encode(tensors, meta) {
  const header = {};
  const blobs = [];
  let offset = 0;
  for (const name of Object.keys(tensors).sort()) {
    const t = tensors[name];
    const b = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + b.length] };
    blobs.push(b);
    offset += b.length;
  }
  header.__metadata__ = meta;
  let h = Buffer.from(JSON.stringify(header), 'utf8');
  if (h.length % 8) h = Buffer.concat([h, Buffer.alloc(8 - (h.length % 8), 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  return Buffer.concat([len, h, ...blobs]);
}

// ------------------------------------------------------------ requests

// request decodes an attention request of an implementation that computes
// in dtypes and takes a causal flag or a boolean mask (no positions,
// validity, segments or window) into plain numbers and typed arrays: q, k,
// v, do (null without gradients) as sent, mask as a Uint8Array [B, M, N]
// (1 = may attend) or null, causal, past (= N - M) and scale (undefined
// when the implementation's default is wanted).
function request(tensors, meta, dtypes) {
  for (const n of ['q', 'k', 'v']) {
    if (!tensors[n] || tensors[n].shape.length !== 4) throw new Error(`tensor ${n}: missing or not 4-dimensional`);
  }
  const [B, Hq, M, D] = tensors.q.shape;
  const [, Hkv, N] = tensors.k.shape;
  const Dv = tensors.v.shape[3];
  const dtype = tensors.q.dtype === 'F32' ? 'float32' : 'float64';
  if (!dtypes.includes(dtype)) throw new Error(`${dtype}: this op computes in ${dtypes.join(', ')} only`);
  for (const n of ['q_pos', 'k_pos', 'q_valid', 'k_valid', 'q_seg', 'k_seg']) {
    if (tensors[n]) throw new Error(`${n}: the op takes a causal flag or a boolean mask only`);
  }
  if (meta.window && meta.window !== '0') throw new Error('window: not expressible with this op');
  const r = {
    B, Hq, Hkv, M, N, D, Dv, dtype,
    q: tensors.q.data, k: tensors.k.data, v: tensors.v.data,
    do: tensors.do ? tensors.do.data : null,
    mask: tensors.mask ? Uint8Array.from(tensors.mask.data, (x) => (x !== 0n ? 1 : 0)) : null,
    causal: meta.causal === 'true',
    past: meta.past !== undefined ? Number(meta.past) : N - M,
    scale: meta.scale !== undefined ? Number(meta.scale) : undefined,
  };
  if (r.mask && r.causal) throw new Error('a mask together with causal: the protocol sends one or the other');
  if (!Number.isInteger(r.past) || r.past !== N - M) throw new Error(`metadata past = ${meta.past}, want N - M = ${N - M}`);
  return r;
}

// ------------------------------------------------------------ the loop

// oneLine is an error as one line. ONNX Runtime's messages of a failed
// check start with the source location and the C++ signature of the
// function ("/onnxruntime_src/...h:153 onnxruntime::...(const Tensor*, ...)
// cond was false. why"): that part is dropped.
function oneLine(e) {
  let msg = String((e && e.message) || e).trim().split('\n')[0];
  const at = msg.search(/\/onnxruntime_src\/\S+:\d+ /);
  const open = at < 0 ? -1 : msg.indexOf('(', at);
  if (open >= 0) {
    let depth = 0;
    for (let i = open; i < msg.length; i++) {
      if (msg[i] === '(') depth++;
      if (msg[i] === ')' && --depth === 0) {
        msg = msg.slice(0, at) + msg.slice(i + 1).replace(/^ const/, '').trimStart();
        break;
      }
    }
  }
  return msg.length > 500 ? msg.slice(0, 497) + '...' : msg;
}

// serve answers frames from standard input until it ends; name prefixes
// the adapter's log lines.
async function serve(adapter, name) {
  prefix = name;
  let pending = Buffer.alloc(0);
  const out = (payload) => {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(payload.length));
    process.stdout.write(Buffer.concat([len, payload]));
  };
  for await (const chunk of process.stdin) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    for (;;) {
      if (pending.length < 8) break;
      const n = Number(pending.readBigUInt64LE(0));
      if (n > 2 ** 31) {
        log(`a frame of ${n} bytes`);
        process.exit(1);
      }
      if (pending.length < 8 + n) break;
      const frame = pending.subarray(8, 8 + n);
      pending = pending.subarray(8 + n);
      let msg;
      try {
        msg = decode(frame);
      } catch (e) {
        log(`malformed request: ${oneLine(e)}`);
        process.exit(1);
      }
      const { tensors, meta } = msg;
      if (meta.op === 'hello') {
        if (meta.protocol !== PROTOCOL) log(`hello for protocol ${meta.protocol}, this adapter speaks ${PROTOCOL}`);
        out(encode({}, { op: 'hello', capabilities: JSON.stringify(adapter.capabilities()) }));
      } else if (meta.op === 'attention') {
        try {
          const answer = await adapter.attention(tensors, meta);
          out(encode(answer, { op: 'attention', request: meta.request || '' }));
        } catch (e) {
          log(`attention #${meta.request}: ${oneLine(e)}`);
          out(encode({}, { error: oneLine(e) }));
        }
      } else {
        out(encode({}, { error: `unknown op ${JSON.stringify(meta.op)}` }));
      }
    }
  }
  if (pending.length) {
    log(`input ended inside a frame (${pending.length} bytes left)`);
    process.exit(1);
  }
}

// main runs serve(await build(argv)) as a script's body: exit 0 when the
// input ends; exit 2, with the message, when build throws (bad arguments,
// or a runtime that does not load).
async function main(name, build) {
  console.log = console.info = console.debug = console.warn = console.error;
  prefix = name;
  let adapter;
  try {
    adapter = await build(process.argv.slice(2));
  } catch (e) {
    for (const line of String((e && e.message) || e).split('\n')) log(line);
    process.exit(2);
  }
  try {
    await serve(adapter, name);
  } catch (e) {
    log(oneLine(e));
    process.exit(1);
  }
  process.exit(0);
}

module.exports = { PROTOCOL, log, decode, encode, request, oneLine, serve, main };
