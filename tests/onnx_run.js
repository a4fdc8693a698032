// Runs an ONNX model exported by `dtrain export` with ONNX Runtime (the npm
// package onnxruntime-node: an inference engine independent of dtrain) on a
// test set read here, not by dtrain, and compares with `dtrain eval
// --logits-out`.
//
//   node onnx_run.js MODEL.onnx DATASET DIR LOGITS.f32 [TOL]
//
// DATASET: fashion-mnist | mnist (DIR/t10k-{images-idx3,labels-idx1}-ubyte[.gz])
// or cifar10 (DIR/test_batch.bin). Inputs are built as the model's
// "preprocessing" metadata says: pixel byte / 255, NCHW. Prints one JSON
// line {samples, correct, accuracy ("0.1234", as dtrain prints it), max_abs_diff,
// max_rel_diff} and exits 1
// when a logit differs from dtrain's by more than TOL (1e-4) relative to
// max(1, |logit|).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const ort = require('onnxruntime-node');

function readMaybeGz(file) {
  for (const f of [file, file + '.gz']) {
    if (!fs.existsSync(f)) continue;
    const b = fs.readFileSync(f);
    return b[0] === 0x1f && b[1] === 0x8b ? zlib.gunzipSync(b) : b;
  }
  throw new Error(`${file}[.gz]: not found`);
}

// {n, c, h, w, pixels (Uint8Array n*c*h*w), labels (Uint8Array n)}
function loadTestSet(kind, dir) {
  if (kind === 'cifar10') {
    const b = fs.readFileSync(path.join(dir, 'test_batch.bin'));
    const rec = 1 + 3072, n = b.length / rec;
    if (!Number.isInteger(n)) throw new Error('test_batch.bin: size not a multiple of 3073');
    const pixels = new Uint8Array(n * 3072), labels = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      labels[i] = b[i * rec];
      pixels.set(b.subarray(i * rec + 1, (i + 1) * rec), i * 3072);
    }
    return {n, c: 3, h: 32, w: 32, pixels, labels};
  }
  const img = readMaybeGz(path.join(dir, 't10k-images-idx3-ubyte'));
  const lab = readMaybeGz(path.join(dir, 't10k-labels-idx1-ubyte'));
  if (img.readUInt32BE(0) !== 0x803 || lab.readUInt32BE(0) !== 0x801) throw new Error('bad IDX magic');
  const n = img.readUInt32BE(4), h = img.readUInt32BE(8), w = img.readUInt32BE(12);
  return {n, c: 1, h, w, pixels: img.subarray(16, 16 + n * h * w), labels: lab.subarray(8, 8 + n)};
}

async function main() {
  const [model, kind, dir, logitsFile, tolArg] = process.argv.slice(2);
  const tol = tolArg ? Number(tolArg) : 1e-4;
  const ds = loadTestSet(kind, dir);
  const ref = new Float32Array(new Uint8Array(fs.readFileSync(logitsFile)).buffer);
  const session = await ort.InferenceSession.create(model);
  const per = ds.c * ds.h * ds.w, batch = 500;
  let correct = 0, maxAbs = 0, maxRel = 0, classes = 0;
  for (let start = 0; start < ds.n; start += batch) {
    const n = Math.min(batch, ds.n - start);
    const x = new Float32Array(n * per);
    for (let i = 0; i < n * per; i++) x[i] = ds.pixels[start * per + i] / 255;
    const out = await session.run({input: new ort.Tensor('float32', x, [n, ds.c, ds.h, ds.w])});
    const logits = out.logits.data, probs = out.probabilities.data;
    classes = out.logits.dims[1];
    for (let i = 0; i < n; i++) {
      let best = 0;
      for (let k = 0; k < classes; k++) {
        const j = i * classes + k, r = ref[(start + i) * classes + k];
        const d = Math.abs(logits[j] - r);
        maxAbs = Math.max(maxAbs, d);
        maxRel = Math.max(maxRel, d / Math.max(1, Math.abs(r)));
        if (probs[j] > probs[i * classes + best]) best = k;
      }
      if (best === ds.labels[start + i]) correct++;
    }
  }
  if (ref.length !== ds.n * classes)
    throw new Error(`${logitsFile}: ${ref.length} logits, expected ${ds.n} x ${classes}`);
  const res = {samples: ds.n, correct, accuracy: (correct / ds.n).toFixed(4),
               max_abs_diff: maxAbs, max_rel_diff: maxRel};
  console.log(JSON.stringify(res));
  process.exit(maxRel <= tol ? 0 : 1);
}

main().catch((e) => { console.error(`onnx_run.js: ${e.message}`); process.exit(2); });
