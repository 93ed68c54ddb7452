// A GroupQueryAttention node (com.microsoft, onnxruntime-node 1.30 CPU)
// decoding one token after a cache of past tokens: the same inputs give
// another output when the node does not list its optional outputs
// present_key and present_value. Run from the repository:
//
//   (cd adapters/node && npm install --ignore-scripts)
//   node docs/findings/ort-gqa-present-outputs.js
//   node docs/findings/ort-gqa-present-outputs.js --wasm       # onnxruntime-web 1.30.0
//   node docs/findings/ort-gqa-present-outputs.js --ort 1.27   # or 1.24
'use strict';
const { runtime, ELEM, oneNodeModel } = require('../../adapters/node/ort_attention.js');

const arg = process.argv.slice(2);
const { ort, label, options: SESSION_OPTIONS } = runtime(arg[0] === '--wasm' ? 'wasm' : arg[0] === '--ort' ? arg[1] : '1.30');

const H = 1, D = 8, past = 2, M = 1, N = past + M;
// one query against 3 keys (2 cached, 1 new); values 1, 2, 3 in every dimension
const q = new Float32Array(D).fill(0.5);
const k = Float32Array.from({ length: N * D }, (_, i) => ((i * 7) % 5) / 5);
const v = Float32Array.from({ length: N * D }, (_, i) => 1 + Math.floor(i / D));

async function run(withPresent) {
  const outputs = withPresent ? ['output', 'present_key', 'present_value'] : ['output'];
  const model = oneNodeModel({
    opType: 'GroupQueryAttention', domain: 'com.microsoft',
    inputs: [
      { name: 'query', elem: ELEM.float, dims: [1, M, H * D] },
      { name: 'key', elem: ELEM.float, dims: [1, M, H * D] },
      { name: 'value', elem: ELEM.float, dims: [1, M, H * D] },
      { name: 'past_key', elem: ELEM.float, dims: [1, H, past, D] },
      { name: 'past_value', elem: ELEM.float, dims: [1, H, past, D] },
      { name: 'seqlens_k', elem: ELEM.int32, dims: [1] },
      { name: 'total_sequence_length', elem: ELEM.int32, dims: [] },
    ],
    outputs, attrs: { num_heads: H, kv_num_heads: H }, opsets: [['', 21], ['com.microsoft', 1]],
  });
  const s = await ort.InferenceSession.create(model, SESSION_OPTIONS);
  const t = (data, dims) => new ort.Tensor('float32', data, dims);
  const out = await s.run({
    query: t(q, [1, M, H * D]),
    key: t(k.slice(past * D), [1, M, H * D]),
    value: t(v.slice(past * D), [1, M, H * D]),
    past_key: t(k.slice(0, past * D), [1, H, past, D]),
    past_value: t(v.slice(0, past * D), [1, H, past, D]),
    seqlens_k: new ort.Tensor('int32', Int32Array.of(N - 1), [1]),
    total_sequence_length: new ort.Tensor('int32', Int32Array.of(N), []),
  }, outputs);
  return Array.from(out.output.data);
}

// the expected answer: softmax(q·k_j/√D) over the 3 keys, times v
function expected() {
  const s = [];
  for (let j = 0; j < N; j++) {
    let d = 0;
    for (let x = 0; x < D; x++) d += q[x] * k[j * D + x];
    s.push(d / Math.sqrt(D));
  }
  const mx = Math.max(...s);
  const e = s.map((x) => Math.exp(x - mx));
  const z = e.reduce((a, b) => a + b, 0);
  return Array.from({ length: D }, (_, x) => e.reduce((a, w, j) => a + (w / z) * v[j * D + x], 0));
}

(async () => {
  const want = expected();
  console.log(label);
  const a = await run(true);
  let b;
  try {
    b = await run(false);
  } catch (e) {
    // 1.24.3's schema requires the present outputs: the model is refused
    console.log('without them: the model is refused:', e.message.split('\n')[0].replace(/^.*Error /, ''));
    process.exit(0);
  }
  const fmt = (x) => x.slice(0, 3).map((y) => y.toFixed(5)).join(' ') + ' …';
  console.log('expected (3 keys)              ', fmt(want));
  console.log('with present_key/present_value ', fmt(a));
  console.log('without them                   ', fmt(b));
  const err = (x) => Math.max(...x.map((y, i) => Math.abs(y - want[i])));
  console.log(`max error: ${err(a).toExponential(1)} with, ${err(b).toExponential(1)} without`);
  process.exit(err(b) > 1e-4 ? 1 : 0);
})();
