#!/usr/bin/python3
"""Reads dtrain checkpoints (lib/run/checkpoint.h's layout) for the tests.

  checkpoint_tool.py state RUN_DIR      the training state of the newest checkpoint, one line per
                                        entry (name, kind, CRC-32): what must match bit for bit
  checkpoint_tool.py same RUN_A RUN_B   exit 0 when both newest checkpoints hold the same state,
                                        else 1 naming the first entry that differs
  checkpoint_tool.py newest RUN_DIR     the newest checkpoint's folder
  checkpoint_tool.py rewind RUN_DIR NAME deletes the checkpoints newer than RUN_DIR/checkpoints/NAME
Timing (the trainer's wall clock, the CSV rows) is not state: it is left out.
"""
import os
import shutil
import struct
import sys
import zlib

import yaml


def checkpoints(run):
    root = os.path.join(run, "checkpoints")
    found = []
    for name in os.listdir(root):
        manifest = os.path.join(root, name, "manifest.yaml")
        if os.path.exists(manifest):
            m = yaml.safe_load(open(manifest))
            found.append(((m["epoch"], m["iteration"]), os.path.join(root, name)))
    found.sort()
    return [d for _, d in found]


def entries(path):
    data = open(path, "rb").read()
    assert data[:8] == b"DTRAINCK", path
    version, count = struct.unpack_from("<II", data, 8)
    at = 16
    out = []
    for _ in range(count):
        kind, = struct.unpack_from("<B", data, at)
        n, = struct.unpack_from("<I", data, at + 1)
        name = data[at + 5:at + 5 + n].decode()
        at += 5 + n
        size, crc = struct.unpack_from("<QI", data, at)
        at += 12
        payload = data[at:at + size]
        assert zlib.crc32(payload) == crc, (path, name)
        at += size
        out.append((name, kind, crc, payload))
    return out


def timing(name):
    # (trainer.epochs: the length the run was asked for, not its state: a resumed run may differ)
    return name.startswith("trainer.epoch_so_far.") or name == "trainer.result.0" or \
        name.endswith(".csv") or name == "trainer.epochs"


def state(run):
    newest = checkpoints(run)[-1]
    lines = []
    for f in sorted(os.listdir(newest)):
        if f.startswith("rank-") and f.endswith(".bin"):
            for name, kind, crc, _ in entries(os.path.join(newest, f)):
                if not timing(name):
                    lines.append(f"{f} {name} {kind} {crc:08x}")
    return lines


def main():
    cmd = sys.argv[1]
    if cmd == "state":
        print("\n".join(state(sys.argv[2])))
    elif cmd == "rewind":
        found = checkpoints(sys.argv[2])
        names = [os.path.basename(d) for d in found]
        for d in found[names.index(sys.argv[3]) + 1:]:
            shutil.rmtree(d)
    elif cmd == "newest":
        print(checkpoints(sys.argv[2])[-1])
    elif cmd == "same":
        a, b = state(sys.argv[2]), state(sys.argv[3])
        for x, y in zip(a, b):
            if x != y:
                print(f"differs: {x} | {y}")
                sys.exit(1)
        if len(a) != len(b):
            print(f"differs: {len(a)} entries | {len(b)}")
            sys.exit(1)
        print(f"same: {len(a)} entries")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
