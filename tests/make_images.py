#!/usr/bin/python3
"""Image files for the folder data set tests, written at test time.

    make_images.py refs DIR    decode and resize cases with their expected bytes
    make_images.py tree DIR CLASSES N SIZE [--gray] [--square]
                               a learnable folder data set: DIR/train/<class>/ and
                               DIR/test/<class>/ with N and N/2 images per class;
                               --square: all SIZE x SIZE PNGs (decoded and resized
                               alike by every reader: the Darknet weights tests)
    make_images.py bad DIR     one broken file of each kind, for the error tests
    make_images.py crops DIR   resized crops (RandomResizedCrop's resize) with their
                               expected floats from torchvision (exit 4 without torch)
    make_images.py fashion FASHION_DIR DIR LABELS N
                               real Fashion-MNIST images of the given labels (as 2,4,6)
                               as grey PNGs: DIR/train/c<label>/ the first N of the
                               training set, DIR/test/c<label>/ the first N of the test
                               set (a new small task for fine-tuning tests)

refs writes DIR/cases.txt, one line per case: FILE C H W EXPECTED TOLERANCE, where
EXPECTED holds the (C, H, W) bytes dtrain must produce from FILE (image.h). PNG
cases are built byte by byte here (every colour type and bit depth, Adam7
interlacing) and their expected bytes computed from the pixels written, checked
against PIL where PIL reads the file the same way; JPEG cases are encoded by PIL
and expected as PIL decodes them (tolerance 1 for another libjpeg build; with
Debian's PIL, on the same libjpeg-turbo, they are equal); resize cases are expected as
PIL's convert + resize(BILINEAR) + crop, the Resize + CenterCrop of torchvision
(checked against torchvision itself when it is installed). Deterministic: fixed
seeds. Exits 3 when PIL or numpy is missing (the caller skips).
"""
import os
import struct
import sys
import warnings
import zlib

try:
    import numpy as np
    from PIL import Image
except ImportError:
    sys.exit(3)
warnings.filterwarnings("ignore")  # PIL's note on palette transparency

# ---- PNG writing ------------------------------------------------------------

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_rows(samples, depth):
    """(h, w, c) sample values -> PNG scanlines (filter 0) of that bit depth."""
    h, w, c = samples.shape
    out = b""
    for y in range(h):
        row = samples[y].reshape(-1)
        if depth == 16:
            data = row.astype(">u2").tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:
            per = 8 // depth
            padded = np.zeros(((len(row) + per - 1) // per) * per, dtype=np.uint8)
            padded[: len(row)] = row
            data = bytes(int(sum(int(v) << (8 - depth * (k + 1)) for k, v in enumerate(padded[i:i + per])))
                         for i in range(0, len(padded), per))
        out += b"\0" + data
    return out


def png(samples, color_type, depth, palette=None, trns=None, interlace=False):
    """A PNG of samples (h, w, c) with this IHDR colour type and bit depth."""
    h, w, _ = samples.shape
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += pack_rows(sub, depth)
    else:
        raw = pack_rows(samples, depth)
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0))
    if palette is not None:
        body += chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    if trns is not None:
        body += chunk(b"tRNS", trns)
    body += chunk(b"IDAT", zlib.compress(raw, 9))
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def luma(rgb):
    """PIL's convert("L"): ITU-R 601-2 in 16-bit fixed point."""
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


def planar(img):
    """(h, w) or (h, w, c) -> (c, h, w) bytes."""
    if img.ndim == 2:
        img = img[:, :, None]
    return np.ascontiguousarray(img.transpose(2, 0, 1)).astype(np.uint8).tobytes()


# ---- refs ---------------------------------------------------------------------

def png_cases(rng):
    """(name, file bytes, expected RGB (h, w, 3), PIL agrees) for every kind of PNG."""
    h, w = 7, 9
    rgb = rng.randint(0, 256, (h, w, 3))
    gray = rng.randint(0, 256, (h, w, 1))
    alpha = rng.randint(0, 256, (h, w, 1))
    cases = []
    g3 = lambda g: np.repeat(g, 3, axis=2)
    cases.append(("gray8", png(gray, 0, 8), g3(gray), True))
    for depth in (1, 2, 4):
        low = rng.randint(0, 1 << depth, (h, w, 1))
        cases.append(("gray%d" % depth, png(low, 0, depth), g3(low * 255 // ((1 << depth) - 1)), True))
    g16 = rng.randint(0, 65536, (h, w, 1))
    cases.append(("gray16", png(g16, 0, 16), g3(g16 >> 8), False))  # PIL clips I;16 instead
    cases.append(("gray_alpha", png(np.concatenate([gray, alpha], 2), 4, 8), g3(gray), True))
    cases.append(("rgb", png(rgb, 2, 8), rgb, True))
    cases.append(("rgba", png(np.concatenate([rgb, alpha], 2), 6, 8), rgb, True))
    c16 = rng.randint(0, 65536, (h, w, 3))
    cases.append(("rgb16", png(c16, 2, 16), c16 >> 8, True))
    a16 = rng.randint(0, 65536, (h, w, 1))
    cases.append(("rgba16", png(np.concatenate([c16, a16], 2), 6, 16), c16 >> 8, True))
    pal = rng.randint(0, 256, (16, 3))
    idx = rng.randint(0, 16, (h, w, 1))
    cases.append(("palette", png(idx, 3, 4, palette=pal), pal[idx[..., 0]], True))
    cases.append(("palette_trns", png(idx, 3, 4, palette=pal, trns=bytes(range(0, 160, 10))), pal[idx[..., 0]],
                  True))
    cases.append(("interlaced", png(rgb, 2, 8, interlace=True), rgb, True))
    big = rng.randint(0, 256, (23, 17, 3))
    cases.append(("interlaced_gray2", png(big[..., :1] % 4, 0, 2, interlace=True),
                  g3((big[..., :1] % 4) * 85), True))
    return cases


def cover(h, w, H, W):
    """image.h step 3: the resized size that just covers H x W."""
    if H * w >= W * h:
        return H, H * w // h
    return W * h // w, W


def centre(d):
    return int(round(d / 2.0))  # Python rounds halves to even, as torchvision does


def fit_pil(im, C, H, W):
    """torchvision's pipeline on a PIL image: convert, Resize, CenterCrop."""
    im = im.convert("RGB" if C == 3 else "L")
    rh, rw = cover(im.height, im.width, H, W)
    top, left = centre(rh - H), centre(rw - W)
    return np.asarray(im.resize((rw, rh), Image.BILINEAR).crop((left, top, left + W, top + H)))


def check_torchvision(im, S):
    """The square case of fit_pil equals torchvision's Resize(S) + CenterCrop(S)."""
    try:
        import torchvision.transforms as T
    except ImportError:
        return
    want = np.asarray(T.CenterCrop(S)(T.Resize(S)(im.convert("RGB"))))
    assert (want == fit_pil(im, 3, S, S)).all(), "fit_pil differs from torchvision"


def refs(out):
    rng = np.random.RandomState(1234)
    lines = []

    def case(name, data, C, H, W, expected, tol):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        with open(os.path.join(out, name + ".%d_%d_%d" % (C, H, W)), "wb") as f:
            f.write(expected)
        lines.append("%s %d %d %d %s %d" % (name, C, H, W, name + ".%d_%d_%d" % (C, H, W), tol))

    for name, data, want, pil_agrees in png_cases(rng):
        h, w, _ = want.shape
        if pil_agrees:
            from io import BytesIO
            got = np.asarray(Image.open(BytesIO(data)).convert("RGB"))
            assert (got == want).all(), "PIL reads %s otherwise" % name
        case(name + ".png", data, 3, h, w, planar(want), 0)
        case(name + "_l.png", data, 1, h, w, planar(luma(want)), 0)
    # JPEG: colour (4:2:0 and 4:4:4, progressive) and gray, as PIL decodes them.
    smooth = np.clip(np.add.outer(np.arange(24) * 9, np.arange(32) * 5)[..., None] +
                     rng.randint(-20, 20, (24, 32, 3)), 0, 255).astype(np.uint8)
    for name, opts, mode in (("q90", dict(quality=90), "RGB"), ("q75_444", dict(quality=75, subsampling=0), "RGB"),
                             ("progressive", dict(quality=85, progressive=True), "RGB"), ("gray", {}, "L")):
        im = Image.fromarray(smooth if mode == "RGB" else smooth[..., 0], mode)
        path = os.path.join(out, name + ".jpg")
        im.save(path, "JPEG", **opts)
        data = open(path, "rb").read()
        dec = Image.open(path)
        case(name + ".jpg", data, 3, 24, 32, planar(np.asarray(dec.convert("RGB"))), 1)
        case(name + "_l.jpg", data, 1, 24, 32, planar(np.asarray(dec.convert("L"))), 1)
    # Resize and crop: shrinking (area), enlarging, odd offsets, gray to RGB,
    # tall, wide and non-square targets, a 1-pixel image.
    src = rng.randint(0, 256, (37, 50, 3)).astype(np.uint8)
    tall = rng.randint(0, 256, (61, 23, 3)).astype(np.uint8)
    for name, arr, mode in (("wide", src, "RGB"), ("tall", tall, "RGB"), ("wide_gray", src[..., 1], "L"),
                            ("dot", src[:1, :1], "RGB")):
        im = Image.fromarray(arr, mode)
        from io import BytesIO
        buf = BytesIO()
        im.save(buf, "PNG")
        for C, H, W in ((3, 16, 16), (1, 16, 16), (3, 7, 5), (3, 40, 40), (1, 13, 29), (3, 37, 37), (3, 50, 21)):
            case("%s_%dx%dx%d.png" % (name, C, H, W), buf.getvalue(), C, H, W, planar(fit_pil(im, C, H, W)), 0)
        check_torchvision(im, 16)
        check_torchvision(im, 40)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- crops ---------------------------------------------------------------------


def crops(out):
    """DIR/crops.txt, one line per case: FILE C Y X H W OH OW DY DX DH DW EXPECTED:
    dtrain's dt_image_load_region of FILE for an OH x OW sample of region (Y, X,
    H, W) must decode the region (DY, DX, DH, DW) of its pixels, and resizing
    that region give the (C, OH, OW) float32 in EXPECTED: torchvision's
    resized_crop of the decoded image as a float tensor (ToTensor's byte / 255),
    bilinear, antialias=False. A JPEG is decoded at 1/d (dtrain's rule:
    the largest d of 8, 4, 2 keeping the region at >= OH x OW pixels) by PIL's
    draft(), which asks libjpeg for the same scaled decoding."""
    try:
        import torch
        import torchvision.transforms.functional as F
    except ImportError:
        sys.exit(4)
    rng = np.random.RandomState(99)
    smooth = np.add.outer(np.arange(217) * 0.9, np.arange(300) * 0.6)[..., None] + np.array([0, 60, 120])
    photo = np.clip(smooth % 256 + rng.randint(-25, 25, (217, 300, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(photo).save(os.path.join(out, "photo.jpg"), "JPEG", quality=90)
    Image.fromarray(photo[:60, :80]).save(os.path.join(out, "photo.png"), "PNG")
    Image.fromarray(photo[:60, :80, 1]).save(os.path.join(out, "gray.png"), "PNG")
    lines = []
    for name, C, (y, x, h, w), (oh, ow) in (
            ("photo.jpg", 3, (10, 20, 150, 200), (224, 224)),   # enlarged, whole scale
            ("photo.jpg", 3, (0, 0, 217, 300), (64, 64)),       # 1/2
            ("photo.jpg", 3, (33, 47, 160, 201), (20, 24)),     # 1/8, edges rounded outwards
            ("photo.jpg", 1, (100, 90, 117, 210), (50, 40)),    # 1/2, gray
            ("photo.png", 3, (5, 7, 30, 41), (17, 23)),         # shrunk without antialiasing
            ("photo.png", 3, (3, 4, 20, 30), (20, 15)),         # rows as they are (equal size)
            ("gray.png", 3, (0, 0, 60, 80), (33, 44))):         # gray for an RGB model
        path = os.path.join(out, name)
        d = next((d for d in (8, 4, 2) if h >= oh * d and w >= ow * d), 1) if name.endswith(".jpg") else 1
        im = Image.open(path)
        full_w, full_h = im.size
        if d > 1:
            want = (-(-full_w // d), -(-full_h // d))
            im.draft("RGB", (full_w // d, full_h // d))  # PIL picks the scale by floor division
            assert im.size == want, "PIL's draft gave %s, not %s" % (im.size, want)
        im = im.convert("L" if C == 1 else "RGB")
        arr = np.asarray(im)
        if arr.ndim == 2:
            arr = arr[..., None]
        dy, dx = y // d, x // d
        dh, dw = -(-(y + h) // d) - dy, -(-(x + w) // d) - dx
        t = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))).float().div(255)
        got = F.resized_crop(t, dy, dx, dh, dw, [oh, ow], F.InterpolationMode.BILINEAR, antialias=False)
        ref = "%s.%d_%d_%d_%d.f32" % (name, y, x, oh, ow) + ("_l" if C == 1 else "")
        got.numpy().astype("<f4").tofile(os.path.join(out, ref))
        lines.append("%s %d %d %d %d %d %d %d %d %d %d %d %s" % (name, C, y, x, h, w, oh, ow, dy, dx, dh, dw, ref))
    with open(os.path.join(out, "crops.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # DIR/sides.txt: FILE C H W SIDE EXPECTED, the (C, H, W) bytes of
    # torchvision's Resize(SIDE) + CenterCrop((H, W)) on the PIL image (a JPEG
    # at least twice the resized size decoded by draft() at 1/2, 1/4, 1/8).
    import torchvision.transforms as T
    lines = []
    for name, C, H, W, side in (("photo.jpg", 3, 56, 56, 64), ("photo.jpg", 1, 40, 60, 70), ("photo.jpg", 3, 24, 24, 24),
                                ("photo.jpg", 3, 120, 120, 150), ("photo.png", 3, 30, 30, 37),
                                ("gray.png", 3, 21, 28, 29)):
        im = Image.open(os.path.join(out, name))
        # dtrain decodes a JPEG at 1/d where the resized size fits d times (PIL's draft()).
        w, h = im.size
        rw, rh = (side, side * h // w) if w <= h else (side * w // h, side)
        im.draft("RGB", (rw, rh))
        im = im.convert("L" if C == 1 else "RGB")
        got = np.asarray(T.CenterCrop((H, W))(T.Resize(side)(im)))
        ref = "%s.side%d_%d_%d_%d" % (name, side, C, H, W)
        with open(os.path.join(out, ref), "wb") as f:
            f.write(planar(got))
        lines.append("%s %d %d %d %d %s" % (name, C, H, W, side, ref))
    with open(os.path.join(out, "sides.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- tree --------------------------------------------------------------------

def tree(out, classes, n, size, gray, square=False):
    """Class k's images are noisy variations of one colour with dark stripes
    (learnable in a few steps), of varying sizes around size, alternately PNG
    and JPEG (square: size x size, PNG only)."""
    rng = np.random.RandomState(7)
    for split, count in (("train", n), ("test", max(1, n // 2))):
        for k, cls in enumerate(classes):
            d = os.path.join(out, split, cls)
            os.makedirs(d, exist_ok=True)
            base = np.array([(k * 97) % 256, (k * 57 + 80) % 256, (255 - k * 83) % 256])
            for i in range(count):
                h = size + (0 if square else rng.randint(0, size // 2 + 1))
                w = size + (0 if square else rng.randint(0, size // 2 + 1))
                # square: each image's colour drawn around its class's, so that
                # classes overlap and a short run is not always right
                tint = rng.randint(-70, 71, 3) if square else 0
                img = np.clip(base + tint + rng.randint(-30, 31, (h, w, 3)), 0, 255).astype(np.uint8)
                img[:: 2 + k % 3] //= 2
                im = Image.fromarray(img, "RGB")
                if gray:
                    im = im.convert("L")
                if i % 2 and not square:
                    im.save(os.path.join(d, "img%03d.jpg" % i), "JPEG", quality=92)
                else:
                    im.save(os.path.join(d, "img%03d.png" % i), "PNG")


# ---- fashion -----------------------------------------------------------------

def idx(path):
    import gzip
    with open(path, "rb") as f:
        data = gzip.decompress(f.read())
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def fashion(src, out, labels, n):
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = idx(os.path.join(src, prefix + "-images-idx3-ubyte.gz"))
        targets = idx(os.path.join(src, prefix + "-labels-idx1-ubyte.gz"))
        for label in labels:
            d = os.path.join(out, split, "c%d" % label)
            os.makedirs(d, exist_ok=True)
            for i, at in enumerate(np.nonzero(targets == label)[0][:n]):
                Image.fromarray(images[at], "L").save(os.path.join(d, "img%04d.png" % i), "PNG")


# ---- bad ---------------------------------------------------------------------

def bad(out):
    """One broken file of each kind (name: what is wrong with it)."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.RandomState(3)
    rgb = rng.randint(0, 256, (12, 10, 3)).astype(np.uint8)
    from io import BytesIO
    good_png, good_jpg = BytesIO(), BytesIO()
    Image.fromarray(rgb).save(good_png, "PNG")
    Image.fromarray(rgb).save(good_jpg, "JPEG", quality=90)
    p, j = good_png.getvalue(), good_jpg.getvalue()
    cmyk = BytesIO()
    Image.fromarray(rgb).convert("CMYK").save(cmyk, "JPEG")
    files = {
        "empty.png": b"",
        "truncated.png": p[: len(p) * 2 // 3],
        "truncated.jpg": j[: len(j) * 2 // 3],
        "bad_crc.png": p[:45] + bytes([p[45] ^ 0xff]) + p[46:],  # a byte of IDAT's data
        "garbage.jpg": bytes(rng.randint(0, 256, 300).astype(np.uint8)),
        "text.png": b"this is not an image\n",
        "huge.png": b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b""),
        "bomb.png": b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8000, 8000, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b""),
        "cmyk.jpg": cmyk.getvalue(),
        "notes.txt": b"hello\n",
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "good.png"), "wb") as f:
        f.write(p)
    with open(os.path.join(out, "good.jpg"), "wb") as f:
        f.write(j)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "refs":
        os.makedirs(sys.argv[2], exist_ok=True)
        refs(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "fashion":
        fashion(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4].split(",")], int(sys.argv[5]))
    elif len(sys.argv) >= 6 and sys.argv[1] == "tree":
        tree(sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), int(sys.argv[5]), "--gray" in sys.argv[6:],
             "--square" in sys.argv[6:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "bad":
        bad(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "crops":
        os.makedirs(sys.argv[2], exist_ok=True)
        crops(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
