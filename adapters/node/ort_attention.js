#!/usr/bin/env node
// attnlab conform adapter for ONNX Runtime (onnxruntime-node, CPU):
//
//   attnlab conform -exec "node adapters/node/ort_attention.js attention"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --opset 23"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --no-cache"
//   attnlab conform -exec "node adapters/node/ort_attention.js gqa"
//
// It speaks the protocol of docs/conform-protocol.md on its standard input
// and output (frames: uint64 little-endian length | one safetensors file) and
// logs on standard error only. For every request shape it builds a one-node
// ONNX model itself (the ModelProto is encoded by hand below: there is no
// Python onnx package here and none is needed), opens an InferenceSession on
// it once and keeps it for later requests of the same shape.
//
// attention: the standard ONNX `Attention` op (opset 24 by default, 23 with
//   --opset 23). Q [B,Hq,M,D], K [B,Hkv,L,D], V [B,Hkv,L,Dv] in attnlab's own
//   layout, attributes is_causal and scale. attnlab sends all N keys and
//   metadata past = N - M: the first `past` keys go in as past_key and
//   past_value, the last M as the new K and V (with past <= 0, that is
//   M >= N, all N keys are the new K and V and there is no past input). With
//   --no-cache the keys always go in as K and V, never as past: the op's
//   convention for a query sequence shorter than the key sequence without a
//   cache, which is another code path than the cache's. A
//   "bool" mask [B,M,N] becomes the op's boolean attn_mask [B,1,M,N], whose
//   convention (True = may attend) is attnlab's; is_causal is then 0.
//   Forward only, float32 (the CPU kernel has float and float16), GQA
//   (q heads a multiple of kv heads), explicit scale.
//
// gqa: the com.microsoft `GroupQueryAttention` op, with a past KV cache:
//   query [B,M,Hq*D], key and value [B,M,Hkv*D] (the M new tokens), past_key
//   and past_value [B,Hkv,past,D] (the cache, BNSH), seqlens_k [B] = N - 1
//   and total_sequence_length = N (int32), attributes num_heads,
//   kv_num_heads, causal (1 for a causal request, 0 otherwise) and scale.
//   The CPU kernel has restrictions that this adapter works around without
//   changing what is computed, so that the semantics can be checked at
//   every size:
//     - head_size must be a multiple of 8 and V must have K's head size:
//       Q and K are padded with zero columns and V with zero columns up to
//       P = the next multiple of 8 of max(D, Dv) (scores Q·K are unchanged)
//       and the output is cut back to Dv. When it pads and the request has
//       no scale, the adapter passes scale = 1/sqrt(D), which is the op's
//       own default 1/sqrt(head_size) at the request's head size.
//     - batch_size must be 1 when sequence_length > 1 and past context is
//       given: such requests run one batch item at a time.
//   It refuses (the op raises, the error is answered) M > N, and M < N
//   without a cache is never sent to it: the keys before the chunk always go
//   in as past. Forward only, float32, GQA.
//
// Where the causal diagonal sits when M != N, and what a row that sees no
// key returns, are the ops' own behaviour: this adapter does not correct
// them (finding them is attnlab conform's job).

'use strict';

const path = require('path');

// Nothing but frames may reach standard output: console output goes to
// standard error.
console.log = console.info = console.debug = console.warn = console.error;

const ort = require('onnxruntime-node');

const PROTOCOL = 'attnlab-conform/1';

function log(msg) {
  process.stderr.write('ort_attention: ' + msg + '\n');
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

// ------------------------------------------------------------ protobuf

// Proto is a protobuf writer: varints, 32-bit floats and length-delimited
// fields, which is all a ModelProto with one node needs.
class Proto {
  constructor() {
    this.bytes = [];
  }
  varint(v) {
    let n = BigInt.asUintN(64, BigInt(v));
    while (n >= 0x80n) {
      this.bytes.push(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    this.bytes.push(Number(n));
    return this;
  }
  key(field, wire) {
    return this.varint((field << 3) | wire);
  }
  int(field, v) {
    return this.key(field, 0).varint(v);
  }
  float(field, v) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.key(field, 5);
    this.bytes.push(...b);
    return this;
  }
  raw(field, bytes) {
    this.key(field, 2).varint(bytes.length);
    for (const x of bytes) this.bytes.push(x);
    return this;
  }
  string(field, s) {
    return this.raw(field, Buffer.from(s, 'utf8'));
  }
  message(field, m) {
    return this.raw(field, m.bytes);
  }
  finish() {
    return Uint8Array.from(this.bytes);
  }
}

// ONNX field numbers (onnx/onnx.proto3) and enum values used below.
const ELEM = { float: 1, int32: 6, bool: 9 }; // TensorProto.DataType
const ATTR_FLOAT = 1;
const ATTR_INT = 2; // AttributeProto.AttributeType

// valueInfo is a ValueInfoProto: name, and type tensor_type {elem_type,
// shape} (no shape when dims is null).
function valueInfo(name, elem, dims) {
  const tensor = new Proto().int(1, elem);
  if (dims) {
    const shape = new Proto();
    for (const d of dims) shape.message(1, new Proto().int(1, d)); // Dimension.dim_value
    tensor.message(2, shape);
  }
  return new Proto().string(1, name).message(2, new Proto().message(1, tensor));
}

// attribute is an AttributeProto: {name, i, type INT} or {name, f, type FLOAT}.
function attribute(name, value) {
  const a = new Proto().string(1, name);
  if (value.float !== undefined) return a.float(2, value.float).int(20, ATTR_FLOAT);
  return a.int(3, value).int(20, ATTR_INT);
}

// oneNodeModel encodes a ModelProto whose graph is one node. inputs are
// {name, elem, dims} or null for an omitted optional input; outputs are
// names, typed float without a fixed shape.
function oneNodeModel({ opType, domain, inputs, outputs, attrs, opsets }) {
  const node = new Proto();
  const names = inputs.map((x) => (x ? x.name : ''));
  while (names.length && names[names.length - 1] === '') names.pop();
  for (const n of names) node.string(1, n);
  for (const o of outputs) node.string(2, o);
  node.string(3, 'attention').string(4, opType);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined) node.message(5, attribute(k, v));
  }
  if (domain) node.string(7, domain);
  const graph = new Proto().message(1, node).string(2, 'attnlab-conform');
  for (const x of inputs) if (x) graph.message(11, valueInfo(x.name, x.elem, x.dims));
  for (const o of outputs) graph.message(12, valueInfo(o, ELEM.float, null));
  const model = new Proto().int(1, 10); // ir_version 10
  for (const [d, v] of opsets) model.message(8, new Proto().string(1, d).int(2, v));
  model.string(2, 'attnlab conform ort_attention.js');
  model.message(7, graph);
  return model.finish();
}

// ------------------------------------------------------------ sessions

const SESSION_OPTIONS = { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 };

// Sessions are kept by the model's key; conform sends many requests of
// one shape, so a session is built once per shape.
class Sessions {
  constructor(limit) {
    this.limit = limit;
    this.map = new Map();
  }
  async get(key, build) {
    let s = this.map.get(key);
    if (s) {
      this.map.delete(key);
      this.map.set(key, s); // most recently used last
      return s;
    }
    s = await ort.InferenceSession.create(build(), SESSION_OPTIONS);
    this.map.set(key, s);
    if (this.map.size > this.limit) {
      const [oldKey, old] = this.map.entries().next().value;
      this.map.delete(oldKey);
      await old.release();
    }
    return s;
  }
}

// ------------------------------------------------------------ requests

// request decodes an attention request into plain numbers and Float32Arrays.
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
    B, Hq, Hkv, M, N, D, Dv,
    q: tensors.q.data, k: tensors.k.data, v: tensors.v.data,
    mask: tensors.mask ? tensors.mask.data : null,
    causal: meta.causal === 'true',
    past: meta.past !== undefined ? Number(meta.past) : N - M,
    scale: meta.scale !== undefined ? Number(meta.scale) : undefined,
  };
  if (r.mask && r.causal) throw new Error('a mask together with causal: the protocol sends one or the other');
  if (!Number.isInteger(r.past) || r.past !== N - M) throw new Error(`metadata past = ${meta.past}, want N - M = ${N - M}`);
  return r;
}

// rows copies rows [lo, hi) of every [S, W] matrix of x [A, S, W], zero
// padding each row to P >= W columns: the result is [A, hi-lo, P].
function rows(x, A, S, W, lo, hi, P = W) {
  const out = new Float32Array(A * (hi - lo) * P);
  let k = 0;
  for (let a = 0; a < A; a++) {
    for (let j = lo; j < hi; j++, k += P) out.set(x.subarray((a * S + j) * W, (a * S + j + 1) * W), k);
  }
  return out;
}

// bnsh2bsd turns x [B, H, S, W] (rows lo..hi of S) into [B, hi-lo, H*P],
// each head's row zero-padded to P columns.
function bnsh2bsd(x, B, H, S, W, lo, hi, P) {
  const L = hi - lo;
  const out = new Float32Array(B * L * H * P);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let j = lo; j < hi; j++) {
        out.set(x.subarray(((b * H + h) * S + j) * W, ((b * H + h) * S + j + 1) * W), ((b * L + j - lo) * H + h) * P);
      }
    }
  }
  return out;
}

// bsd2bnsh turns y [B, M, H*P] into [B, H, M, W], keeping W of P columns.
function bsd2bnsh(y, B, H, M, P, W) {
  const out = new Float32Array(B * H * M * W);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < M; i++) {
      for (let h = 0; h < H; h++) {
        const src = ((b * M + i) * H + h) * P;
        out.set(y.subarray(src, src + W), ((b * H + h) * M + i) * W);
      }
    }
  }
  return out;
}

function f32(data, dims) {
  return new ort.Tensor('float32', data, dims);
}

// ------------------------------------------------------------ the ops

class Attention {
  constructor(opset, cache) {
    this.opset = opset;
    this.cache = cache;
    this.sessions = new Sessions(32);
  }

  capabilities() {
    return {
      name: `ONNX Attention (opset ${this.opset}${this.cache ? ', past_key/past_value for the cache' : ', no past inputs'}), onnxruntime-node CPU`,
      version: `onnxruntime ${ort.env.versions.node || ort.env.versions.common}`,
      dtypes: ['float32'],
      gradients: false,
      lse: false,
      gqa: true,
      masks: ['causal', 'bool'],
      kv_cache: true,
      scale: true,
    };
  }

  async attention(tensors, meta) {
    const r = request(tensors, meta, ['float32']);
    const { B, Hq, Hkv, M, N, D, Dv } = r;
    const past = this.cache ? Math.max(r.past, 0) : 0; // M > N: no cache, all N keys are new
    const L = N - past;
    const key = JSON.stringify([B, Hq, Hkv, M, L, past, D, Dv, r.causal, r.scale, !!r.mask]);
    const session = await this.sessions.get(key, () =>
      oneNodeModel({
        opType: 'Attention',
        inputs: [
          { name: 'Q', elem: ELEM.float, dims: [B, Hq, M, D] },
          { name: 'K', elem: ELEM.float, dims: [B, Hkv, L, D] },
          { name: 'V', elem: ELEM.float, dims: [B, Hkv, L, Dv] },
          r.mask ? { name: 'attn_mask', elem: ELEM.bool, dims: [B, 1, M, N] } : null,
          past ? { name: 'past_key', elem: ELEM.float, dims: [B, Hkv, past, D] } : null,
          past ? { name: 'past_value', elem: ELEM.float, dims: [B, Hkv, past, Dv] } : null,
        ],
        outputs: past ? ['Y', 'present_key', 'present_value'] : ['Y'],
        attrs: { is_causal: r.causal ? 1 : 0, scale: r.scale !== undefined ? { float: r.scale } : undefined },
        opsets: [['', this.opset]],
      }),
    );
    const feeds = {
      Q: f32(r.q, [B, Hq, M, D]),
      K: f32(rows(r.k, B * Hkv, N, D, past, N), [B, Hkv, L, D]),
      V: f32(rows(r.v, B * Hkv, N, Dv, past, N), [B, Hkv, L, Dv]),
    };
    if (r.mask) feeds.attn_mask = new ort.Tensor('bool', Uint8Array.from(r.mask, (x) => (x !== 0n ? 1 : 0)), [B, 1, M, N]);
    if (past) {
      feeds.past_key = f32(rows(r.k, B * Hkv, N, D, 0, past), [B, Hkv, past, D]);
      feeds.past_value = f32(rows(r.v, B * Hkv, N, Dv, 0, past), [B, Hkv, past, Dv]);
    }
    const out = await session.run(feeds, ['Y']);
    return { o: { dtype: 'F32', shape: [B, Hq, M, Dv], data: Float32Array.from(out.Y.data) } };
  }
}

class GroupQueryAttention {
  constructor() {
    this.sessions = new Sessions(32);
  }

  capabilities() {
    return {
      name: 'com.microsoft GroupQueryAttention, onnxruntime-node CPU',
      version: `onnxruntime ${ort.env.versions.node || ort.env.versions.common}`,
      dtypes: ['float32'],
      gradients: false,
      lse: false,
      gqa: true,
      masks: ['causal'],
      kv_cache: true,
      scale: true,
    };
  }

  async attention(tensors, meta) {
    const r = request(tensors, meta, ['float32']);
    if (r.mask) throw new Error('mask: GroupQueryAttention takes a causal flag only');
    const { B, Hq, Hkv, M, N, D, Dv } = r;
    const past = Math.max(r.past, 0); // M > N: the op refuses it (query and key lengths differ)
    const L = N - past;
    const P = Math.ceil(Math.max(D, Dv) / 8) * 8;
    let scale = r.scale;
    if (scale === undefined && P !== D) scale = 1 / Math.sqrt(D); // the op's default at head size D
    // batch_size must be 1 when sequence_length > 1 with a past: one item at a time.
    const Bs = past > 0 && M > 1 ? 1 : B;
    const key = JSON.stringify([Bs, Hq, Hkv, M, L, past, P, r.causal, scale]);
    const session = await this.sessions.get(key, () =>
      oneNodeModel({
        opType: 'GroupQueryAttention',
        domain: 'com.microsoft',
        inputs: [
          { name: 'query', elem: ELEM.float, dims: [Bs, M, Hq * P] },
          { name: 'key', elem: ELEM.float, dims: [Bs, L, Hkv * P] },
          { name: 'value', elem: ELEM.float, dims: [Bs, L, Hkv * P] },
          past ? { name: 'past_key', elem: ELEM.float, dims: [Bs, Hkv, past, P] } : null,
          past ? { name: 'past_value', elem: ELEM.float, dims: [Bs, Hkv, past, P] } : null,
          { name: 'seqlens_k', elem: ELEM.int32, dims: [Bs] },
          { name: 'total_sequence_length', elem: ELEM.int32, dims: [] },
        ],
        outputs: ['output', 'present_key', 'present_value'],
        attrs: {
          num_heads: Hq,
          kv_num_heads: Hkv,
          causal: r.causal ? 1 : 0,
          scale: scale !== undefined ? { float: scale } : undefined,
        },
        opsets: [['', 21], ['com.microsoft', 1]],
      }),
    );
    const o = new Float32Array(B * Hq * M * Dv);
    for (let b0 = 0; b0 < B; b0 += Bs) {
      const item = (x, H, S, W) => x.subarray(b0 * H * S * W, (b0 + Bs) * H * S * W);
      const q = item(r.q, Hq, M, D);
      const k = item(r.k, Hkv, N, D);
      const v = item(r.v, Hkv, N, Dv);
      const feeds = {
        query: f32(bnsh2bsd(q, Bs, Hq, M, D, 0, M, P), [Bs, M, Hq * P]),
        key: f32(bnsh2bsd(k, Bs, Hkv, N, D, past, N, P), [Bs, L, Hkv * P]),
        value: f32(bnsh2bsd(v, Bs, Hkv, N, Dv, past, N, P), [Bs, L, Hkv * P]),
        seqlens_k: new ort.Tensor('int32', new Int32Array(Bs).fill(N - 1), [Bs]),
        total_sequence_length: new ort.Tensor('int32', Int32Array.of(N), []),
      };
      if (past) {
        feeds.past_key = f32(rows(k, Bs * Hkv, N, D, 0, past, P), [Bs, Hkv, past, P]);
        feeds.past_value = f32(rows(v, Bs * Hkv, N, Dv, 0, past, P), [Bs, Hkv, past, P]);
      }
      const out = await session.run(feeds, ['output', 'present_key', 'present_value']);
      o.set(bsd2bnsh(out.output.data, Bs, Hq, M, P, Dv), b0 * Hq * M * Dv);
    }
    return { o: { dtype: 'F32', shape: [B, Hq, M, Dv], data: o } };
  }
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

// serve answers frames from standard input until it ends.
async function serve(adapter) {
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

function main(argv) {
  const usage = `usage: node ${path.basename(__filename)} attention [--opset 23|24] [--no-cache] | gqa`;
  let adapter;
  if (argv[0] === 'attention') {
    let opset = 24;
    let cache = true;
    for (let i = 1; i < argv.length; i++) {
      const m = /^--opset(?:=(\d+))?$/.exec(argv[i]);
      if (argv[i] === '--no-cache') {
        cache = false;
      } else if (m) {
        opset = Number(m[1] !== undefined ? m[1] : argv[++i]);
      } else {
        throw new Error(usage);
      }
    }
    if (opset !== 23 && opset !== 24) throw new Error(`--opset ${opset}: the Attention op exists in opsets 23 and 24\n${usage}`);
    adapter = new Attention(opset, cache);
  } else if (argv[0] === 'gqa' && argv.length === 1) {
    adapter = new GroupQueryAttention();
  } else {
    throw new Error(usage);
  }
  return serve(adapter);
}

// Run as a script it serves the protocol; required as a module it lends
// its one-node model builder (docs/findings reproduce with it).
if (require.main === module) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (e) => {
      log(oneLine(e));
      process.exit(2);
    },
  );
}

module.exports = { ort, ELEM, oneNodeModel, SESSION_OPTIONS };
