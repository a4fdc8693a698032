#!/usr/bin/python3
"""Golden data for tests/test_golden.c: dtrain's numerics against PyTorch.

Run with Debian's PyTorch 1.13 from the repository root:
    /usr/bin/python3 scripts/gen_golden.py [case ...]
(cases: layers, cnn_sgd, cnn_sgd_bf16, cnn_adam, cnn_adamw, cnn_lars,
cnn_lamb, resnet20_fm_sgd, resnet18_sgd, resnet50_sgd, resnet20_fm_sgd_bf16,
resnet18_sgd_bf16; none named: all).
It rewrites tests/golden/*.bin (committed, ~50 KB in all); the output is
the same on every run (fixed seeds, one thread).

File format (one file per case, little-endian):
    8 bytes   magic b"DTGOLD01"
    uint32    number of arrays
    per array:
      uint32  name length L (1..31), then L bytes of ASCII name
      uint32  ndim (0..4), then ndim uint32 dims
      float32 values, prod(dims) of them, row-major
Integers (labels) are stored as exact float32 values.

Per-layer cases (<case>.bin): input x (B, C, H, W), parameters w/b (PyTorch
layout, equal to dtrain's), upstream gradient g (shape of out); torch runs
forward, then backward of sum(out * g), and the file holds
    x, [w, b], [state], g, out, dx, [dw, db], [state_out, out_eval]
state = batch norm running mean (C) then running var (C) before the forward,
state_out the same after the training forward, out_eval the eval-mode output
of x with state_out. The softmax + cross-entropy case holds labels (B) and
loss (mean over the batch) instead of g; its dx is d loss / d logits.

Whole-model case (cnn_sgd.bin): the reference `cnn` (examples/cnn.cfg) from
init_tensor() below, trained STEPS SGD steps on the first STEPS*BATCH
Fashion-MNIST training images in file order; holds hyper (lr, momentum,
weight decay, batch: the test checks them against examples/cnn.cfg), loss
(STEPS) and sum, sumsq (one per parameter tensor, float64 sums stored as
float32) of the final parameters.

bf16 cases (cnn_sgd_bf16.bin, resnet20_fm_sgd_bf16.bin,
resnet18_sgd_bf16.bin): cnn_sgd, resnet20_fm_sgd and resnet18_sgd (below)
under torch.autocast('cpu', bfloat16); each holds hyper, loss and loss64
(here: the same run's fp32 losses).

ResNet case (resnet20_fm_sgd.bin): `resnet20_fm` of
../shared/reference/torch_ref_models.py (examples/resnet20_fm.cfg), its conv
and linear tensors from init_tensor() (numbered in the flat order, batch-norm
scale and shift counted but left at 1 and 0), trained like cnn_sgd with
torch.optim.SGD (lr 0.001, the cfg's momentum and decay), batch norm in
training mode. Holds hyper, loss, and loss64: the same run in float64.
Nineteen batch-normalised layers at batch 16 amplify rounding: torch's own
float32 and float64 losses part by 1e-6 by step 2 and 1e-3 by step 9 (at
lr 0.01, 1e-2), so the test allows each step a multiple of that spread
(see test_golden.c).

ImageNet-sized cases (resnet18_sgd.bin, resnet50_sgd.bin): torchvision's
resnet18 and resnet50 (examples/resnet18.cfg, resnet50.cfg), initialised as
resnet20_fm_sgd, trained IMAGENET_STEPS SGD steps on one batch of
IMAGENET_BATCH 3x224x224 images made by the hash formula of
imagenet_batch() (no data set), the same batch every step (so the steps
learn it: resnet18's loss falls from 7.41 to 0.04 and a wrong gradient
shows), with the files' lr, momentum and decay (not on biases and
batch-norm scale and shift: their exclude_bias_bn=1). Each holds hyper
(lr, momentum, decay, batch, exclude_bias_bn), loss, and loss64, the
float64 run. resnet18, 3 steps: torch's float32 and float64 losses part by
3e-7 at step 0 and 3e-4 at step 1 (twenty batch norms over 2 images),
which sets the test's tolerance as for resnet20_fm_sgd. resnet50, 2 steps:
step 0 (6.7735224, float64 6.7735257) checks the file's forward pass (the
stride on the bottleneck's 3x3, the projections) to 5e-7; its float32
gradients of step 0 already differ from float64 by 2% (median over the
tensors; the fc's by 2e-5, growing from the last block down; the same at
batch 4), so step 1 (0.674, float64 0.654) checks the backward only to
about 10%, and later steps would check nothing.

Optimiser cases (cnn_adam.bin, cnn_adamw.bin, cnn_lars.bin, cnn_lamb.bin):
the same run with torch.optim.Adam and AdamW, and with LARS and LAMB
written out from the papers' formulas below (biases excluded from decay and
trust ratios); hyper = (dtrain's optimizer index, lr, decay, batch,
momentum, beta1, beta2, eps, trust coefficient, exclude_bias_bn).
"""
import contextlib
import gzip
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, 'tests', 'golden')
MAGIC = b'DTGOLD01'
FMNIST = '/usr/share/datasets/fashion-mnist/'
STEPS, BATCH = 10, 16
LR, MOMENTUM, DECAY = 0.01, 0.9, 5e-4  # examples/cnn.cfg


def write_golden(name, arrays):
    """arrays: list of (name, array-like); everything stored as float32."""
    path = os.path.join(OUT_DIR, name + '.bin')
    with open(path, 'wb') as f:
        f.write(MAGIC)
        f.write(struct.pack('<I', len(arrays)))
        for key, value in arrays:
            a = np.ascontiguousarray(np.asarray(value, dtype='<f4'))
            assert 0 < len(key) < 32 and a.ndim <= 4
            f.write(struct.pack('<I', len(key)) + key.encode('ascii'))
            f.write(struct.pack('<I', a.ndim) + struct.pack('<%dI' % a.ndim, *a.shape))
            f.write(a.tobytes())
    print('%-16s %6d bytes' % (name, os.path.getsize(path)))


def t2n(t):
    return t.detach().cpu().numpy()


def layer_case(name, seed, fn, x_shape, params=(), x_scale=1.0):
    """Forward fn(x) and backward of sum(out * g); params are leaf tensors
    (w, b) fn closes over. Writes x, w, b, g, out, dx, dw, db."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(x_shape, generator=gen) * x_scale).requires_grad_()
    out = fn(x)
    g = torch.randn(out.shape, generator=gen)
    (out * g).sum().backward()
    arrays = [('x', x)] + list(zip(('w', 'b'), params)) + [('g', g), ('out', out), ('dx', x.grad)]
    arrays += list(zip(('dw', 'db'), (p.grad for p in params)))
    write_golden(name, [(k, t2n(v)) for k, v in arrays])


def uniform_params(gen, *shapes):
    """PyTorch's default conv/linear init U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    fan_in = weight size / output channels; weight shape first."""
    bound = 1.0 / np.sqrt(np.prod(shapes[0][1:]))
    return [((torch.rand(s, generator=gen) * 2 - 1) * bound).requires_grad_() for s in shapes]


def conv_case(name, seed, B, C, H, W, Fo, K, S, P):
    gen = torch.Generator().manual_seed(seed + 1000)
    w, b = uniform_params(gen, (Fo, C, K, K), (Fo,))
    layer_case(name, seed, lambda x: F.conv2d(x, w, b, stride=S, padding=P), (B, C, H, W), (w, b))


def bn_case(name, seed, B, C, H, W):
    """Train-mode forward + backward, then eval-mode forward with the updated
    running statistics. gamma, beta and the initial running statistics are
    random so that none of them can be ignored."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn((B, C, H, W), generator=gen) * 2 + 0.5).requires_grad_()
    bn = nn.BatchNorm1d(C) if H == W == 1 else nn.BatchNorm2d(C)
    bn.momentum, bn.eps = 0.1, 1e-5
    with torch.no_grad():
        bn.weight.copy_(torch.rand(C, generator=gen) + 0.5)
        bn.bias.copy_(torch.randn(C, generator=gen) * 0.3)
        bn.running_mean.copy_(torch.randn(C, generator=gen) * 0.2)
        bn.running_var.copy_(torch.rand(C, generator=gen) + 0.5)
    state = torch.cat([bn.running_mean, bn.running_var]).clone()
    view = (lambda t: t.view(B, C)) if H == W == 1 else (lambda t: t)
    bn.train()
    out = bn(view(x)).view(B, C, H, W)
    g = torch.randn(out.shape, generator=gen)
    (out * g).sum().backward()
    state_out = torch.cat([bn.running_mean, bn.running_var])
    bn.eval()
    with torch.no_grad():
        out_eval = bn(view(x)).view(B, C, H, W)
    write_golden(name, [(k, t2n(v)) for k, v in [
        ('x', x), ('w', bn.weight), ('b', bn.bias), ('state', state), ('g', g), ('out', out),
        ('dx', x.grad), ('dw', bn.weight.grad), ('db', bn.bias.grad), ('state_out', state_out),
        ('out_eval', out_eval)]])


def softmax_xent_case(name, seed, B, classes):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn((B, classes, 1, 1), generator=gen) * 3).requires_grad_()
    labels = torch.randint(0, classes, (B,), generator=gen)
    logits = x.view(B, classes)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    probs = torch.softmax(logits, dim=1).view(B, classes, 1, 1)
    write_golden(name, [('x', t2n(x)), ('labels', t2n(labels)), ('out', t2n(probs)),
                        ('loss', t2n(loss).reshape(1)), ('dx', t2n(x.grad))])


def layer_goldens():
    """Case names and layer hyperparameters must match the table in
    tests/test_golden.c, which takes the shapes from the files."""
    conv_case('conv_k3s2p1', 1, B=2, C=3, H=7, W=9, Fo=5, K=3, S=2, P=1)
    conv_case('conv_k5s1p2', 2, B=3, C=2, H=6, W=6, Fo=4, K=5, S=1, P=2)
    conv_case('conv_k1', 3, B=2, C=4, H=5, W=3, Fo=3, K=1, S=1, P=0)
    layer_case('maxpool_k3s2p1', 4, lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 7, 9))
    layer_case('maxpool_k2s2', 5, lambda x: F.max_pool2d(x, 2, 2), (3, 2, 7, 6))
    layer_case('avgpool_k3s2p1', 6,
               lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True), (2, 3, 7, 9))
    gen = torch.Generator().manual_seed(1007)
    w, b = uniform_params(gen, (7, 13), (7,))
    layer_case('dense', 7, lambda x: F.linear(x.flatten(1), w, b)[:, :, None, None],
               (3, 13, 1, 1), (w, b))
    layer_case('relu', 8, F.relu, (2, 3, 4, 5))
    layer_case('leaky', 9, lambda x: F.leaky_relu(x, 0.1), (2, 3, 4, 5))
    layer_case('tanh', 10, torch.tanh, (2, 3, 4, 5), x_scale=2.0)
    layer_case('sigmoid', 11, torch.sigmoid, (2, 3, 4, 5), x_scale=3.0)
    # alpha 0.01 with |x| ~ 3: alpha/n * sum x^2 ~ 0.1, so the normalisation
    # changes the output by several percent and a wrong window or exponent shows.
    layer_case('lrn', 12, lambda x: F.local_response_norm(x, 5, alpha=0.01, beta=0.75, k=1.0),
               (2, 7, 4, 4), x_scale=3.0)
    bn_case('batchnorm2d', 13, B=2, C=6, H=5, W=5)
    bn_case('batchnorm1d', 14, B=3, C=6, H=1, W=1)
    softmax_xent_case('softmax_xent', 15, B=3, classes=10)


def hash64(x):
    """dt_hash64 (splitmix64 finaliser) on a uint64 array; numpy uint64
    arithmetic wraps like C's."""
    with np.errstate(over='ignore'):
        x = x + np.uint64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return x ^ (x >> np.uint64(31))


def init_tensor(t, n, fan_in):
    """Tensor t of the flat order (conv1.w, conv1.b, conv2.w, ...), element i:
    u = (dt_hash64(t * 1000003 + i) >> 40) / 2^24, value = (2u - 1) / sqrt(fan_in)
    in float32, as init_tensor() in tests/test_golden.c: u and 2u - 1 are exact,
    1/sqrt and the product are single correctly rounded float32 operations."""
    idx = np.uint64(t * 1000003) + np.arange(n, dtype=np.uint64)
    u = (hash64(idx) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    bound = np.float32(1.0) / np.sqrt(np.float32(fan_in))
    return (np.float32(2.0) * u - np.float32(1.0)) * bound


def load_fmnist(n):
    with gzip.open(FMNIST + 'train-images-idx3-ubyte.gz') as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)[:n * 784].reshape(n, 1, 28, 28)
    with gzip.open(FMNIST + 'train-labels-idx1-ubyte.gz') as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return torch.tensor(x, dtype=torch.float32) / 255.0, torch.tensor(y, dtype=torch.long)


def cnn_model():
    """torch_ref_models.model('cnn') of the shared PyTorch reference benchmarks."""
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))


def init_cnn():
    model = cnn_model()
    params = list(model.parameters())  # conv1.w, conv1.b, conv2.w, ... = dtrain's flat order
    with torch.no_grad():
        for t, p in enumerate(params):
            if p.dim() > 1:
                fan_in = p[0].numel()  # weight (out, ...); its bias follows with the same fan_in
            p.copy_(torch.from_numpy(init_tensor(t, p.numel(), fan_in)).view(p.shape))
    return model, params


class Lars(torch.optim.Optimizer):
    """You et al. 2017, Algorithm 1, written out: per weight tensor
    q = trust ||w|| / (||g|| + decay ||w||) (1 if a norm is 0);
    v = momentum v + lr q (g + decay w); w -= v. Biases (dim 1): q = 1, no decay."""

    def __init__(self, params, lr, momentum, decay, trust):
        super().__init__(params, dict(lr=lr, momentum=momentum, decay=decay, trust=trust))

    @torch.no_grad()
    def step(self):
        for grp in self.param_groups:
            for w in grp['params']:
                g, plain = w.grad, w.dim() == 1
                wd = 0.0 if plain else grp['decay']
                q = 1.0
                if not plain:
                    wn, gn = w.double().norm().item(), g.double().norm().item()
                    if wn > 0 and gn + wd * wn > 0:
                        q = grp['trust'] * wn / (gn + wd * wn)
                v = self.state[w].setdefault('v', torch.zeros_like(w))
                v.mul_(grp['momentum']).add_((g + wd * w) * (grp['lr'] * q))
                w.sub_(v)


class Lamb(torch.optim.Optimizer):
    """You et al. 2019, Algorithm 2, written out: Adam's moments with bias
    correction, r = m^ / (sqrt(v^) + eps), u = r + decay w, per weight tensor
    q = ||w|| / ||u|| (1 if a norm is 0); w -= lr q u. Biases: q = 1, no decay."""

    def __init__(self, params, lr, betas, eps, decay):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, decay=decay))

    @torch.no_grad()
    def step(self):
        for grp in self.param_groups:
            b1, b2 = grp['betas']
            for w in grp['params']:
                g, plain = w.grad, w.dim() == 1
                st = self.state[w]
                if not st:
                    st['t'], st['m'], st['v'] = 0, torch.zeros_like(w), torch.zeros_like(w)
                st['t'] += 1
                st['m'].mul_(b1).add_(g * (1 - b1))
                st['v'].mul_(b2).add_(g * g * (1 - b2))
                r = (st['m'] / (1 - b1 ** st['t'])) / ((st['v'] / (1 - b2 ** st['t'])).sqrt() + grp['eps'])
                u = r + (0.0 if plain else grp['decay']) * w
                q = 1.0
                if not plain:
                    wn, un = w.double().norm().item(), u.double().norm().item()
                    if wn > 0 and un > 0:
                        q = wn / un
                w.sub_(u * (grp['lr'] * q))


# name: (dtrain optimizer index, lr, decay, momentum, beta1, beta2, eps, trust, exclude_bias_bn, make)
OPTIMIZERS = {
    'adam': (1, 1e-3, 5e-4, 0, 0.9, 0.999, 1e-8, 0, 0,
             lambda p, h: torch.optim.Adam(p, lr=h[1], betas=(h[4], h[5]), eps=h[6], weight_decay=h[2])),
    'adamw': (2, 1e-3, 1e-2, 0, 0.9, 0.999, 1e-8, 0, 0,
              lambda p, h: torch.optim.AdamW(p, lr=h[1], betas=(h[4], h[5]), eps=h[6], weight_decay=h[2])),
    # LARS at lr 2.0 was chaotic: a 1e-7 relative change of the initial
    # weights (one float32 rounding) moved step 8's loss by 1.5e-5, so the
    # goldens of two CPUs' summation orders disagreed; at 1.0 no step moves
    # by more than 2e-9 under such changes (8 tries).
    'lars': (3, 1.0, 5e-4, 0.9, 0, 0, 0, 1e-3, 1, lambda p, h: Lars(p, h[1], h[3], h[2], h[7])),
    'lamb': (4, 1e-2, 1e-2, 0, 0.9, 0.999, 1e-6, 0, 1,
             lambda p, h: Lamb(p, h[1], (h[4], h[5]), h[6], h[2])),
}


def train_cnn(opt, params, model, amp=contextlib.nullcontext):
    x, y = load_fmnist(STEPS * BATCH)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        with amp():
            loss = F.cross_entropy(model(x[s * BATCH:(s + 1) * BATCH]), y[s * BATCH:(s + 1) * BATCH])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print('step %d loss %.7f' % (s, losses[-1]))
    final = [t2n(p).astype(np.float64) for p in params]
    return [('loss', losses), ('sum', [f.sum() for f in final]), ('sumsq', [(f * f).sum() for f in final])]


def cnn_golden():
    model, params = init_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=DECAY)
    write_golden('cnn_sgd', [('hyper', [LR, MOMENTUM, DECAY, BATCH])] + train_cnn(opt, params, model))


def cnn_bf16_golden():
    """cnn_sgd_bf16.bin: cnn_sgd's run under torch.autocast('cpu', bfloat16)
    (convolutions and linear layers in bf16, fp32 weights and SGD): hyper,
    loss, and loss64 = the fp32 run's losses (cnn_sgd's), whose spread from
    the bf16 losses sets the test's tolerance."""
    amp = lambda: torch.autocast('cpu', dtype=torch.bfloat16)
    runs = []
    for ctx in (amp, contextlib.nullcontext):
        model, params = init_cnn()
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=DECAY)
        runs.append(dict(train_cnn(opt, params, model, ctx))['loss'])
    write_golden('cnn_sgd_bf16', [('hyper', [LR, MOMENTUM, DECAY, BATCH]), ('loss', runs[0]),
                                  ('loss64', runs[1])])


RESNET_LR = 0.001


def hashed_ref_model(name, dtype):
    """torch_ref_models.model(name) in dtype, training mode, its conv and
    linear tensors from init_tensor() (numbered in the flat order, batch-norm
    scale and shift counted but left at 1 and 0); the model and its
    parameters in that order (conv.w, bn.w, bn.b, ..., fc.w, fc.b: dtrain's)."""
    sys.path.insert(0, os.path.join(ROOT, '..', 'shared', 'reference'))
    import torch_ref_models
    model = torch_ref_models.model(name).to(dtype)
    model.train()
    params = list(model.parameters())
    hashed = {id(p) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))
              for p in m.parameters()}
    with torch.no_grad():
        for t, p in enumerate(params):
            if p.dim() > 1:
                fan_in = p[0].numel()
            if id(p) in hashed:
                p.copy_(torch.from_numpy(init_tensor(t, p.numel(), fan_in)).view(p.shape).to(dtype))
    return model, params


def resnet_losses(dtype, amp=contextlib.nullcontext):
    model, params = hashed_ref_model('resnet20_fm', dtype)
    opt = torch.optim.SGD(params, lr=RESNET_LR, momentum=MOMENTUM, weight_decay=DECAY)
    x, y = load_fmnist(STEPS * BATCH)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        with amp():
            logits = model(x[s * BATCH:(s + 1) * BATCH].to(dtype))
        loss = F.cross_entropy(logits.to(dtype), y[s * BATCH:(s + 1) * BATCH])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def resnet_golden():
    l32, l64 = resnet_losses(torch.float32), resnet_losses(torch.float64)
    for s, (a, b) in enumerate(zip(l32, l64)):
        print('step %d loss %.7f (float64 %.7f)' % (s, a, b))
    write_golden('resnet20_fm_sgd', [('hyper', [RESNET_LR, MOMENTUM, DECAY, BATCH]), ('loss', l32),
                                     ('loss64', l64)])


def bf16_amp():
    return torch.autocast('cpu', dtype=torch.bfloat16)


def resnet_bf16_golden():
    """resnet20_fm_sgd_bf16.bin: resnet20_fm_sgd's run under torch.autocast
    (bf16 convolutions and connected layer, fp32 batch norm, weights and
    SGD); loss64 holds the fp32 run's losses, whose spread from the bf16
    ones sets the test's tolerance, as for cnn_sgd_bf16."""
    lbf, l32 = resnet_losses(torch.float32, bf16_amp), resnet_losses(torch.float32)
    for s, (a, b) in enumerate(zip(lbf, l32)):
        print('step %d loss %.7f (fp32 %.7f)' % (s, a, b))
    write_golden('resnet20_fm_sgd_bf16', [('hyper', [RESNET_LR, MOMENTUM, DECAY, BATCH]), ('loss', lbf),
                                          ('loss64', l32)])


# examples/resnet18.cfg's SGD settings (the test checks them against the file).
IMAGENET_LR, IMAGENET_MOMENTUM, IMAGENET_DECAY, IMAGENET_EXCLUDE = 0.0125, 0.9, 1e-4, 1
IMAGENET_BATCH, IMAGENET_CLASSES = 2, 1000
IMAGENET_STEPS = {'resnet18': 3, 'resnet50': 2}


def imagenet_batch():
    """IMAGENET_BATCH images 3x224x224 and labels by formula, as
    imagenet_batch() in tests/test_golden.c: value i of the (B, 3, 224, 224)
    batch in row-major order is (dt_hash64(2^40 + i) >> 40) / 2^24, exact in
    float32 and in [0, 1) like an image's bytes / 255; label b is
    (dt_hash64(2^41 + b) >> 40) mod 1000."""
    n = IMAGENET_BATCH * 3 * 224 * 224
    idx = np.uint64(1 << 40) + np.arange(n, dtype=np.uint64)
    x = (hash64(idx) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    lab = hash64(np.uint64(1 << 41) + np.arange(IMAGENET_BATCH, dtype=np.uint64)) >> np.uint64(40)
    return (torch.from_numpy(x.reshape(IMAGENET_BATCH, 3, 224, 224)),
            torch.from_numpy((lab % np.uint64(IMAGENET_CLASSES)).astype(np.int64)))


def imagenet_losses(name, dtype, amp=contextlib.nullcontext):
    """IMAGENET_STEPS[name] steps of torch.optim.SGD on imagenet_batch(), decay
    on the conv and linear weights only (exclude_bias_bn=1), the forward
    under amp."""
    model, params = hashed_ref_model(name, dtype)
    plain = [p for p in params if p.dim() == 1]  # biases, batch-norm scale and shift
    decayed = [p for p in params if p.dim() > 1]
    assert IMAGENET_EXCLUDE == 1
    opt = torch.optim.SGD([{'params': decayed, 'weight_decay': IMAGENET_DECAY},
                           {'params': plain, 'weight_decay': 0.0}],
                          lr=IMAGENET_LR, momentum=IMAGENET_MOMENTUM)
    x, y = imagenet_batch()
    losses = []
    for _ in range(IMAGENET_STEPS[name]):
        opt.zero_grad()
        with amp():
            logits = model(x.to(dtype))
        loss = F.cross_entropy(logits.to(dtype), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def imagenet_golden(name):
    l32, l64 = imagenet_losses(name, torch.float32), imagenet_losses(name, torch.float64)
    for s, (a, b) in enumerate(zip(l32, l64)):
        print('step %d loss %.7f (float64 %.7f)' % (s, a, b))
    hyper = [IMAGENET_LR, IMAGENET_MOMENTUM, IMAGENET_DECAY, IMAGENET_BATCH, IMAGENET_EXCLUDE]
    write_golden(name + '_sgd', [('hyper', hyper), ('loss', l32), ('loss64', l64)])


def imagenet_bf16_golden(name):
    """<name>_sgd_bf16.bin: <name>_sgd's steps under torch.autocast, loss64
    the fp32 run's losses (as resnet20_fm_sgd_bf16)."""
    lbf, l32 = imagenet_losses(name, torch.float32, bf16_amp), imagenet_losses(name, torch.float32)
    for s, (a, b) in enumerate(zip(lbf, l32)):
        print('step %d loss %.7f (fp32 %.7f)' % (s, a, b))
    hyper = [IMAGENET_LR, IMAGENET_MOMENTUM, IMAGENET_DECAY, IMAGENET_BATCH, IMAGENET_EXCLUDE]
    write_golden(name + '_sgd_bf16', [('hyper', hyper), ('loss', lbf), ('loss64', l32)])


def cnn_optimizer_goldens(names):
    """cnn_<name>.bin for each name of OPTIMIZERS: hyper = (optimizer index, lr, decay, batch, momentum,
    beta1, beta2, eps, trust, exclude_bias_bn), then as cnn_sgd."""
    for name in names:
        h = OPTIMIZERS[name]
        print(name)
        model, params = init_cnn()
        opt = h[-1](model.parameters(), h)
        hyper = [h[0], h[1], h[2], BATCH, h[3], h[4], h[5], h[6], h[7], h[8]]
        write_golden('cnn_' + name, [('hyper', hyper)] + train_cnn(opt, params, model))


CASES = {'layers': layer_goldens, 'cnn_sgd': cnn_golden, 'cnn_sgd_bf16': cnn_bf16_golden,
         'resnet20_fm_sgd': resnet_golden, 'resnet18_sgd': lambda: imagenet_golden('resnet18'),
         'resnet50_sgd': lambda: imagenet_golden('resnet50'), 'resnet20_fm_sgd_bf16': resnet_bf16_golden,
         'resnet18_sgd_bf16': lambda: imagenet_bf16_golden('resnet18')}
CASES.update({'cnn_' + name: (lambda n=name: cnn_optimizer_goldens((n,))) for name in OPTIMIZERS})


def main(argv):
    """No arguments: every case; else the named ones (CASES' keys)."""
    unknown = [a for a in argv if a not in CASES]
    if unknown:
        sys.exit('gen_golden.py: unknown case %s (cases: %s)' % (unknown[0], ' '.join(CASES)))
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    for name in argv or CASES:
        CASES[name]()


if __name__ == '__main__':
    main(sys.argv[1:])
