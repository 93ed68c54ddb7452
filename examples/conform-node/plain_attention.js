// An example conformance adapter in Node: attention in plain JavaScript.
//
//   attnlab conform -exec "node examples/conform-node/plain_attention.js"
//
// Copy it, put your kernel in place of attend, say in capabilities what it
// takes, and run the command above. The protocol (docs/conform-protocol.md)
// is spoken by adapters/node/conform_io.js, which needs no npm package:
// main() reads each request and awaits attention(tensors, meta), whose
// tensors are {name: {dtype, shape, data}} (typed arrays), and writes back
// what it returns; a thrown error becomes an error response (the
// implementation refused that input) and the adapter keeps serving.
// conform_io.request() unpacks a request of a kernel that takes a causal
// flag or a boolean mask into sizes and arrays.
//
// The kernel: O = softmax(Q Kᵀ · scale, masked) V per head, forward only,
// in JavaScript's float64 (answers in the request's dtype), query head h
// reading K/V head h / (Hq/Hkv). Its causal flag aligns the last query with
// the last key (bottom-right, as FlashAttention 2.1 does); it takes no
// positions, so attnlab conform cannot tell that from its position rule and
// reports bottom-right. A query row that sees no key is refused with an
// error naming it, as attnlab's contract wants.

'use strict';

const path = require('path');
const io = require(path.join(__dirname, '..', '..', 'adapters', 'node', 'conform_io.js'));

// attend computes the output of request r (conform_io.request's form).
function attend(r) {
  const { B, Hq, Hkv, M, N, D, Dv } = r;
  const scale = r.scale !== undefined ? r.scale : 1 / Math.sqrt(D);
  const group = Hq / Hkv;
  const o = new Float64Array(B * Hq * M * Dv);
  const s = new Float64Array(N);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const kv = b * Hkv + Math.floor(h / group);
      for (let i = 0; i < M; i++) {
        const q = ((b * Hq + h) * M + i) * D;
        let max = -Infinity;
        for (let j = 0; j < N; j++) {
          const visible = r.mask ? r.mask[(b * M + i) * N + j] === 1 : !r.causal || j <= i + N - M;
          s[j] = -Infinity;
          if (visible) {
            s[j] = 0;
            for (let d = 0; d < D; d++) s[j] += r.q[q + d] * r.k[(kv * N + j) * D + d];
            s[j] *= scale;
          }
          max = Math.max(max, s[j]);
        }
        if (max === -Infinity) throw new Error(`batch ${b}, query row ${i} sees no key`);
        let sum = 0;
        for (let j = 0; j < N; j++) sum += s[j] = Math.exp(s[j] - max);
        const out = ((b * Hq + h) * M + i) * Dv;
        for (let j = 0; j < N; j++) {
          for (let d = 0; d < Dv; d++) o[out + d] += (s[j] / sum) * r.v[(kv * N + j) * Dv + d];
        }
      }
    }
  }
  return o;
}

const kernel = {
  capabilities() {
    return {
      name: 'plain JavaScript attention (examples/conform-node)',
      version: 'node ' + process.versions.node,
      dtypes: ['float32', 'float64'],
      gradients: false,
      lse: false,
      gqa: true,
      masks: ['causal', 'bool'],
      kv_cache: true,
      scale: true,
    };
  },
  async attention(tensors, meta) {
    const r = io.request(tensors, meta, ['float32', 'float64']);
    if (r.do) throw new Error('this kernel has no backward');
    const o = attend(r);
    const [dtype, array] = r.dtype === 'float32' ? ['F32', Float32Array] : ['F64', Float64Array];
    return { o: { dtype, shape: [r.B, r.Hq, r.M, r.Dv], data: array.from(o) } };
  },
};

io.main('plain_attention', async () => kernel);
