// com.microsoft MultiHeadAttention with unidirectional = 1 and no past
// inputs, on more keys than queries (3 queries, 5 keys): rows 0 and 1 are
// masked top-left, and the last row sees every key. The same keys given
// as past_key/past_value (2) + key/value (3) are masked bottom-right. Run
// from the repository:
//
//   (cd adapters/node && npm install --ignore-scripts)
//   node docs/findings/ort-mha-unidirectional-last-row.js          # onnxruntime-node 1.30.0
//   node docs/findings/ort-mha-unidirectional-last-row.js --ort 1.24   # or 1.27
//   node docs/findings/ort-mha-unidirectional-last-row.js --wasm   # onnxruntime-web 1.30.0
//
// q = 0, so every key a row reads gets the same weight, and key j's value
// row is j + 1 in every dimension: a row's output is the mean of (j + 1)
// over the keys it reads, which names them. It exits 1 while the last row
// escapes the mask.
'use strict';
const { runtime, ELEM, oneNodeModel } = require('../../adapters/node/ort_attention.js');

const arg = process.argv.slice(2);
const which = arg[0] === '--wasm' ? 'wasm' : arg[0] === '--ort' ? arg[1] : '1.30';
const { ort, label, options } = runtime(which);

const H = 1, D = 4, M = 3, N = 5;
const q = new Float32Array(M * D); // zero: uniform weights over the keys a row reads
const k = Float32Array.from({ length: N * D }, (_, i) => Math.sin(i + 1));
const v = Float32Array.from({ length: N * D }, (_, i) => 1 + Math.floor(i / D));

// run returns each query row's output (its first dimension), with the
// first `past` keys as past_key/past_value and the others as key/value.
async function run(past) {
  const L = N - past;
  const outputs = past ? ['output', 'present_key', 'present_value'] : ['output'];
  const model = oneNodeModel({
    opType: 'MultiHeadAttention', domain: 'com.microsoft',
    inputs: [
      { name: 'query', elem: ELEM.float, dims: [1, M, H * D] },
      { name: 'key', elem: ELEM.float, dims: [1, L, H * D] },
      { name: 'value', elem: ELEM.float, dims: [1, L, H * D] },
      null, null, null,
      past ? { name: 'past_key', elem: ELEM.float, dims: [1, H, past, D] } : null,
      past ? { name: 'past_value', elem: ELEM.float, dims: [1, H, past, D] } : null,
    ],
    outputs, attrs: { num_heads: H, unidirectional: 1 }, opsets: [['', 21], ['com.microsoft', 1]],
  });
  const s = await ort.InferenceSession.create(model, options);
  const t = (data, dims) => new ort.Tensor('float32', data, dims);
  const feeds = { query: t(q, [1, M, H * D]), key: t(k.slice(past * D), [1, L, H * D]), value: t(v.slice(past * D), [1, L, H * D]) };
  if (past) {
    feeds.past_key = t(k.slice(0, past * D), [1, H, past, D]);
    feeds.past_value = t(v.slice(0, past * D), [1, H, past, D]);
  }
  const out = (await s.run(feeds, outputs)).output.data;
  return Array.from({ length: M }, (_, i) => out[i * D]);
}

// mean of (j + 1) over the keys j that visible(i, j) lets row i read
const expect = (visible) => Array.from({ length: M }, (_, i) => {
  const keys = Array.from({ length: N }, (_, j) => j).filter((j) => visible(i, j));
  return keys.reduce((a, j) => a + j + 1, 0) / keys.length;
});

(async () => {
  const fmt = (x) => x.map((y) => y.toFixed(3)).join('  ');
  const topLeft = expect((i, j) => j <= i);
  const bottomRight = expect((i, j) => j <= i + N - M);
  const noPast = await run(0);
  const withPast = await run(N - M);
  console.log(`${label}, unidirectional = 1, ${M} queries, ${N} keys; row outputs (the mean of j + 1 over the keys read):`);
  console.log('top-left (tril(ones(M, N)))        ', fmt(topLeft));
  console.log('bottom-right (the last M positions)', fmt(bottomRight));
  console.log('no past: all keys as key/value     ', fmt(noPast));
  console.log('past_key/value (2) + key/value (3) ', fmt(withPast));
  const close = (a, b) => a.every((x, i) => Math.abs(x - b[i]) < 1e-5);
  const escapes = Math.abs(noPast[M - 1] - topLeft[M - 1]) > 1e-5 && close(noPast.slice(0, M - 1), topLeft.slice(0, M - 1));
  console.log(escapes ? `the last row reads all ${N} keys; the rows above it are top-left` : 'no past: one rule for every row');
  process.exit(escapes ? 1 : 0);
})();
