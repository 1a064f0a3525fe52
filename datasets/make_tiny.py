#!/usr/bin/env python3
"""Writes tiny datasets in every file format dtrain reads, for trying configs without real data.

    python3 datasets/make_tiny.py OUT [--train 200] [--test 50] [--seed 1]

OUT/mnist, OUT/fashion_mnist          idx files, gzip-compressed (10 classes, 28×28)
OUT/cifar10/cifar-10-batches-bin      data_batch_1..5.bin, test_batch.bin (10 classes)
OUT/cifar100/cifar-100-binary         train.bin, test.bin (coarse + fine label, 100 classes)
OUT/imagefolder/{train,val}/<class>/  PNG images (4 classes, 40×32)

Each image is noise plus a bright block whose position depends on the class, so a small model can
learn every set. Standard library only: PNGs are assembled with zlib and struct.
"""
import argparse
import gzip
import os
import random
import struct
import zlib


def image(rng, label, classes, channels, height, width):
    """Bytes of one channel-major image: noise, plus a bright block placed by the class."""
    cells = max(1, int(classes ** 0.5 + 0.999))
    cy, cx = divmod(label % (cells * cells), cells)
    bh, bw = max(1, height // cells), max(1, width // cells)
    out = bytearray()
    for c in range(channels):
        for y in range(height):
            for x in range(width):
                v = rng.randrange(0, 96)
                if cy * bh <= y < (cy + 1) * bh and cx * bw <= x < (cx + 1) * bw:
                    v += 140 + 10 * ((label // (cells * cells) + c) % 3)
                out.append(min(v, 255))
    return bytes(out)


def write_idx(folder, prefix, samples):
    os.makedirs(folder, exist_ok=True)
    pixels = b"".join(img for img, _ in samples)
    labels = bytes(label for _, label in samples)
    with gzip.open(os.path.join(folder, prefix + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(samples), 28, 28) + pixels)
    with gzip.open(os.path.join(folder, prefix + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 2049, len(samples)) + labels)


def mnist_like(out, name, args):
    rng = random.Random(f"{name}{args.seed}")
    for prefix, n in (("train", args.train), ("t10k", args.test)):
        samples = []
        for _ in range(n):
            label = rng.randrange(10)
            samples.append((image(rng, label, 10, 1, 28, 28), label))
        write_idx(os.path.join(out, name), prefix, samples)


def cifar_records(rng, n, classes, fine_and_coarse):
    records = bytearray()
    for _ in range(n):
        label = rng.randrange(classes)
        if fine_and_coarse:
            records.append(label // 5)  # CIFAR-100's 20 superclasses of 5 classes each
        records.append(label)
        records += image(rng, label, classes, 3, 32, 32)
    return bytes(records)


def cifar(out, args):
    rng = random.Random(f"cifar10{args.seed}")
    folder = os.path.join(out, "cifar10", "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    per_batch = max(1, args.train // 5)
    for b in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{b}.bin"), "wb") as f:
            f.write(cifar_records(rng, per_batch, 10, False))
    with open(os.path.join(folder, "test_batch.bin"), "wb") as f:
        f.write(cifar_records(rng, args.test, 10, False))

    rng = random.Random(f"cifar100{args.seed}")
    folder = os.path.join(out, "cifar100", "cifar-100-binary")
    os.makedirs(folder, exist_ok=True)
    for name, n in (("train.bin", args.train), ("test.bin", args.test)):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(cifar_records(rng, n, 100, True))


def png(path, rgb_rows, width, height):
    """An 8-bit RGB PNG: signature, IHDR, one zlib-compressed IDAT, IEND."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + row for row in rgb_rows)  # filter type 0 on every row
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def imagefolder(out, args):
    rng = random.Random(f"imagefolder{args.seed}")
    classes, width, height = ["apple", "boat", "cloud", "door"], 40, 32
    for split, n in (("train", args.train), ("val", args.test)):
        for i in range(n):
            label = i % len(classes)
            folder = os.path.join(out, "imagefolder", split, classes[label])
            os.makedirs(folder, exist_ok=True)
            planes = image(rng, label, len(classes), 3, height, width)
            plane = width * height
            rows = []
            for y in range(height):
                row = bytearray()
                for x in range(width):
                    for c in range(3):
                        row.append(planes[c * plane + y * width + x])
                rows.append(bytes(row))
            png(os.path.join(folder, f"{split}_{i:05d}.png"), rows, width, height)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write into (created)")
    parser.add_argument("--train", type=int, default=200, help="training samples per dataset")
    parser.add_argument("--test", type=int, default=50, help="test samples per dataset")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.train < 5 or args.test < 1:
        parser.error("need --train ≥ 5 (five CIFAR-10 batches) and --test ≥ 1")
    mnist_like(args.out, "mnist", args)
    mnist_like(args.out, "fashion_mnist", args)
    cifar(args.out, args)
    imagefolder(args.out, args)
    print(f"make_tiny: wrote mnist, fashion_mnist, cifar10, cifar100 and imagefolder into {args.out}")


if __name__ == "__main__":
    main()
