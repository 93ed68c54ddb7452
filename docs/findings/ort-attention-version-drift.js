// The ONNX Attention op (opset 24) on onnxruntime-node 1.24.3, 1.27.0 and
// 1.30.0, CPU, float32, on two requests whose answers changed between
// them. Run from the repository:
//
//   (cd adapters/node && npm install --ignore-scripts)
//   node docs/findings/ort-attention-version-drift.js
//
// One process loads one onnxruntime-node (the versions' native libraries
// share the soname libonnxruntime.so.1; a second one fails to load), so
// each version runs in a child process of this script:
// node docs/findings/ort-attention-version-drift.js --ort 1.24 prints one
// version's line.
//
// Key j's value row is j + 1 in every dimension. q = 0, so every key a row
// reads gets the same weight and its output is the mean of (j + 1) over the
// keys it reads, except the masked row, whose query is not 0: uniform
// weights there (2.000) are the mask's doing, not its scores'.
//
//   empty row: 3 queries, 3 keys, a boolean attn_mask whose row 1 is all
//              False (a query that may read no key), is_causal = 0;
//   decode:    1 query, 3 keys as K and V (a cache kept outside the op, no
//              past_key/past_value), is_causal = 1;
//   chunk:     3 queries, 5 keys as K and V with nonpad_kv_seqlen = 5 (the
//              spec's input for a cache kept outside the op), is_causal = 1.
//
// It exits 1 while the versions disagree.
'use strict';
const { execFileSync } = require('child_process');
const { runtime, ELEM, oneNodeModel } = require('../../adapters/node/ort_attention.js');

const VERSIONS = ['1.24', '1.27', '1.30'];
const H = 1, D = 4;

async function one(which) {
  const { ort, label, options } = runtime(which);
  const t = (data, dims) => new ort.Tensor('float32', data, dims);
  // run returns each query row's first output value: M queries against N
  // keys given as K and V, with a boolean mask or nonpad_kv_seqlen
  async function run(M, N, attrs, { mask, nonpad } = {}) {
    const model = oneNodeModel({
      opType: 'Attention',
      inputs: [
        { name: 'Q', elem: ELEM.float, dims: [1, H, M, D] },
        { name: 'K', elem: ELEM.float, dims: [1, H, N, D] },
        { name: 'V', elem: ELEM.float, dims: [1, H, N, D] },
        mask ? { name: 'attn_mask', elem: ELEM.bool, dims: [1, 1, M, N] } : null,
        null, null,
        nonpad ? { name: 'nonpad_kv_seqlen', elem: ELEM.int64, dims: [1] } : null,
      ],
      outputs: ['Y'], attrs, opsets: [['', 24]],
    });
    const s = await ort.InferenceSession.create(model, options);
    // q = 0, but for the masked row of the first request (row 1 of 3): its
    // own scores differ, so reading every key unmasked would not give the
    // mean of the values
    const q = Float32Array.from({ length: M * D }, (_, i) => (mask && Math.floor(i / D) === 1 ? 1 + (i % D) : 0));
    const k = Float32Array.from({ length: N * D }, (_, i) => Math.sin(i + 1));
    const v = Float32Array.from({ length: N * D }, (_, i) => 1 + Math.floor(i / D));
    const feeds = { Q: t(q, [1, H, M, D]), K: t(k, [1, H, N, D]), V: t(v, [1, H, N, D]) };
    if (mask) feeds.attn_mask = new ort.Tensor('bool', Uint8Array.from(mask), [1, 1, M, N]);
    if (nonpad) feeds.nonpad_kv_seqlen = new ort.Tensor('int64', BigInt64Array.of(BigInt(nonpad)), [1]);
    const y = (await s.run(feeds, ['Y'])).Y.data;
    return Array.from({ length: M }, (_, i) => y[i * D]);
  }
  return {
    label,
    emptyRow: (await run(3, 3, { is_causal: 0 }, { mask: [1, 1, 1, 0, 0, 0, 1, 1, 1] }))[1],
    decode: (await run(1, 3, { is_causal: 1 }))[0],
    chunk: await run(3, 5, { is_causal: 1 }, { nonpad: 5 }),
  };
}

if (process.argv[2] === '--ort') {
  one(process.argv[3]).then((r) => process.stdout.write(JSON.stringify(r) + '\n'));
} else {
  const rows = VERSIONS.map((ver) => JSON.parse(execFileSync(process.execPath, [__filename, '--ort', ver], { encoding: 'utf8' })));
  const fmt = (x) => x.toFixed(3);
  const near = (x, y) => Math.abs(x - y) < 1e-6;
  const empty = (x) => (x === 0 ? 'zero' : near(x, 2) ? 'uniform' : 'other');
  const decode = (x) => (near(x, 2) ? 'keys 0-2' : near(x, 1) ? 'key 0 only' : 'other');
  const chunk = (x) => (x.every((y, i) => near(y, [1, 1.5, 2][i])) ? 'top-left' : x.every((y, i) => near(y, [2, 2.5, 3][i])) ? 'bottom-right' : 'other');
  console.log('version                      empty row (row 1 of 3)  decode (1 query, 3 keys)  chunk (3 queries, nonpad_kv_seqlen 5)');
  for (const r of rows) {
    console.log(`${r.label.padEnd(28)} ${(fmt(r.emptyRow) + ' ' + empty(r.emptyRow)).padEnd(23)} ${(fmt(r.decode) + ' ' + decode(r.decode)).padEnd(25)} ${r.chunk.map(fmt).join(' ')} ${chunk(r.chunk)}`);
  }
  const same = rows.every((r) => JSON.stringify([r.emptyRow, r.decode, r.chunk]) === JSON.stringify([rows[0].emptyRow, rows[0].decode, rows[0].chunk]));
  process.exit(same ? 0 : 1);
}
