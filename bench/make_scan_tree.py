#!/usr/bin/python3
"""make_scan_tree.py DIR CLASSES PER: an ImageNet-shaped folder of tiny files to time
the folder scan (docs/IMAGES.md): DIR/train/nXXXXXXXX/nXXXXXXXX_N.png,
CLASSES folders of PER files, each a hard link to one 1x1 PNG per class (no
disk blocks beyond the directory entries; ext4 allows 65000 links a file)."""
import os, sys, zlib, struct
out, classes, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def png(rgb):
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(b"\x00" + bytes(rgb))) + chunk(b"IEND", b""))
for k in range(classes):
    wnid = "n%08d" % (1440764 + k * 7919)
    d = os.path.join(out, "train", wnid)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(out, "src_%d.png" % k)
    with open(src, "wb") as f: f.write(png([k % 256, (k * 7) % 256, (k * 13) % 256]))
    for i in range(per):
        os.link(src, os.path.join(d, "%s_%d.png" % (wnid, 10000 + i * 3)))
