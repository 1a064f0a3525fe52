#!/usr/bin/python3
"""Convert Hugging Face's GPT-2 weights into a file that dtrain's gpt2 model starts from.

Usage:
  scripts/gpt2_weights.py HF_MODEL.safetensors OUT.safetensors [--block-size N] [--any-size]

HF_MODEL.safetensors is the `model.safetensors` of Hugging Face's GPT-2 (openai-community/gpt2,
names `wte.weight`, `h.0.attn.c_attn.weight`, ... or the same under `transformer.`). OUT gets
dtrain's (nanoGPT's) names, which `model: {name: gpt2, init_from: OUT}` and `dtrain eval
--weights OUT` read (docs/outputs.md):
  - the Conv1D weights of c_attn, attn.c_proj, c_fc and mlp.c_proj, stored [in, out], are
    transposed to a linear layer's [out, in];
  - wte, the LayerNorms and the biases are copied as they are;
  - wpe keeps all 1024 rows (the gpt2 model's table, at any block_size up to 1024), or its
    first --block-size rows for a gpt model whose model.block_size is that (position p reads
    row p either way);
  - the causal-mask buffers (`attn.bias` of shape [1, 1, n, n], `attn.masked_bias`) are
    dropped, and `lm_head.weight`, when present, must equal wte (GPT-2 ties them; dtrain's file
    holds the table once).
Every tensor is written as F32 (F16 and BF16 inputs are widened).

Without --any-size the file must be GPT-2 124M (12 layers, width 768, vocabulary 50257, 1024
positions); --any-size accepts any file of GPT-2's layout (e.g. gpt2-medium for dtrain's `gpt`
with n_layer 24, n_head 16, n_embd 1024, or a small test file). A missing file, a file that is
not safetensors, an unknown or missing name or a wrong shape is exit 2 naming the file and the
tensor; OUT is written only when everything checked out (a temporary file, then a rename).

numpy only: safetensors is an 8-byte little-endian header length, a JSON header and the raw data.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

GPT2_124M = {"n_layer": 12, "n_embd": 768, "vocab": 50257, "n_ctx": 1024}
# The Conv1D layers whose weights Hugging Face stores [in, out].
CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


class BadInput(Exception):
    """A problem with the input file or the arguments: exit 2 with the message."""


def read_safetensors(path):
    """The tensors of a safetensors file as float32 arrays, by name (without __metadata__)."""
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    if data.size < 8:
        raise BadInput(f"{path}: not a safetensors file ({data.size} bytes)")
    length = struct.unpack("<Q", data[:8].tobytes())[0]
    if length < 2 or 8 + length > data.size:
        raise BadInput(f"{path}: not a safetensors file (its header length {length} does not fit "
                       f"its {data.size} bytes)")
    try:
        header = json.loads(data[8:8 + length].tobytes())
    except ValueError as e:
        raise BadInput(f"{path}: not a safetensors file (its header is not JSON: {e})")
    if not isinstance(header, dict):
        raise BadInput(f"{path}: not a safetensors file (its header is not a JSON map)")
    header.pop("__metadata__", None)
    body = data[8 + length:]
    tensors = {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise BadInput(f"{path}: {name}: needs dtype, shape and data_offsets")
        if dtype not in DTYPES:
            raise BadInput(f"{path}: {name}: dtype {dtype}, expected one of {', '.join(DTYPES)}")
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= body.size or end - begin != count * DTYPES[dtype].itemsize:
            raise BadInput(f"{path}: {name}: data_offsets [{begin}, {end}] do not hold {dtype} "
                           f"{shape} inside the file's {body.size} bytes of data")
        raw = body[begin:end].view(DTYPES[dtype])
        if dtype == "BF16":  # the upper half of a float32
            values = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            values = raw.astype(np.float32)
        tensors[name] = values.reshape(shape)
    return tensors


def write_safetensors(path, tensors, metadata):
    """Write float32 tensors, in the given order, atomically (a temporary file, then a rename)."""
    header, offset = {"__metadata__": metadata}, 0
    for name, array in tensors.items():
        size = array.size * 4
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the format advises
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(temporary, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for array in tensors.values():
                f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())
        os.replace(temporary, path)
    except OSError as e:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise BadInput(f"{path}: cannot write ({e.strerror})")


def hf_names(tensors, path):
    """The tensors by their names without `transformer.`; the mask buffers dropped."""
    named = {}
    for name, array in tensors.items():
        short = name[len("transformer."):] if name.startswith("transformer.") else name
        if re.fullmatch(r"h\.\d+\.attn\.(bias|masked_bias)", short):
            continue  # the causal mask, a buffer (the projections' biases are attn.c_*.bias)
        if short in named:
            raise BadInput(f"{path}: {name}: given twice (with and without 'transformer.')")
        named[short] = array
    return named


def convert(tensors, path, block_size, any_size):
    """dtrain's gpt2 tensors, in the model's order, from Hugging Face's."""
    t = hf_names(tensors, path)
    for key in ("wte.weight", "wpe.weight"):
        if key not in t or t[key].ndim != 2:
            raise BadInput(f"{path}: no 2-D '{key}': not GPT-2's weights (names such as "
                           "wte.weight, h.0.attn.c_attn.weight, with or without 'transformer.')")
    vocab, c = t["wte.weight"].shape
    n_ctx = t["wpe.weight"].shape[0]
    layers = {int(m.group(1)) for m in (re.match(r"h\.(\d+)\.", k) for k in t) if m}
    n_layer = max(layers) + 1 if layers else 0
    found = {"n_layer": n_layer, "n_embd": c, "vocab": vocab, "n_ctx": n_ctx}
    if not any_size and found != GPT2_124M:
        raise BadInput(f"{path}: not GPT-2 124M: {found}, expected {GPT2_124M} (--any-size takes "
                       "other sizes of GPT-2's layout)")
    if block_size is None:
        block_size = n_ctx
    if not 0 < block_size <= n_ctx:
        raise BadInput(f"--block-size {block_size}: must be in [1, {n_ctx}] (the file's positions)")

    # name → shape as Hugging Face stores it
    expected = {"wte.weight": [vocab, c], "wpe.weight": [n_ctx, c],
                "ln_f.weight": [c], "ln_f.bias": [c]}
    for i in range(n_layer):
        h = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            expected[h + ln + ".weight"] = [c]
            expected[h + ln + ".bias"] = [c]
        for layer, fan_in, fan_out in (("attn.c_attn", c, 3 * c), ("attn.c_proj", c, c),
                                       ("mlp.c_fc", c, 4 * c), ("mlp.c_proj", 4 * c, c)):
            expected[h + layer + ".weight"] = [fan_in, fan_out]
            expected[h + layer + ".bias"] = [fan_out]
    head = t.pop("lm_head.weight", None)
    if head is not None and (list(head.shape) != [vocab, c] or
                             not np.array_equal(head, t["wte.weight"])):
        raise BadInput(f"{path}: lm_head.weight is not wte.weight: dtrain's gpt2 ties them")
    for name in t:
        if name not in expected:
            raise BadInput(f"{path}: unexpected tensor '{name}': not GPT-2's layout")
    for name, shape in expected.items():
        if name not in t:
            raise BadInput(f"{path}: missing tensor '{name}'")
        if list(t[name].shape) != shape:
            raise BadInput(f"{path}: {name}: shape {list(t[name].shape)}, expected {shape}")

    out = {"transformer.wte.weight": t["wte.weight"],
           "transformer.wpe.weight": t["wpe.weight"][:block_size]}
    for i in range(n_layer):
        h = f"h.{i}."
        for name in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
            array = t[h + name]
            if name.endswith(".weight") and name[:-len(".weight")] in CONV1D:
                array = array.T  # Conv1D's [in, out] → linear's [out, in]
            out["transformer." + h + name] = array
    out["transformer.ln_f.weight"] = t["ln_f.weight"]
    out["transformer.ln_f.bias"] = t["ln_f.bias"]
    return out, dict(found, block_size=block_size)


def main(argv):
    parser = argparse.ArgumentParser(
        description="Convert Hugging Face's GPT-2 model.safetensors to dtrain's gpt2 names.")
    parser.add_argument("source", help="Hugging Face's model.safetensors")
    parser.add_argument("out", help="the file to write (dtrain's names)")
    parser.add_argument("--block-size", type=int, default=None,
                        help="the rows of wpe to keep: a gpt model's model.block_size "
                             "(default: all of the file's)")
    parser.add_argument("--any-size", action="store_true",
                        help="accept any size of GPT-2's layout, not only 124M")
    args = parser.parse_args(argv)
    try:
        if os.path.realpath(args.source) == os.path.realpath(args.out):
            raise BadInput(f"{args.out}: is the source file; write elsewhere")
        tensors = read_safetensors(args.source)
        out, found = convert(tensors, args.source, args.block_size, args.any_size)
        metadata = {"converted_by": "scripts/gpt2_weights.py",
                    "source": os.path.basename(args.source)}
        metadata.update({k: str(v) for k, v in found.items()})
        write_safetensors(args.out, out, metadata)
    except BadInput as e:
        print(f"gpt2_weights.py: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(out)} tensors, {sum(a.size for a in out.values()):,} parameters "
          f"({found['n_layer']} layers, width {found['n_embd']}, vocabulary {found['vocab']}, "
          f"{found['block_size']} positions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
