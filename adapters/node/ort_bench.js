#!/usr/bin/env node
// attnlab bench peer for ONNX Runtime (onnxruntime-node, CPU):
//
//   node adapters/node/ort_bench.js -threads 2 [-op auto|mha|gqa|gqa-shared|attention]
//
// It speaks the bench peer protocol of docs/bench-peers.md: one JSON object
// per line on standard input and output, diagnostics on standard error. Each
// request shape gets a one-node ONNX model built here (with the ModelProto
// writer of ort_attention.js, no Python needed) and an InferenceSession
// whose intra-op pool has -threads threads, the calling thread included
// (inter-op 1, sequential execution). Session creation, input conversion and
// the first run are setup and never timed; each of a request's reps is one
// session.run timed on its own (process.hrtime, wall clock).
//
// Which op computes what. With -op auto (the default) the peer runs each
// op that can compute the request on its first request of a shape (setup,
// not timed), three runs each, and keeps the fastest, as a user of ONNX
// Runtime would pick the op for a model; the answers name the op kept
// ("kernel"). The candidates:
//
//   mha (Hq = Hkv): com.microsoft MultiHeadAttention; query [B, M, H·D],
//     attributes num_heads, scale = 1/sqrt(D) and unidirectional = 1 for a
//     causal request. Prefill: key and value [B, N, H·D]; without
//     unidirectional and without present outputs it runs MLAS's flash
//     attention kernel, with unidirectional the unfused path. Decode: the
//     cache as key and value in the op's BNSH form [B, H, N, D], read in
//     place. unidirectional is top-left except on the last query row when
//     N > M (a finding of attnlab conform); prefill has M = N, where top-left
//     and bottom-right are the same mask, and a causal request with M != N
//     is refused.
//   gqa (Hq != Hkv, head size a multiple of 8): com.microsoft
//     GroupQueryAttention; query [B, M, Hq·D], seqlens_k = N − 1,
//     total_sequence_length = N, causal attribute. Prefill: key and value
//     [B, N, Hkv·D], no past (M = N). Decode: past_key and past_value
//     [B, Hkv, N − 1, D] and the new token's key and value [B, 1, Hkv·D]; the
//     op concatenates them into its present outputs every step.
//   gqa-shared (decode, Hq != Hkv): the same op with past_key and past_value
//     [B, Hkv, N, D] holding the whole cache and the present outputs bound to
//     the past tensors' memory (the op's past_present_share_buffer mode, as
//     ONNX Runtime GenAI's decoder loop runs it): the op writes the new
//     token's key and value (the same values) in place.
//   attention: the standard ONNX Attention op (opset 24), Q [B, Hq, M, D],
//     K and V [B, Hkv, N, D] (GQA by head count), is_causal for a causal
//     prefill (M = N; decode's one row sees every key).
//   sgemm: ONNX MatMul of A [m, k] and B [k, n] (MLAS SGEMM).
//
// -op mha, gqa, gqa-shared or attention forces one op for attn_fwd and
// decode.

'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');

console.log = console.info = console.debug = console.warn = console.error;

const { ort, ELEM, oneNodeModel } = require('./ort_attention.js');

function log(msg) {
  process.stderr.write('ort_bench: ' + msg + '\n');
}

// ------------------------------------------------------------ safetensors (F32)

function readF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 8) throw new Error(`${file}: a safetensors file of ${buf.length} bytes`);
  const n = Number(buf.readBigUInt64LE(0));
  if (n > buf.length - 8) throw new Error(`${file}: header length ${n} exceeds the file`);
  const header = JSON.parse(buf.toString('utf8', 8, 8 + n));
  delete header.__metadata__;
  const data = buf.subarray(8 + n);
  const out = {};
  for (const [name, e] of Object.entries(header)) {
    if (e.dtype !== 'F32') throw new Error(`${file}: tensor ${name} is ${e.dtype}, want F32`);
    const count = e.shape.reduce((a, b) => a * b, 1);
    const [begin, end] = e.data_offsets;
    if (begin < 0 || end > data.length || end - begin !== 4 * count) throw new Error(`${file}: tensor ${name}: bad data_offsets`);
    const bytes = new Uint8Array(end - begin);
    bytes.set(data.subarray(begin, end));
    out[name] = { shape: e.shape, data: new Float32Array(bytes.buffer) };
  }
  return out;
}

function writeF32(file, name, shape, data) {
  let h = Buffer.from(JSON.stringify({ [name]: { dtype: 'F32', shape, data_offsets: [0, data.byteLength] } }), 'utf8');
  if (h.length % 8) h = Buffer.concat([h, Buffer.alloc(8 - (h.length % 8), 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  const tmp = file + '.tmp';
  fs.writeFileSync(tmp, Buffer.concat([len, h, Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
  fs.renameSync(tmp, file);
}

// ------------------------------------------------------------ layouts

// bhsd2bsh turns x [B, H, S, D] into [B, S, H·D].
function bhsd2bsh(x, B, H, S, D) {
  const out = new Float32Array(x.length);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let s = 0; s < S; s++) {
        out.set(x.subarray(((b * H + h) * S + s) * D, ((b * H + h) * S + s + 1) * D), ((b * S + s) * H + h) * D);
      }
    }
  }
  return out;
}

// bsh2bhsd turns y [B, S, H·D] into [B, H, S, D].
function bsh2bhsd(y, B, H, S, D) {
  const out = new Float32Array(y.length);
  for (let b = 0; b < B; b++) {
    for (let s = 0; s < S; s++) {
      for (let h = 0; h < H; h++) {
        out.set(y.subarray(((b * S + s) * H + h) * D, ((b * S + s) * H + h + 1) * D), ((b * H + h) * S + s) * D);
      }
    }
  }
  return out;
}

// lastRows returns rows [from, S) of every [S, D] matrix of x [A, S, D] as [A, S-from, D].
function lastRows(x, A, S, D, from) {
  const L = S - from;
  const out = new Float32Array(A * L * D);
  for (let a = 0; a < A; a++) out.set(x.subarray((a * S + from) * D, (a + 1) * S * D), a * L * D);
  return out;
}

// deterministic values in [-1, 1) when a request names no inputs file
function filled(n, seed) {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

function f32(data, dims) {
  return new ort.Tensor('float32', data, dims);
}

// ------------------------------------------------------------ workloads

const OPSETS = [['', 21], ['com.microsoft', 1]];

// sessionOptions: threads threads in the intra-op pool (the calling thread
// is one of them), nothing else in parallel, no spinning once a run is done.
function sessionOptions(threads) {
  return {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
    // the pool's threads stop spinning when a run returns: spinning on
    // while attnlab takes its turn took a core from it (attnlab's forward
    // measured at half its rate between ONNX Runtime's runs)
    extra: { session: { force_spinning_stop: '1' } },
  };
}

// inputsOf checks an attention request and returns its q, k, v [B,H,S,D].
function inputsOf(req) {
  const { b: B, hq: Hq, hkv: Hkv, m: M, n: N, d: D } = req;
  for (const [name, v] of Object.entries({ b: B, hq: Hq, hkv: Hkv, m: M, n: N, d: D })) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`${name} = ${v}: want a positive integer`);
  }
  if (Hq % Hkv) throw new Error(`hq = ${Hq} is not a multiple of hkv = ${Hkv}`);
  if (req.kv_dtype && req.kv_dtype !== 'f32') throw new Error(`kv_dtype ${req.kv_dtype}: this peer runs float32 K and V only`);
  if (req.op === 'decode' && M !== 1) throw new Error(`decode with m = ${M}: want m = 1`);
  if (req.op === 'attn_fwd' && M !== N) throw new Error(`attn_fwd with m = ${M} != n = ${N}: prefill has as many queries as keys`);
  if (!req.inputs) return { q: filled(B * Hq * M * D, 3), k: filled(B * Hkv * N * D, 4), v: filled(B * Hkv * N * D, 5) };
  const t = readF32(req.inputs);
  const want = { q: [B, Hq, M, D], k: [B, Hkv, N, D], v: [B, Hkv, N, D] };
  for (const [name, shape] of Object.entries(want)) {
    if (!t[name] || JSON.stringify(t[name].shape) !== JSON.stringify(shape)) {
      throw new Error(`inputs ${name}: shape ${t[name] ? JSON.stringify(t[name].shape) : 'missing'}, want ${JSON.stringify(shape)}`);
    }
  }
  return { q: t.q.data, k: t.k.data, v: t.v.data };
}

// candidates are the ops that can compute req.
function candidates(req) {
  if (req.op === 'sgemm') return ['matmul'];
  if (req.hq === req.hkv) return ['mha', 'attention'];
  const out = req.d % 8 === 0 ? ['gqa'] : [];
  if (req.op === 'decode' && req.d % 8 === 0) out.push('gqa-shared');
  return out.concat(['attention']);
}

// A workload is a session, its feeds and fetches, and how to read back o.
class Workload {
  // build makes the workload of req with op; x holds q, k and v.
  static async build(req, op, threads, x) {
    const w = new Workload();
    const opts = sessionOptions(threads);
    if (op === 'matmul') {
      const { m, n, k } = req;
      w.kernel = 'MatMul';
      w.session = await ort.InferenceSession.create(
        oneNodeModel({
          opType: 'MatMul',
          inputs: [
            { name: 'A', elem: ELEM.float, dims: [m, k] },
            { name: 'B', elem: ELEM.float, dims: [k, n] },
          ],
          outputs: ['Y'],
          attrs: {},
          opsets: OPSETS,
        }),
        opts,
      );
      w.feeds = { A: f32(filled(m * k, 1), [m, k]), B: f32(filled(k * n, 2), [k, n]) };
      w.fetches = ['Y'];
      return w;
    }
    const { b: B, hq: Hq, hkv: Hkv, m: M, n: N, d: D } = req;
    const { q, k, v } = x;
    const decode = req.op === 'decode';
    const causal = !decode && req.causal;
    const scale = { float: 1 / Math.sqrt(D) };
    Object.assign(w, { B, Hq, M, D, layout: 'bsh' });
    if (op === 'mha') {
      if (Hq !== Hkv) throw new Error(`MultiHeadAttention needs hq = hkv, got ${Hq}/${Hkv}`);
      const kvDims = decode ? [B, Hkv, N, D] : [B, N, Hkv * D];
      w.kernel = decode ? 'MultiHeadAttention, cache as BNSH key/value' : `MultiHeadAttention, unidirectional=${causal ? 1 : 0}`;
      w.session = await ort.InferenceSession.create(
        oneNodeModel({
          opType: 'MultiHeadAttention',
          domain: 'com.microsoft',
          inputs: [
            { name: 'query', elem: ELEM.float, dims: [B, M, Hq * D] },
            { name: 'key', elem: ELEM.float, dims: kvDims },
            { name: 'value', elem: ELEM.float, dims: kvDims },
          ],
          outputs: ['output'],
          attrs: { num_heads: Hq, unidirectional: causal ? 1 : 0, scale },
          opsets: OPSETS,
        }),
        opts,
      );
      w.feeds = {
        query: f32(bhsd2bsh(q, B, Hq, M, D), [B, M, Hq * D]),
        key: decode ? f32(k, kvDims) : f32(bhsd2bsh(k, B, Hkv, N, D), kvDims),
        value: decode ? f32(v, kvDims) : f32(bhsd2bsh(v, B, Hkv, N, D), kvDims),
      };
      w.fetches = ['output'];
    } else if (op === 'gqa' || op === 'gqa-shared') {
      if (D % 8) throw new Error(`GroupQueryAttention needs a head size that is a multiple of 8, got d = ${D}`);
      const shared = op === 'gqa-shared';
      if (shared && !decode) throw new Error('gqa-shared is for decode');
      const L = decode ? 1 : N; // new tokens
      const past = decode ? (shared ? N : N - 1) : 0; // the past inputs' length
      w.kernel = decode
        ? `GroupQueryAttention, ${shared ? 'past shared with present' : 'past + new token into present'}`
        : `GroupQueryAttention, causal=${causal ? 1 : 0}`;
      const inputs = [
        { name: 'query', elem: ELEM.float, dims: [B, M, Hq * D] },
        { name: 'key', elem: ELEM.float, dims: [B, L, Hkv * D] },
        { name: 'value', elem: ELEM.float, dims: [B, L, Hkv * D] },
        past ? { name: 'past_key', elem: ELEM.float, dims: [B, Hkv, past, D] } : null,
        past ? { name: 'past_value', elem: ELEM.float, dims: [B, Hkv, past, D] } : null,
        { name: 'seqlens_k', elem: ELEM.int32, dims: [B] },
        { name: 'total_sequence_length', elem: ELEM.int32, dims: [] },
      ];
      w.session = await ort.InferenceSession.create(
        oneNodeModel({
          opType: 'GroupQueryAttention',
          domain: 'com.microsoft',
          inputs,
          outputs: ['output', 'present_key', 'present_value'],
          attrs: { num_heads: Hq, kv_num_heads: Hkv, scale, causal: decode || causal ? 1 : 0 },
          opsets: OPSETS,
        }),
        opts,
      );
      w.feeds = {
        query: f32(bhsd2bsh(q, B, Hq, M, D), [B, M, Hq * D]),
        key: f32(bhsd2bsh(lastRows(k, B * Hkv, N, D, N - L), B, Hkv, L, D), [B, L, Hkv * D]),
        value: f32(bhsd2bsh(lastRows(v, B * Hkv, N, D, N - L), B, Hkv, L, D), [B, L, Hkv * D]),
        seqlens_k: new ort.Tensor('int32', new Int32Array(B).fill(N - 1), [B]),
        total_sequence_length: new ort.Tensor('int32', Int32Array.of(N), []),
      };
      w.fetches = ['output'];
      if (shared) {
        w.feeds.past_key = f32(k, [B, Hkv, N, D]);
        w.feeds.past_value = f32(v, [B, Hkv, N, D]);
        w.fetches = { output: null, present_key: w.feeds.past_key, present_value: w.feeds.past_value };
      } else if (past) {
        const first = (x) => {
          const out = new Float32Array(B * Hkv * past * D);
          for (let a = 0; a < B * Hkv; a++) out.set(x.subarray(a * N * D, (a * N + past) * D), a * past * D);
          return out;
        };
        w.feeds.past_key = f32(first(k), [B, Hkv, past, D]);
        w.feeds.past_value = f32(first(v), [B, Hkv, past, D]);
      }
    } else if (op === 'attention') {
      w.kernel = `ONNX Attention (opset 24), is_causal=${causal ? 1 : 0}`;
      w.session = await ort.InferenceSession.create(
        oneNodeModel({
          opType: 'Attention',
          inputs: [
            { name: 'Q', elem: ELEM.float, dims: [B, Hq, M, D] },
            { name: 'K', elem: ELEM.float, dims: [B, Hkv, N, D] },
            { name: 'V', elem: ELEM.float, dims: [B, Hkv, N, D] },
          ],
          outputs: ['Y'],
          attrs: { is_causal: causal ? 1 : 0, scale },
          opsets: [['', 24]],
        }),
        opts,
      );
      w.feeds = { Q: f32(q, [B, Hq, M, D]), K: f32(k, [B, Hkv, N, D]), V: f32(v, [B, Hkv, N, D]) };
      w.fetches = ['Y'];
      w.layout = 'bhsd';
    } else {
      throw new Error(`op ${op}: want mha, gqa, gqa-shared or attention`);
    }
    return w;
  }

  // create builds the workload of req: with op 'auto', every candidate in
  // turn, three untimed runs each, keeping the fastest (the others are
  // released before the next is built, so that one copy of a large cache
  // is held at a time besides the inputs).
  static async create(req, op, threads) {
    const x = req.op === 'sgemm' ? null : inputsOf(req);
    const ops = op === 'auto' || req.op === 'sgemm' ? candidates(req) : [op];
    let best = null;
    let bestTime = Infinity;
    const errors = [];
    for (const o of ops) {
      let w;
      try {
        w = await Workload.build(req, o, threads, x);
        await w.run(); // the first run allocates
      } catch (e) {
        errors.push(`${o}: ${oneLine(e)}`);
        if (w) await w.release();
        continue;
      }
      if (ops.length === 1) return w;
      let t = Infinity;
      for (let r = 0; r < 3; r++) {
        const t0 = process.hrtime.bigint();
        await w.run();
        t = Math.min(t, Number(process.hrtime.bigint() - t0));
      }
      if (t < bestTime) {
        if (best) await best.release();
        best = w;
        bestTime = t;
      } else {
        await w.release();
      }
    }
    if (!best) throw new Error(errors.join('; '));
    return best;
  }

  async run() {
    return this.session.run(this.feeds, this.fetches);
  }

  // output returns o [B, Hq, M, D] of a run's results.
  output(res) {
    const y = (res.output || res.Y).data;
    return this.layout === 'bsh' ? bsh2bhsd(y, this.B, this.Hq, this.M, this.D) : Float32Array.from(y);
  }

  async release() {
    await this.session.release();
  }
}

// ------------------------------------------------------------ the loop

function oneLine(e) {
  const msg = String((e && e.message) || e).trim().split('\n')[0];
  return msg.length > 400 ? msg.slice(0, 397) + '...' : msg;
}

async function main(argv) {
  let threads = 0;
  let op = 'auto';
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '-threads' || argv[i] === '--threads') threads = Number(argv[++i]);
    else if (argv[i] === '-op' || argv[i] === '--op') op = argv[++i];
    else throw new Error(`usage: node ${path.basename(__filename)} -threads N [-op auto|mha|gqa|gqa-shared|attention]`);
  }
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`-threads ${threads}: want a positive integer`);
  if (!['auto', 'mha', 'gqa', 'gqa-shared', 'attention'].includes(op)) throw new Error(`-op ${op}: want auto, mha, gqa, gqa-shared or attention`);
  const version = ort.env.versions.node || ort.env.versions.common;
  const hello = {
    peer: 'onnxruntime',
    version: `onnxruntime-node ${version}`,
    build: `prebuilt CPU package (MLAS), node ${process.version}, intra-op threads ${threads}, op ${op}`,
    threads,
    ops: ['attn_fwd', 'decode', 'sgemm'],
  };
  process.stdout.write(JSON.stringify(hello) + '\n');

  let current = null; // one workload at a time: the bench measures shape by shape
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let answer;
    try {
      const req = JSON.parse(line);
      if (!['attn_fwd', 'decode', 'sgemm'].includes(req.op)) throw new Error(`unknown op ${JSON.stringify(req.op)}`);
      const reps = req.reps === undefined ? 1 : req.reps;
      if (!Number.isInteger(reps) || reps < 1 || reps > 100000) throw new Error(`reps = ${req.reps}: want 1 to 100000`);
      const key = JSON.stringify({ ...req, reps: 0, output: '' });
      if (!current || current.key !== key) {
        if (current) await current.w.release();
        current = null;
        current = { key, w: await Workload.create(req, op, threads) }; // setup: never timed
      }
      const seconds = [];
      let res;
      for (let r = 0; r < reps; r++) {
        const t0 = process.hrtime.bigint();
        res = await current.w.run();
        seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
      }
      if (req.output) {
        if (req.op === 'sgemm') throw new Error('output: sgemm has none');
        writeF32(req.output, 'o', [current.w.B, current.w.Hq, current.w.M, current.w.D], current.w.output(res));
      }
      answer = { ok: true, seconds, kernel: current.w.kernel };
    } catch (e) {
      log(oneLine(e));
      answer = { ok: false, error: oneLine(e) };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
  if (current) await current.w.release();
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e) => {
    log(oneLine(e));
    process.exit(2);
  },
);
