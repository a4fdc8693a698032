#!/usr/bin/env bash
# bench/roofline.py's counts (the roofline table of bench/bench_engine.py):
# a training step's FLOPs and bytes of the mlp by hand, the convolutions' and
# connected layers' FLOPs of cnn, cifar and resnet20_fm against PyTorch's
# modules of the same models by the usual formula, and the table's arithmetic.
# Times nothing.
source "$(dirname "$0")/clilib.sh" "$1"
export PYTHONPATH=$SRC/bench
export DTRAIN

check "mlp at batch 64: FLOPs and bytes by hand" /usr/bin/python3 -c "
import os, roofline as r
c = r.step_cost(r.model_info('$SRC/examples/mlp.cfg', 64, os.environ['DTRAIN']), 64)
B = 64
# forward per image: 784x512 and 512x10 products (2 FLOPs a weight), ReLU 512, softmax 3 x 10;
# training: the first layer reads the data (forward + weight gradient), the second 3x, others 2x.
flops = B * (2 * 2 * 784 * 512 + 2 * 512 + 3 * 2 * 512 * 10 + 2 * 3 * 10)
assert c['flops'] == flops == 104795904, c
# activations (4 bytes): X, Y of each layer; fwd X + Y, bwd dY + X (+ dX but for the first)
a = lambda x, y, first=False: 4 * B * (2 * x + 2 * y + (0 if first else x))
act = a(784, 512, True) + a(512, 512) + a(512, 10) + a(10, 10)
P0, P2 = 4 * (784 * 512 + 512), 4 * (512 * 10 + 10)
par = 2 * P0 + 3 * P2                       # the first layer needs no weights in backward
optim = 5 * 4 * (784 * 512 + 512 + 512 * 10 + 10)  # SGD momentum: read w, g, v; write w, v
assert (c['act_bytes'], c['param_bytes'], c['optim_bytes']) == (act, par, optim), (c, act, par, optim)
assert c['bytes'] == act + par + optim == 13147968, c
k = c['by_kind']
assert k['connected'] == {'flops': B * (2 * 2 * 784 * 512 + 3 * 2 * 512 * 10),
                          'bytes': a(784, 512, True) + a(512, 10) + par}, k
assert sum(v['bytes'] for v in k.values()) + optim == c['bytes'], k
"

check "conv and connected FLOPs match PyTorch's models (2 x weights x output pixels)" /usr/bin/python3 -c "
import os, sys
sys.path.insert(0, '$SRC/../shared/reference')
try:
    import torch, torch_ref_models as m
except ImportError:
    print('test_roofline: no torch or no ../shared/reference, the PyTorch count is skipped'); sys.exit(0)
import roofline as r
for name in ('cnn', 'cifar', 'resnet20_fm', 'resnet20'):
    net = m.model(name)
    shape = {'cnn': (1, 28, 28), 'resnet20_fm': (1, 28, 28)}.get(name, (3, 32, 32))
    total = [0]
    def hook(mod, inp, out):
        if isinstance(mod, torch.nn.Conv2d):
            total[0] += 2 * mod.weight.numel() * out.shape[2] * out.shape[3]
        elif isinstance(mod, torch.nn.Linear):
            total[0] += 2 * mod.weight.numel()
    for mod in net.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            mod.register_forward_hook(hook)
    net(torch.zeros(1, *shape))
    info = r.model_info('$SRC/examples/%s.cfg' % name, 1, os.environ['DTRAIN'])
    ours = sum(n['flops'] for n in info['nodes'] if n['type'] in r.PRODUCT_LAYERS)
    assert ours == total[0], (name, ours, total[0])
    # the training step: 3x each product but the first layer's 2x, 2x the rest
    c = r.step_cost(info, 8)
    first = [n for n in info['nodes'] if n['id'] == 'L0'][0]['flops']
    rest = sum(n['flops'] for n in info['nodes'] if n['type'] not in r.PRODUCT_LAYERS + ('input',))
    assert c['flops'] == 8 * (3 * ours - first + 2 * rest), (name, c)
"

check "roofline arithmetic: compute- and memory-bound steps" /usr/bin/python3 -c "
import roofline as r
ceil = {'peak': 100.0, 'bw': 20.0}                       # ridge 5 FLOP/B
x = r.roof_row({'flops': 1e9, 'bytes': 1e8}, 100.0, ceil)  # 10 GFLOP/s, 1 GB/s, 10 FLOP/B
assert x['bound'] == 'compute' and abs(x['gflops'] - 10) < 1e-9 and abs(x['of_peak'] - 0.1) < 1e-9
assert abs(x['gbs'] - 1) < 1e-9 and abs(x['of_bw'] - 0.05) < 1e-9 and abs(x['of_roof'] - 0.1) < 1e-9
y = r.roof_row({'flops': 1e9, 'bytes': 1e9}, 100.0, ceil)  # 1 FLOP/B: roof 20 GFLOP/s
assert y['bound'] == 'memory' and abs(y['ridge'] - 5) < 1e-9 and abs(y['of_roof'] - 0.5) < 1e-9
"

finish
