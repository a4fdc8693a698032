#!/usr/bin/python3
"""Writes the seed corpora of the fuzz harnesses into fuzz/corpus/<harness>/.

    /usr/bin/python3 fuzz/make_corpus.py build/dtrain

Seeds are small valid inputs (the example model files, tiny IDX and CIFAR-10
files, a checkpoint written by `dtrain train`, tiny PNGs of every colour type
and bit depth and JPEGs encoded by PIL) plus truncated and corrupted variants
of each, so the fuzzers start past the first checks. The output is
deterministic (fixed data, gzip without timestamps, fixed training seed) and
committed; rerun this only to change the seeds. The IDX harness takes its two
files in one input: a 2-byte little-endian length of the images file, the
images file, then the labels file (see fuzz_idx.c).
"""
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def put(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def flip(data, at):
    b = bytearray(data)
    b[at % len(b)] ^= 0x55
    return bytes(b)


# ---- model files -----------------------------------------------------------

NET = "[net]\nchannels=%d\nheight=%d\nwidth=%d\nbatch=2\n"

# Small nets that reach every layer kind, key and schedule, so they are built
# and run by the harness (it runs nets under 16 MiB).
MODELS = {
    "every_layer.cfg": NET % (3, 9, 9) + "policy=cosine\nwarmup_epochs=0.5\nflip=1\ncrop_pad=2\n"
    "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nbatch_normalize=1\nactivation=leaky\n"
    "slope=0.2\n[lrn]\nsize=3\nalpha=0.001\nbeta=0.75\nkappa=2\n[maxpool]\nsize=3\nstride=2\npad=1\n"
    "[avgpool]\nsize=2\nstride=1\n[dropout]\nprobability=0.3\n[connected]\noutput=7\n"
    "activation=tanh\n[batchnorm]\nmomentum=0.2\neps=1e-4\n[activation]\nactivation=sigmoid\n"
    "[connected]\noutput=3\n[softmax]\n",
    "schedules.cfg": NET % (1, 5, 5) + "epochs=9\npolicy=multistep\nmilestones=2,4.5,7\n"
    "gamma=0.5\nnesterov=1\nmomentum=0.5\ndecay=0\nmin_lr=0.001\ndataset=synthetic\n"
    "[connected]\noutput=4\nactivation=relu\n[connected]\noutput=2\n[softmax]\n",
    "step.cfg": NET % (2, 6, 6) + "policy=step\nstep_epochs=3\ngamma=0.5\n; comment\n"
    "[convolutional]\nfilters=2\nsize=1\n[convolutional]\nfilters=3\nsize=6\n[softmax]\n",
    # Darknet's names and defaults: its step policy, aliases, logistic activations.
    "darknet.cfg": "[network]\nchannels=1\nheight=6\nwidth=6\npolicy=step\nstep=2\nscale=0.5\n"
    "[conv]\nfilters=2\nsize=3\npad=1\n[max]\nsize=2\nstride=2\n[normalization]\n[avg]\n[conn]\noutput=2\n"
    "[soft]\n",
    "crlf.cfg": (NET % (1, 4, 4) + "[connected]\noutput=2  # two\n[softmax]\n").replace("\n", "\r\n"),
}


def model_seeds():
    files = {name: open(os.path.join(ROOT, "examples", name), "rb").read()
             for name in sorted(os.listdir(os.path.join(ROOT, "examples"))) if name.endswith(".cfg")}
    files["small_net.cfg"] = open(os.path.join(ROOT, "tests", "data", "small_net.cfg"), "rb").read()
    files.update({name: text.encode() for name, text in MODELS.items()})
    for name, data in files.items():
        put("model", name, data)
    base = files["every_layer.cfg"]
    put("model", "cut_half.cfg", base[: len(base) // 2])
    put("model", "cut_header.cfg", base[: base.index(b"[lrn]") + 3])
    put("model", "bad_value.cfg", base.replace(b"filters=4", b"filters=4x"))
    put("model", "huge_dims.cfg", base.replace(b"height=9", b"height=16777216"))
    put("model", "shape_error.cfg", base.replace(b"size=3\nstride=2", b"size=30\nstride=2"))
    put("model", "nul.cfg", base.replace(b"[lrn]", b"[l\0rn]"))


# ---- IDX ---------------------------------------------------------------------

def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_pair(images, labels):
    return struct.pack("<H", len(images)) + images + labels


def idx_seeds():
    n, h, w = 3, 4, 5
    pixels = bytes((i * 37 + 11) % 256 for i in range(n * h * w))
    images = idx(0x803, [n, h, w], pixels)
    labels = idx(0x801, [n], bytes([3, 9, 0]))
    put("idx", "plain", idx_pair(images, labels))
    put("idx", "gzip", idx_pair(gz(images), gz(labels)))
    put("idx", "gzip_images", idx_pair(gz(images), labels))
    put("idx", "one_image", idx_pair(idx(0x803, [1, 2, 2], b"\x01\x02\x03\x04"),
                                     idx(0x801, [1], b"\x07")))
    put("idx", "truncated", idx_pair(images[:-7], labels))
    put("idx", "gzip_cut", idx_pair(gz(images)[:30], labels))
    put("idx", "header_cut", idx_pair(images[:10], labels))
    put("idx", "extra_data", idx_pair(images + b"xx", labels))
    put("idx", "swapped", idx_pair(labels, images))
    put("idx", "count_mismatch", idx_pair(images, idx(0x801, [2], bytes([1, 2]))))
    put("idx", "bad_label", idx_pair(images, idx(0x801, [n], bytes([3, 10, 0]))))
    put("idx", "huge_header", idx_pair(idx(0x803, [100000000, 4096, 4096], pixels), labels))
    put("idx", "zero_dim", idx_pair(idx(0x803, [n, 0, w], pixels), labels))


# ---- CIFAR-10 ----------------------------------------------------------------

def cifar_record(label, k):
    return bytes([label]) + bytes((k * 31 + i * 7) % 256 for i in range(3072))


def cifar_seeds():
    two = cifar_record(3, 1) + cifar_record(9, 2)
    put("cifar", "one", cifar_record(0, 0))
    put("cifar", "two", two)
    put("cifar", "two.gz", gz(two))
    put("cifar", "truncated", two[:-100])
    put("cifar", "gzip_cut", gz(two)[:200])
    put("cifar", "bad_label", cifar_record(3, 1) + cifar_record(10, 2))
    put("cifar", "empty", b"")


# ---- checkpoints ---------------------------------------------------------------

TINY = NET % (1, 4, 4) + "[batchnorm]\n[connected]\noutput=10\n[softmax]\n"


def with_crc(body):
    return body + struct.pack("<I", zlib.crc32(body))


def checkpoint_seeds(dtrain):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "tiny.cfg")
        ckpt = os.path.join(tmp, "tiny.ckpt")
        with open(cfg, "w") as f:
            f.write(TINY)
        subprocess.run([dtrain, "train", cfg, "--dataset", "synthetic", "--max-steps", "3",
                        "--seed", "5", "--threads", "1", "--no-prefetch", "--quiet",
                        "--checkpoint", ckpt], check=True, stdout=subprocess.DEVNULL)
        good = open(ckpt, "rb").read()
    body = good[:-4]
    put("checkpoint", "tiny.ckpt", good)
    put("checkpoint", "header_only", good[:80])
    put("checkpoint", "cut_payload", good[:200])
    put("checkpoint", "no_crc", body)
    put("checkpoint", "bad_crc", flip(good, 100))
    put("checkpoint", "bad_magic", flip(good, 0))
    put("checkpoint", "version2", with_crc(body[:8] + struct.pack("<I", 2) + body[12:]))
    # Version 3 (no class-name section: the body ends with version 4's empty
    # names head, version 5's empty worker head and version 6's samples per
    # step), version 4 with class names (the tiny net has 10 outputs; the
    # section holds a folder data set's names), version 5 (no samples per
    # step) and 2 workers' state (top-k residuals).
    v3 = body[:8] + struct.pack("<I", 3) + body[12:-32]
    put("checkpoint", "version3", with_crc(v3))
    put("checkpoint", "version5", with_crc(body[:8] + struct.pack("<I", 5) + body[12:-8]))
    v4 = body[:8] + struct.pack("<I", 4) + body[12:-32]
    names = b"cat\0dog\0zebra\0"
    put("checkpoint", "class_names", with_crc(v4 + struct.pack("<II", 3, len(names)) + names))
    put("checkpoint", "class_names_twice", with_crc(v4 + struct.pack("<II", 2, 8) + b"cat\0cat\0"))
    nparams = struct.unpack_from("<Q", body, 56)[0]
    residuals = struct.pack(f"<{2 * nparams}f", *(0.5 * i for i in range(2 * nparams)))
    samples = body[-8:]
    put("checkpoint", "worker_state",
        with_crc(body[:-24] + struct.pack("<IIQ", 2, 0, nparams) + residuals + samples))
    put("checkpoint", "worker_state_loop", with_crc(body[:-24] + struct.pack("<IIQ", 0xFFFFFFFF, 0, 0) + samples))
    # Counts that disagree with the file's size, CRC recomputed.
    put("checkpoint", "count_too_big",
        with_crc(body[:56] + struct.pack("<Q", nparams + 1) + body[64:]))
    put("checkpoint", "count_huge",
        with_crc(body[:72] + struct.pack("<Q", 1 << 61) + body[80:]))
    # A negative position and an out-of-range step, CRC valid.
    put("checkpoint", "negative_epoch",
        with_crc(body[:48] + struct.pack("<i", -1) + body[52:]))
    put("checkpoint", "step_range",
        with_crc(body[:32] + struct.pack("<Q", 1 << 63) + body[40:]))


def json_seeds():
    """Run-log lines and a profile-like file, then the odd corners: escapes,
    surrogate pairs, deep nesting, long strings and paths, cut and broken
    text."""
    step = (b'{"event":"step","step":12,"epoch":1,"loss":0.53125,"lr":0.02,"step_s":0.0312,'
            b'"bytes_sent":0,"lag":1,"mode":"ps-async"}')
    profile = (b'{"format":"dtrain-profile","version":1,"batch":16,"reps":3,\n'
               b' "layers":[{"name":"conv1","fwd_s":0.001,"bwd_s":0.002,"params":456},\n'
               b'            {"name":"fc","fwd_s":1e-4,"bwd_s":2.5E-4,"params":7850,"fc_in":784}]}\n')
    put("json", "step.json", step)
    put("json", "profile.json", profile)
    put("json", "escapes.json", b'{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00","\\u0061":[true,false,null]}')
    put("json", "utf8.json", '{"k\u00e9":"\u4e2d\u6587 \U0001f600"}'.encode("utf-8"))
    put("json", "deep.json", b"[" * 31 + b"1" + b"]" * 31)
    put("json", "too_deep.json", b"[" * 40 + b"]" * 40)
    put("json", "long_string.json", b'{"s":"' + b"x" * 1500 + b'"}')
    put("json", "long_path.json", b'{"' + b"k" * 200 + b'":{"' + b"j" * 80 + b'":1}}')
    put("json", "many_fields.json", b"{" + b",".join(b'"f%d":%d' % (i, i) for i in range(70)) + b"}")
    put("json", "numbers.json", b"[0,-0,1.5,-2e-3,1E+2,1e999,01,1.,.5,+1,-]")
    put("json", "cut.json", step[: len(step) // 2])
    put("json", "bad_utf8.json", b'{"a":"\xc0\xaf\xff"}')
    put("json", "lone_surrogate.json", b'{"a":"\\udc00","b":"\\ud800x"}')
    put("json", "nul_escape.json", b'{"a":"\\u0000"}')
    put("json", "trailing.json", b'{"a":1} x')


def image_seeds():
    """Tiny PNGs of every colour type, bit depth and interlacing (written by
    tests/make_images.py's encoder), JPEGs from PIL (baseline 4:2:0 and
    4:4:4, gray, progressive), and broken ones."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import numpy as np
    from io import BytesIO
    from PIL import Image
    import make_images as mi
    rng = np.random.RandomState(11)
    rgb = rng.randint(0, 256, (5, 4, 3))
    gray = rng.randint(0, 256, (3, 4, 1))
    put("image", "gray8.png", mi.png(gray, 0, 8))
    put("image", "gray1_interlaced.png", mi.png(gray % 2, 0, 1, interlace=True))
    put("image", "gray_alpha.png", mi.png(np.concatenate([gray, gray], 2), 4, 8))
    put("image", "rgb_interlaced.png", mi.png(rgb, 2, 8, interlace=True))
    put("image", "rgba16.png", mi.png(np.concatenate([rgb, rgb[..., :1]], 2) * 257, 6, 16))
    put("image", "palette_trns.png", mi.png(rgb[..., :1] % 4, 3, 2, palette=rng.randint(0, 256, (4, 3)),
                                            trns=b"\x00\x80"))
    photo = Image.fromarray(rng.randint(0, 256, (16, 16, 3)).astype(np.uint8))
    jpegs = {"q50.jpg": dict(quality=50), "q90_444.jpg": dict(quality=90, subsampling=0),
             "progressive.jpg": dict(quality=70, progressive=True)}
    for name, opts in jpegs.items():
        buf = BytesIO()
        photo.save(buf, "JPEG", **opts)
        put("image", name, buf.getvalue())
    buf = BytesIO()
    photo.convert("L").resize((8, 8)).save(buf, "JPEG", quality=60)
    put("image", "gray.jpg", buf.getvalue())
    good_png, good_jpg = mi.png(rgb, 2, 8), buf.getvalue()
    put("image", "cut.png", good_png[: len(good_png) // 2])
    put("image", "cut.jpg", good_jpg[: len(good_jpg) // 2])
    put("image", "bad_crc.png", flip(good_png, 30))
    put("image", "huge.png", b"\x89PNG\r\n\x1a\n" + mi.chunk(b"IHDR", struct.pack(">IIBBBBB", 40000, 3, 8, 2, 0, 0, 0)))
    put("image", "header_only.jpg", good_jpg[:20])
    put("image", "empty", b"")
    put("image", "gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py PATH/TO/dtrain")
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    model_seeds()
    idx_seeds()
    cifar_seeds()
    checkpoint_seeds(sys.argv[1])
    json_seeds()
    image_seeds()
    for h in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, h))
        size = sum(os.path.getsize(os.path.join(CORPUS, h, f)) for f in files)
        print("%-10s %3d seeds, %6d bytes" % (h, len(files), size))


if __name__ == "__main__":
    main()
