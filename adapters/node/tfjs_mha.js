#!/usr/bin/env node
// attnlab conform adapter for TensorFlow.js's MultiHeadAttention layer
// (@tensorflow/tfjs-layers 4.22, the port of Keras's), on the pure
// JavaScript CPU backend (@tensorflow/tfjs-backend-cpu):
//
//   attnlab conform -exec "node adapters/node/tfjs_mha.js"
//
// It speaks the protocol of docs/conform-protocol.md (conform_io.js).
//
// The layer is not exported by tfjs-layers' bundle (tf.layers has no
// multiHeadAttention); it ships as an ES module beside the bundle,
// dist/layers/nlp/multihead_attention.js, written for a bundler: its
// relative imports have no ".js" and the package is not "type": "module".
// The adapter imports it by that path through a module hook (register()
// below) that, for files of tfjs-layers' dist folder only, adds the ".js"
// and reads them as ES modules. '@tensorflow/tfjs-core' then resolves to
// the one CommonJS tfjs-core that the CPU backend registers itself with.
//
// attnlab's requests carry q, k, v already projected, one slice per head,
// so the layer is built to add nothing, as adapters/python/torch_mha.py does
// with PyTorch's module: MultiHeadAttention({numHeads: H, keyDim: D,
// valueDim: Dv, useBias: false, outputShape: [H*Dv]}) with its query, key
// and value projections (EinsumDense kernels [H*D, H, D], [H*Dv, H, Dv])
// and its output projection ([H, Dv, H*Dv]) set to the identity. [B, H, L, D]
// is transposed to [B, L, H*D] (head h owns columns h*D..h*D+D-1, as the
// projection's kernel splits them) and back. The adapter calls the layer's
// call(query, {value, key, attentionMask, useCausalMask}), as its doc
// comment shows: apply() packs [query, value, key] into one list that
// Layer.apply hands to call() as the query in eager mode, and call() then
// fails (4.22).
//
// What it takes, declared in the hello:
//
// - "causal": useCausalMask, the layer's own causal mask, the lower
//   triangle of ones([1, T, S]) (linalg.bandPart(…, -1, 0)).
// - "bool": the request's mask [B, M, N] (1 = may attend) as attentionMask,
//   the layer's convention (true = may attend). The layer's softmax adds
//   -1e9 to the score of a masked key (an additive mask, not a select).
// - kv_cache: the layer takes T != S (query and key lengths differ); the
//   causal mask does not know a past, which is what the card shows.
// - no gradients: the layer computes its projections and both products of
//   attention with tf.einsum, and TF.js 4.22 registers no gradient for
//   Einsum (tf.grads through the layer throws "Cannot compute gradient:
//   gradient function not found for Einsum"; docs/findings/tfjs-mha-no-gradient.md).
// - float32 only (TF.js has no float64), no lse, no explicit scale (the layer
//   multiplies q by 1/sqrt(keyDim) = 1/sqrt(D)), no GQA (one K/V head per
//   query head).

'use strict';

const io = require('./conform_io.js');
const path = require('node:path');
const { register } = require('node:module');
const { pathToFileURL } = require('node:url');

// HOOKS reads tfjs-layers' dist/**/*.js as ES modules and completes their
// relative imports with ".js" (or "/index.js"); every other module resolves
// and loads as Node does it.
const HOOKS = `
const inLayers = (url) => typeof url === 'string' && url.includes('/@tensorflow/tfjs-layers/dist/');
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (e) {
    if (!/^\\.\\.?\\//.test(specifier) || !inLayers(context.parentURL)) throw e;
    try {
      return await next(specifier + '.js', context);
    } catch {
      return next(specifier + '/index.js', context);
    }
  }
}
export async function load(url, context, next) {
  if (inLayers(url) && url.endsWith('.js')) return next(url, { ...context, format: 'module' });
  return next(url, context);
}
`;

// load imports tfjs-core, the CPU backend and the MultiHeadAttention
// module: {tf, MultiHeadAttention, version}.
async function load() {
  register('data:text/javascript,' + encodeURIComponent(HOOKS), pathToFileURL(__filename));
  // the union package: tfjs-core with every op's gradient registered (the
  // core bundle alone has none), tfjs-layers, and the backends
  const tf = require('@tensorflow/tfjs');
  if (!(await tf.setBackend('cpu'))) throw new Error('the tfjs cpu backend did not initialise');
  const pkg = require.resolve('@tensorflow/tfjs-layers/package.json');
  const file = path.join(path.dirname(pkg), 'dist', 'layers', 'nlp', 'multihead_attention.js');
  const { MultiHeadAttention } = await import(pathToFileURL(file).href);
  return { tf, MultiHeadAttention, version: require(pkg).version };
}

class TFJSMultiHeadAttention {
  // projections: run the whole layer, identity projections included
  // (call()); otherwise the layer's attention with the heads already split
  // (computeAttentionMask, computeAttention), which is what the identity
  // projections hand it
  constructor({ tf, MultiHeadAttention, version }, projections) {
    this.tf = tf;
    this.MultiHeadAttention = MultiHeadAttention;
    this.version = version;
    this.projections = projections;
    this.layers = new Map(); // by [H, D, Dv]: the weights do not depend on lengths
  }

  capabilities() {
    const how = this.projections ? 'call() with identity projections' : 'computeAttention on split heads';
    return {
      name: `TF.js MultiHeadAttention (tfjs-layers ${how}, useCausalMask, attentionMask), tfjs-backend-cpu`,
      version: `tfjs-layers ${this.version}, tfjs-core ${this.tf.version_core}, backend ${this.tf.getBackend()}`,
      dtypes: ['float32'],
      gradients: false,
      lse: false,
      gqa: false,
      masks: ['causal', 'bool'],
      kv_cache: true,
      scale: false,
    };
  }

  // layer returns the layer of H heads of sizes D and Dv with identity
  // projections, built once.
  layer(H, D, Dv) {
    const key = `${H},${D},${Dv}`;
    let layer = this.layers.get(key);
    if (layer) return layer;
    const tf = this.tf;
    layer = new this.MultiHeadAttention({ numHeads: H, keyDim: D, valueDim: Dv, useBias: false, outputShape: [H * Dv] });
    // only the ranks (and the feature sizes) of the shapes are read; it
    // sets the attention's einsum equations and creates the projections
    layer.buildFromSignature([1, 1, H * D], [1, 1, H * Dv], [1, 1, H * D]);
    // eye(C) reshaped: kernel[c, h, d] = 1 where c = h*W + d, and the
    // output's [h, d, c] likewise
    const identity = (C, shape) => tf.tidy(() => tf.reshape(tf.eye(C), shape));
    for (const [dense, C, shape] of [
      [layer.queryDense, H * D, [H * D, H, D]],
      [layer.keyDense, H * D, [H * D, H, D]],
      [layer.valueDense, H * Dv, [H * Dv, H, Dv]],
      [layer.outputDense, H * Dv, [H, Dv, H * Dv]],
    ]) {
      dense.build(dense === layer.outputDense ? [1, 1, H, Dv] : [1, 1, C]);
      const w = identity(C, shape);
      dense.setWeights([w]);
      w.dispose();
    }
    this.layers.set(key, layer);
    return layer;
  }

  async attention(tensors, meta) {
    const r = io.request(tensors, meta, ['float32']);
    const { B, Hq: H, Hkv, M, N, D, Dv } = r;
    if (r.scale !== undefined) throw new Error('scale: the layer always multiplies q by 1/sqrt(keyDim)');
    if (Hkv !== H) throw new Error(`MultiHeadAttention needs as many K/V heads as query heads (Hq = ${H}, Hkv = ${Hkv})`);
    const tf = this.tf;
    const layer = this.layer(H, D, Dv);
    const o = tf.tidy(() => {
      // [B, H, L, W] -> [B, L, H, W] (what a projection of H heads gives) ->
      // [B, L, H*W] (the layer's input)
      const split = (x, L, W) => tf.transpose(tf.tensor4d(x, [B, H, L, W]), [0, 2, 1, 3]);
      const q = split(r.q, M, D);
      const k = split(r.k, N, D);
      const v = split(r.v, N, Dv);
      const attentionMask = r.mask ? tf.tensor3d(r.mask, [B, M, N], 'bool') : undefined;
      const packed = (x) => tf.reshape(x, [B, x.shape[1], H * x.shape[3]]);
      let y; // [B, M, H, Dv]
      if (this.projections) {
        y = tf.reshape(layer.call(packed(q), { value: packed(v), key: packed(k), attentionMask, useCausalMask: r.causal }), [B, M, H, Dv]);
      } else {
        // what call() does between the projections: the mask from the
        // inputs' lengths and the flag, then the attention
        const mask = layer.computeAttentionMask(packed(q), packed(v), attentionMask, r.causal);
        y = layer.computeAttention(q, k, v, mask, false)[0];
      }
      return tf.transpose(y, [0, 2, 1, 3]); // [B, H, M, Dv]
    });
    const data = Float32Array.from(o.dataSync());
    o.dispose();
    return { o: { dtype: 'F32', shape: [B, H, M, Dv], data } };
  }
}

// build makes the adapter the arguments ask for.
async function build(argv) {
  const usage = 'usage: node tfjs_mha.js [--projections]';
  if (argv.length > 1 || (argv.length === 1 && argv[0] !== '--projections')) throw new Error(`${argv.join(' ')}: not the adapter's arguments\n${usage}`);
  return new TFJSMultiHeadAttention(await load(), argv[0] === '--projections');
}

if (require.main === module) {
  io.main('tfjs_mha', build);
}

module.exports = { load, TFJSMultiHeadAttention };
