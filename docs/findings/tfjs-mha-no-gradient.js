// TF.js 4.22's MultiHeadAttention layer (tfjs-layers) has no backward:
// tf.grads through it, or through the tf.einsum it is built on, throws.
// Run from the repository:
//
//   (cd adapters/node && npm install --ignore-scripts)
//   node docs/findings/tfjs-mha-no-gradient.js
//
// The layer is imported the way adapters/node/tfjs_mha.js imports it (it is
// not in tfjs-layers' bundle). It exits 1 while the gradient is missing.
'use strict';
const { load } = require('../../adapters/node/tfjs_mha.js');

(async () => {
  const { tf, MultiHeadAttention, version } = await load();
  console.log(`tfjs-layers ${version}, tfjs-core ${tf.version_core}, backend ${tf.getBackend()}`);
  const x = tf.randomNormal([1, 4, 8], 0, 1, 'float32', 1);
  const layer = new MultiHeadAttention({ numHeads: 2, keyDim: 4 });
  const y = layer.call(x, { value: x, useCausalMask: true });
  console.log(`forward: output ${y.shape}, finite: ${tf.all(tf.isFinite(y)).dataSync()[0] === 1}`);
  let missing = 0;
  for (const [what, f] of [
    ['tf.grads through MultiHeadAttention.call', (q) => tf.sum(layer.call(q, { value: q, useCausalMask: true }))],
    ["tf.grads through tf.einsum('ij,jk->ik')", (a) => tf.sum(tf.einsum('ij,jk->ik', a, a))],
    ['tf.grads through tf.matMul (the same product)', (a) => tf.sum(tf.matMul(a, a))],
  ]) {
    const input = what.includes('MultiHead') ? x : tf.randomNormal([3, 3], 0, 1, 'float32', 2);
    try {
      const [g] = tf.grads(f)([input]);
      console.log(`${what}: gradient of shape ${g.shape}`);
    } catch (e) {
      missing++;
      console.log(`${what}: ${e.message}`);
    }
  }
  // what an optimizer calls: the gradients of the layer's own weights
  try {
    const { grads } = tf.variableGrads(() => tf.sum(layer.call(x, { value: x, useCausalMask: true })));
    console.log(`tf.variableGrads of the layer's weights: ${Object.keys(grads).length} gradients`);
  } catch (e) {
    missing++;
    console.log(`tf.variableGrads of the layer's weights (training): ${e.message}`);
  }
  process.exit(missing ? 1 : 0);
})();
