#!/usr/bin/env node
// attnlab conform adapter for ONNX Runtime's attention ops, on
// onnxruntime-node (native, CPU) or onnxruntime-web (WASM, run by Node):
//
//   attnlab conform -exec "node adapters/node/ort_attention.js attention"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --opset 23"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --no-cache"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --nonpad"
//   attnlab conform -exec "node adapters/node/ort_attention.js attention --ort 1.24"
//   attnlab conform -exec "node adapters/node/ort_attention.js gqa --wasm"
//   attnlab conform -exec "node adapters/node/ort_attention.js mha [--no-cache]"
//
// It speaks the protocol of docs/conform-protocol.md (conform_io.js). For
// every request shape it builds a one-node ONNX model itself (the
// ModelProto is encoded by hand below: there is no Python onnx package here
// and none is needed), opens an InferenceSession on it once and keeps it
// for later requests of the same shape.
//
// The runtime: onnxruntime-node 1.30 by default; --ort 1.27 and --ort 1.24
// run onnxruntime-node 1.27.0 and 1.24.3, installed beside it under the npm
// aliases onnxruntime-node-1.27 and onnxruntime-node-1.24 (package.json);
// --wasm runs onnxruntime-web 1.30 (its WebAssembly CPU build, one thread).
// One process loads one runtime: the versions' native libraries share the
// soname libonnxruntime.so.1, so a second one fails to load ("version
// `VERS_1.24.3' not found"), and the ONNX Runtime packages register their
// backends with one onnxruntime-common.
//
// attention: the standard ONNX `Attention` op (opset 24 by default, 23 with
//   --opset 23). Q [B,Hq,M,D], K [B,Hkv,L,D], V [B,Hkv,L,Dv] in attnlab's own
//   layout, attributes is_causal and scale. attnlab sends all N keys and
//   metadata past = N - M: the first `past` keys go in as past_key and
//   past_value, the last M as the new K and V (with past <= 0, that is
//   M >= N, all N keys are the new K and V and there is no past input). With
//   --no-cache the keys always go in as K and V, never as past: the op's
//   convention for a query sequence shorter than the key sequence without a
//   cache, which is another code path than the cache's. --nonpad is
//   --no-cache with nonpad_kv_seqlen = N for every batch item (opset 24):
//   the spec's input for a cache kept outside the op, K and V then being
//   the whole cache. A
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
// mha: the com.microsoft `MultiHeadAttention` op: query [B,M,H*D], key
//   [B,L,H*D] and value [B,L,H*Dv] (BSD), past_key and past_value
//   [B,H,past,D] / [B,H,past,Dv] (BNSH) split at past = N - M as for
//   attention (every key as key/value with --no-cache, or when M >= N),
//   attributes num_heads, unidirectional (1 for a causal request) and scale.
//   A "bool" mask [B,M,N] becomes the op's key_padding_mask in its 3-D form
//   (batch, sequence_length, total_sequence_length), int32 1 = may attend;
//   the op turns 0 into its mask_filter_value (default -10000) added to the
//   score, which is its own masking and is left at its default. With a
//   cache it always lists present_key and present_value as outputs, and,
//   as the CPU kernel wants past_value's head size to be past_key's, it
//   zero-pads Q, K and V to max(D, Dv) columns when Dv != D (scores
//   unchanged; the output is cut back to Dv; without a request scale it
//   passes 1/sqrt(D), the op's default at the request's head size).
//   Forward only, float32, one K/V head per query head (no GQA), explicit
//   scale.
//
// Where the causal diagonal sits when M != N, and what a row that sees no
// key returns, are the ops' own behaviour: this adapter does not correct
// them (finding them is attnlab conform's job).

'use strict';

const io = require('./conform_io.js');

// ------------------------------------------------------------ runtimes

// RUNTIMES are the ONNX Runtime packages the adapter runs on, by the value
// of --ort (native) or "wasm", each under its npm name in package.json.
const RUNTIMES = {
  '1.30': { pkg: 'onnxruntime-node', wasm: false },
  '1.27': { pkg: 'onnxruntime-node-1.27', wasm: false },
  '1.24': { pkg: 'onnxruntime-node-1.24', wasm: false },
  wasm: { pkg: 'onnxruntime-web', wasm: true },
};

// runtime loads one runtime: {ort, label, options}, label naming the
// package, its version and where it computes ("onnxruntime-node 1.24.3
// CPU"), options the session options (one thread, errors only in the log).
function runtime(which) {
  const spec = RUNTIMES[which];
  if (!spec) throw new Error(`runtime ${which}: want one of ${Object.keys(RUNTIMES).join(', ')}`);
  const ort = require(spec.pkg);
  if (spec.wasm) {
    ort.env.wasm.numThreads = 1; // no worker threads: one process, one core, as native
    ort.env.wasm.proxy = false;
    ort.env.logLevel = 'error';
    return { ort, label: `onnxruntime-web ${ort.env.versions.web} WASM`, options: { executionProviders: ['wasm'], logSeverityLevel: 3 } };
  }
  return { ort, label: `onnxruntime-node ${ort.env.versions.node} CPU`, options: SESSION_OPTIONS };
}

const SESSION_OPTIONS = { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 };

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
const ELEM = { float: 1, int32: 6, int64: 7, bool: 9 }; // TensorProto.DataType
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

// Sessions are kept by the model's key; conform sends many requests of
// one shape, so a session is built once per shape.
class Sessions {
  constructor(rt, limit) {
    this.rt = rt;
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
    s = await this.rt.ort.InferenceSession.create(build(), this.rt.options);
    this.map.set(key, s);
    if (this.map.size > this.limit) {
      const [oldKey, old] = this.map.entries().next().value;
      this.map.delete(oldKey);
      await old.release();
    }
    return s;
  }
}

// ------------------------------------------------------------ layouts

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

// ------------------------------------------------------------ the ops

// ORTOp holds what the three ops share: the runtime, the sessions, and
// the version for the hello.
class ORTOp {
  constructor(rt) {
    this.rt = rt;
    this.sessions = new Sessions(rt, 32);
  }
  f32(data, dims) {
    return new this.rt.ort.Tensor('float32', data, dims);
  }
  version() {
    const v = this.rt.ort.env.versions;
    return `onnxruntime ${v.node || v.web || v.common}`;
  }
}

class Attention extends ORTOp {
  // cache: the keys before the chunk as past_key/past_value; nonpad (no
  // cache): nonpad_kv_seqlen = N with every key as K and V
  constructor(rt, opset, cache, nonpad) {
    super(rt);
    this.opset = opset;
    this.cache = cache;
    this.nonpad = nonpad;
  }

  capabilities() {
    const how = this.cache ? 'past_key/past_value for the cache' : this.nonpad ? 'no past inputs, nonpad_kv_seqlen' : 'no past inputs';
    return {
      name: `ONNX Attention (opset ${this.opset}, ${how}), ${this.rt.label}`,
      version: this.version(),
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
    const r = io.request(tensors, meta, ['float32']);
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
          this.nonpad ? { name: 'nonpad_kv_seqlen', elem: ELEM.int64, dims: [B] } : null,
        ],
        outputs: past ? ['Y', 'present_key', 'present_value'] : ['Y'],
        attrs: { is_causal: r.causal ? 1 : 0, scale: r.scale !== undefined ? { float: r.scale } : undefined },
        opsets: [['', this.opset]],
      }),
    );
    const feeds = {
      Q: this.f32(r.q, [B, Hq, M, D]),
      K: this.f32(rows(r.k, B * Hkv, N, D, past, N), [B, Hkv, L, D]),
      V: this.f32(rows(r.v, B * Hkv, N, Dv, past, N), [B, Hkv, L, Dv]),
    };
    if (r.mask) feeds.attn_mask = new this.rt.ort.Tensor('bool', r.mask, [B, 1, M, N]);
    if (past) {
      feeds.past_key = this.f32(rows(r.k, B * Hkv, N, D, 0, past), [B, Hkv, past, D]);
      feeds.past_value = this.f32(rows(r.v, B * Hkv, N, Dv, 0, past), [B, Hkv, past, Dv]);
    }
    if (this.nonpad) feeds.nonpad_kv_seqlen = new this.rt.ort.Tensor('int64', new BigInt64Array(B).fill(BigInt(N)), [B]);
    const out = await session.run(feeds, ['Y']);
    return { o: { dtype: 'F32', shape: [B, Hq, M, Dv], data: Float32Array.from(out.Y.data) } };
  }
}

class GroupQueryAttention extends ORTOp {
  capabilities() {
    return {
      name: `com.microsoft GroupQueryAttention, ${this.rt.label}`,
      version: this.version(),
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
    const r = io.request(tensors, meta, ['float32']);
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
        query: this.f32(bnsh2bsd(q, Bs, Hq, M, D, 0, M, P), [Bs, M, Hq * P]),
        key: this.f32(bnsh2bsd(k, Bs, Hkv, N, D, past, N, P), [Bs, L, Hkv * P]),
        value: this.f32(bnsh2bsd(v, Bs, Hkv, N, Dv, past, N, P), [Bs, L, Hkv * P]),
        seqlens_k: new this.rt.ort.Tensor('int32', new Int32Array(Bs).fill(N - 1), [Bs]),
        total_sequence_length: new this.rt.ort.Tensor('int32', Int32Array.of(N), []),
      };
      if (past) {
        feeds.past_key = this.f32(rows(k, Bs * Hkv, N, D, 0, past, P), [Bs, Hkv, past, P]);
        feeds.past_value = this.f32(rows(v, Bs * Hkv, N, Dv, 0, past, P), [Bs, Hkv, past, P]);
      }
      const out = await session.run(feeds, ['output', 'present_key', 'present_value']);
      o.set(bsd2bnsh(out.output.data, Bs, Hq, M, P, Dv), b0 * Hq * M * Dv);
    }
    return { o: { dtype: 'F32', shape: [B, Hq, M, Dv], data: o } };
  }
}

class MultiHeadAttention extends ORTOp {
  constructor(rt, cache) {
    super(rt);
    this.cache = cache;
  }

  capabilities() {
    return {
      name: `com.microsoft MultiHeadAttention (${this.cache ? 'past_key/past_value for the cache' : 'no past inputs'}), ${this.rt.label}`,
      version: this.version(),
      dtypes: ['float32'],
      gradients: false,
      lse: false,
      gqa: false,
      masks: ['causal', 'bool'],
      kv_cache: true,
      scale: true,
    };
  }

  async attention(tensors, meta) {
    const r = io.request(tensors, meta, ['float32']);
    const { B, Hq: H, Hkv, M, N, D, Dv } = r;
    if (Hkv !== H) throw new Error(`MultiHeadAttention needs as many K/V heads as query heads (Hq = ${H}, Hkv = ${Hkv})`);
    const past = this.cache ? Math.max(r.past, 0) : 0; // M > N: no cache, all N keys are new
    const L = N - past;
    // with a past, the CPU kernel wants V's head size to be K's: Q, K and V
    // are zero-padded to P = max(D, Dv) columns (the scores are unchanged),
    // the output cut back to Dv, and the op's default scale kept at 1/sqrt(D)
    const P = past && Dv !== D ? Math.max(D, Dv) : D;
    const Pv = past && Dv !== D ? P : Dv;
    let scale = r.scale;
    if (scale === undefined && P !== D) scale = 1 / Math.sqrt(D);
    const outputs = past ? ['output', 'present_key', 'present_value'] : ['output'];
    const key = JSON.stringify([B, H, M, L, past, P, Pv, r.causal, scale, !!r.mask]);
    const session = await this.sessions.get(key, () =>
      oneNodeModel({
        opType: 'MultiHeadAttention',
        domain: 'com.microsoft',
        inputs: [
          { name: 'query', elem: ELEM.float, dims: [B, M, H * P] },
          { name: 'key', elem: ELEM.float, dims: [B, L, H * P] },
          { name: 'value', elem: ELEM.float, dims: [B, L, H * Pv] },
          null, // bias
          r.mask ? { name: 'key_padding_mask', elem: ELEM.int32, dims: [B, M, N] } : null,
          null, // attention_bias
          past ? { name: 'past_key', elem: ELEM.float, dims: [B, H, past, P] } : null,
          past ? { name: 'past_value', elem: ELEM.float, dims: [B, H, past, Pv] } : null,
        ],
        outputs,
        attrs: {
          num_heads: H,
          unidirectional: r.causal ? 1 : 0,
          scale: scale !== undefined ? { float: scale } : undefined,
        },
        opsets: [['', 21], ['com.microsoft', 1]],
      }),
    );
    const feeds = {
      query: this.f32(bnsh2bsd(r.q, B, H, M, D, 0, M, P), [B, M, H * P]),
      key: this.f32(bnsh2bsd(r.k, B, H, N, D, past, N, P), [B, L, H * P]),
      value: this.f32(bnsh2bsd(r.v, B, H, N, Dv, past, N, Pv), [B, L, H * Pv]),
    };
    if (r.mask) feeds.key_padding_mask = new this.rt.ort.Tensor('int32', Int32Array.from(r.mask), [B, M, N]);
    if (past) {
      feeds.past_key = this.f32(rows(r.k, B * H, N, D, 0, past, P), [B, H, past, P]);
      feeds.past_value = this.f32(rows(r.v, B * H, N, Dv, 0, past, Pv), [B, H, past, Pv]);
    }
    const out = await session.run(feeds, outputs);
    return { o: { dtype: 'F32', shape: [B, H, M, Dv], data: bsd2bnsh(out.output.data, B, H, M, Pv, Dv) } };
  }
}

// ------------------------------------------------------------ main

const USAGE = 'usage: node ort_attention.js attention [--opset 23|24] [--no-cache | --nonpad] | gqa | mha [--no-cache]; any of them [--ort 1.24|1.27|1.30 | --wasm]';

// build makes the adapter the arguments ask for.
function build(argv) {
  const op = argv[0];
  let opset = 24;
  let cache = true;
  let nonpad = false;
  let which = '1.30';
  let wasm = false;
  for (let i = 1; i < argv.length; i++) {
    const m = /^--(opset|ort)(?:=(.+))?$/.exec(argv[i]);
    if (argv[i] === '--no-cache' && (op === 'attention' || op === 'mha')) {
      cache = false;
    } else if (argv[i] === '--nonpad' && op === 'attention') {
      cache = false;
      nonpad = true;
    } else if (argv[i] === '--wasm') {
      wasm = true;
    } else if (m && (m[1] === 'ort' || op === 'attention')) {
      const v = m[2] !== undefined ? m[2] : argv[++i];
      if (m[1] === 'opset') opset = Number(v);
      else which = v;
    } else {
      throw new Error(`${argv[i]}: not an argument of ${op || 'the adapter'}\n${USAGE}`);
    }
  }
  if (opset !== 23 && opset !== 24) throw new Error(`--opset ${opset}: the Attention op exists in opsets 23 and 24\n${USAGE}`);
  if (nonpad && opset !== 24) throw new Error(`--nonpad: nonpad_kv_seqlen came with opset 24\n${USAGE}`);
  if (!RUNTIMES[which] || which === 'wasm') throw new Error(`--ort ${which}: the versions installed side by side are 1.24, 1.27 and 1.30\n${USAGE}`);
  if (wasm && which !== '1.30') throw new Error(`--wasm with --ort ${which}: onnxruntime-web is installed at 1.30 only\n${USAGE}`);
  if (op === 'gqa' && which !== '1.30') {
    // "Unrecognized attribute: causal for operator GroupQueryAttention"
    throw new Error(`gqa --ort ${which}: the GroupQueryAttention of onnxruntime ${which} has no causal attribute, which this adapter sets; run it on 1.30`);
  }
  const make = { attention: () => new Attention(rt, opset, cache, nonpad), gqa: () => new GroupQueryAttention(rt), mha: () => new MultiHeadAttention(rt, cache) }[op];
  if (!make) throw new Error(USAGE);
  const rt = runtime(wasm ? 'wasm' : which);
  return make();
}

// Run as a script it serves the protocol; required as a module it lends
// its one-node model builder and its runtimes (docs/findings reproduce with
// them). ort is onnxruntime-node 1.30, loaded when first asked for.
if (require.main === module) {
  io.main('ort_attention', build);
}

let defaultORT;
module.exports = {
  ELEM,
  oneNodeModel,
  SESSION_OPTIONS,
  runtime,
  get ort() {
    if (!defaultORT) defaultORT = runtime('1.30').ort;
    return defaultORT;
  },
};
