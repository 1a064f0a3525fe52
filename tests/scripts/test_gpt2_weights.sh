#!/usr/bin/env bash
# scripts/gpt2_weights.py on tiny fake files of Hugging Face's GPT-2 layout (1 layer, width 16,
# the byte vocabulary, 32 positions, Conv1D weights [in, out], mask buffers): the converted file
# loads in `dtrain eval` of a matching `gpt`, whose test loss equals a numpy forward pass of the
# Hugging Face layout (so the Conv1D transposes, the names and the cut position table are right);
# the `transformer.`-prefixed spelling with a tied lm_head.weight converts to the same tensors;
# a missing file, a file not GPT-2 124M, a wrong shape, an untied head and a block size beyond
# the file's positions are exit 2 naming the problem, and write nothing.
# Usage: test_gpt2_weights.sh DTRAIN REPO_ROOT
source "$(dirname "$0")/lib.sh"
skip_without_modules numpy
cd "$WORK" || exit 1
CONVERT=("$PY" "$ROOT/scripts/gpt2_weights.py")

# --- fake Hugging Face files ------------------------------------------------------------------
check_python "writing the fake files" "$WORK" <<'PY'
import json, struct, sys
import numpy as np

work = sys.argv[1]
V, C, N_CTX = 256, 16, 32
rng = np.random.default_rng(7)

def write(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

def normal(*shape, std=0.3):
    return rng.normal(0, std, shape).astype(np.float32)

hf = {"wte.weight": normal(V, C), "wpe.weight": normal(N_CTX, C),
      "h.0.ln_1.weight": 1 + normal(C, std=0.1), "h.0.ln_1.bias": normal(C, std=0.1),
      "h.0.attn.bias": np.tril(np.ones((N_CTX, N_CTX), np.float32))[None, None],
      "h.0.attn.masked_bias": np.array(-1e4, np.float32),
      "h.0.attn.c_attn.weight": normal(C, 3 * C), "h.0.attn.c_attn.bias": normal(3 * C, std=0.1),
      "h.0.attn.c_proj.weight": normal(C, C), "h.0.attn.c_proj.bias": normal(C, std=0.1),
      "h.0.ln_2.weight": 1 + normal(C, std=0.1), "h.0.ln_2.bias": normal(C, std=0.1),
      "h.0.mlp.c_fc.weight": normal(C, 4 * C), "h.0.mlp.c_fc.bias": normal(4 * C, std=0.1),
      "h.0.mlp.c_proj.weight": normal(4 * C, C), "h.0.mlp.c_proj.bias": normal(C, std=0.1),
      "ln_f.weight": 1 + normal(C, std=0.1), "ln_f.bias": normal(C, std=0.1)}
write(f"{work}/hf.safetensors", hf)
prefixed = {"transformer." + k: v for k, v in hf.items() if k != "h.0.attn.bias"}
prefixed["lm_head.weight"] = hf["wte.weight"]
write(f"{work}/hf_prefixed.safetensors", prefixed)
write(f"{work}/hf_untied.safetensors", dict(prefixed, **{"lm_head.weight": normal(V, C)}))
write(f"{work}/hf_bad_shape.safetensors",
      dict(hf, **{"h.0.mlp.c_fc.weight": hf["h.0.mlp.c_fc.weight"].T}))
PY

for i in $(seq 1 60); do
  echo "Line $i: the quick brown fox jumps over the lazy dog, and the dog sleeps on."
done > corpus.txt
cat > gpt.yaml <<YAML
name: gpt2_weights_tiny
model: {name: gpt, n_layer: 1, n_head: 2, n_embd: 16}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: byte, block_size: 8, batch_size: 8}
cluster: {device: cpu}
optimizer: {name: adamw, lr: 0.001}
YAML

# --- converted, loaded, scored as the Hugging Face layout scores ------------------------------
"${CONVERT[@]}" hf.safetensors converted.safetensors --any-size --block-size 8 > convert.txt 2>&1 ||
  fail "converting: $(cat convert.txt)"
grep -q "converted.safetensors: 16 tensors" convert.txt || fail "the summary line: $(cat convert.txt)"
"$DTRAIN" eval --config gpt.yaml --weights converted.safetensors > eval.txt 2>&1 ||
  fail "dtrain eval of the converted file: $(tail -3 eval.txt)"
loss=$(grep -Eo "test loss [0-9.]+" eval.txt | cut -d' ' -f3)
samples=$(grep -Eo "\(([0-9]+) samples\)" eval.txt | grep -Eo "[0-9]+")
check_python "the numpy reference of the Hugging Face layout" "$WORK" "${loss:-nan}" "${samples:-0}" <<'PY'
import json, math, struct, sys
import numpy as np

work, dtrain_loss, dtrain_samples = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
T, HEADS = 8, 2

def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: np.frombuffer(data[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]],
                             "<f4").reshape(h["shape"]).astype(np.float64)
            for k, h in header.items()}

hf, out = read(f"{work}/hf.safetensors"), read(f"{work}/converted.safetensors")
# One tensor by hand: Conv1D's [in, out] is the linear layer's [out, in].
assert np.array_equal(out["transformer.h.0.mlp.c_proj.weight"], hf["h.0.mlp.c_proj.weight"].T)
assert np.array_equal(out["transformer.wpe.weight"], hf["wpe.weight"][:T])
assert not {"lm_head.weight", "transformer.h.0.attn.bias", "transformer.h.0.attn.masked_bias"} & set(out)

erf = np.vectorize(math.erf)
def layer_norm(x, w, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
def conv1d(x, name):  # Hugging Face's Conv1D: x @ W[in, out] + b
    return x @ hf[name + ".weight"] + hf[name + ".bias"]

text = open(f"{work}/corpus.txt", "rb").read()
test = np.frombuffer(text, np.uint8)[int(len(text) * 0.9):].astype(np.int64)
windows = (len(test) - 1) // T
x_ids = np.stack([test[i * T:i * T + T] for i in range(windows)])
y_ids = np.stack([test[i * T + 1:i * T + T + 1] for i in range(windows)])
x = hf["wte.weight"][x_ids] + hf["wpe.weight"][:T]
C = x.shape[-1]
q, k, v = np.split(conv1d(layer_norm(x, hf["h.0.ln_1.weight"], hf["h.0.ln_1.bias"]),
                          "h.0.attn.c_attn"), 3, axis=-1)
q, k, v = (z.reshape(windows, T, HEADS, C // HEADS).transpose(0, 2, 1, 3) for z in (q, k, v))
a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(C // HEADS)
a = np.where(np.tril(np.ones((T, T))) == 1, a, -np.inf)
a = np.exp(a - a.max(-1, keepdims=True))
a /= a.sum(-1, keepdims=True)
x = x + conv1d((a @ v).transpose(0, 2, 1, 3).reshape(windows, T, C), "h.0.attn.c_proj")
h = conv1d(layer_norm(x, hf["h.0.ln_2.weight"], hf["h.0.ln_2.bias"]), "h.0.mlp.c_fc")
x = x + conv1d(0.5 * h * (1 + erf(h / math.sqrt(2))), "h.0.mlp.c_proj")
logits = layer_norm(x, hf["ln_f.weight"], hf["ln_f.bias"]) @ hf["wte.weight"].T
logits -= logits.max(-1, keepdims=True)
log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
loss = -np.take_along_axis(log_p, y_ids[..., None], -1).mean()
assert dtrain_samples == windows, f"dtrain scored {dtrain_samples} windows, expected {windows}"
assert abs(loss - dtrain_loss) < 1e-4, f"numpy test loss {loss:.6f}, dtrain {dtrain_loss:.6f}"
assert abs(loss - math.log(256)) > 0.1, f"the loss {loss} says nothing (a uniform guess)"
PY

# --- the other spelling: transformer. names and a tied lm_head --------------------------------
"${CONVERT[@]}" hf_prefixed.safetensors prefixed.safetensors --any-size --block-size 8 > prefixed.txt 2>&1 ||
  fail "converting the transformer.-prefixed file: $(cat prefixed.txt)"
check_python "the two spellings give the same tensors" "$WORK" <<'PY'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__")
    return header, data[8 + n:]
a, b = tensors(f"{sys.argv[1]}/converted.safetensors"), tensors(f"{sys.argv[1]}/prefixed.safetensors")
assert a == b, "the prefixed file converted differently"
PY

# A file with all 32 positions is not the model of block size 8: dtrain says so.
"${CONVERT[@]}" hf.safetensors all_positions.safetensors --any-size > /dev/null 2>&1 ||
  fail "converting without --block-size"
"$DTRAIN" eval --config gpt.yaml --weights all_positions.safetensors > wrong_t.txt 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "transformer.wpe.weight" wrong_t.txt; then
  fail "eval of a 32-row position table for block size 8: exit $rc: $(tail -2 wrong_t.txt)"
fi
# ... but it is the model whose position table has 32 rows at a context of 8 (as gpt2's 1024).
"$DTRAIN" eval --config gpt.yaml --set model.block_size=32 --weights all_positions.safetensors \
  > all_t.txt 2>&1 || fail "eval of the 32-row table with model.block_size 32: $(tail -2 all_t.txt)"

# --- refusals: exit 2, a message naming the problem, nothing written --------------------------
refused() {  # refused WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  rm -f refused.safetensors
  "${CONVERT[@]}" "$@" > refused.txt 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat refused.txt)"
  grep -q -e "$pattern" refused.txt || fail "$what: the message lacks '$pattern': $(cat refused.txt)"
  [ ! -e refused.safetensors ] || fail "$what: wrote its output"
  ls ./*.tmp* > /dev/null 2>&1 && fail "$what: left a temporary file"
}
refused "a missing file" "missing.safetensors: no such file" missing.safetensors refused.safetensors
refused "not safetensors" "not a safetensors file" corpus.txt refused.safetensors --any-size
refused "a small file without --any-size" "not GPT-2 124M" hf.safetensors refused.safetensors
refused "c_fc stored [out, in]" "h.0.mlp.c_fc.weight: shape \[64, 16\], expected \[16, 64\]" \
  hf_bad_shape.safetensors refused.safetensors --any-size
refused "an untied head" "lm_head.weight is not wte.weight" \
  hf_untied.safetensors refused.safetensors --any-size
refused "more positions than the file" "--block-size 64: must be in \[1, 32\]" \
  hf.safetensors refused.safetensors --any-size --block-size 64
finish
