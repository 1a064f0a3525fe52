#!/usr/bin/env bash
# The zoo's gpt end to end on a small text file: --dry-run shows the blocks with [T, C] shapes;
# a short run learns (the test loss falls below the loss of a uniform guess); model.safetensors
# holds the tied table once under nanoGPT's names; `dtrain eval` of it gives the run's last test
# loss; with PyTorch, a plain PyTorch GPT of nanoGPT's layout loads the file (only the tied
# lm_head.weight missing) and scores the test windows as dtrain does; the tied model pipelined in
# two stages (GPipe) saves the single-rank run's weights, names and values.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for i in $(seq 1 300); do
  echo "In the beginning God created the heaven and the earth, day $i. And the earth was without form."
done > "$WORK/corpus.txt"
cat > "$WORK/gpt.yaml" <<YAML
name: gpt_tiny
seed: 2
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 32, batch_size: 16}
cluster: {device: cpu}
optimizer: {name: adamw, lr: 0.003}
train: {epochs: 2}
YAML

"$DTRAIN" --config "$WORK/gpt.yaml" --dry-run > "$WORK/dry.txt" 2>&1 || fail "dry run: $(tail -3 "$WORK/dry.txt")"
grep -Eq "^transformer.h.1.attn.c_attn +linear +\[32, 96\]" "$WORK/dry.txt" ||
  fail "the dry run's summary has no [32, 96] c_attn of block 1"
grep -Eq "^lm_head +linear +\[32, [0-9]+\] +0 " "$WORK/dry.txt" ||
  fail "the tied head should show no parameters of its own"

"$DTRAIN" --config "$WORK/gpt.yaml" --out "$WORK/run" --progress none > "$WORK/run.log" 2>&1 ||
  fail "training: $(tail -3 "$WORK/run.log")"
vocab=$(grep -Eo "[0-9]+ classes" "$WORK/run.log" | head -1 | cut -d' ' -f1)
loss=$(tail -1 "$WORK/run/accuracy.csv" | cut -d, -f6)
/usr/bin/python3 -c "import math, sys; sys.exit(0 if $loss < 0.5 * math.log($vocab) else 1)" ||
  fail "the test loss $loss did not fall well below ln($vocab)"

/usr/bin/python3 - "$WORK/run/model.safetensors" > "$WORK/names.txt" <<'PY' || fail "reading the weights"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
print("\n".join(k for k in json.loads(data[8:8 + n]) if k != "__metadata__"))
PY
grep -qx "transformer.wte.weight" "$WORK/names.txt" || fail "no transformer.wte.weight in the file"
grep -qx "transformer.h.1.mlp.c_proj.bias" "$WORK/names.txt" || fail "no transformer.h.1.mlp.c_proj.bias"
grep -q "lm_head" "$WORK/names.txt" && fail "the tied head's weight is saved twice"

"$DTRAIN" eval --config "$WORK/gpt.yaml" --weights "$WORK/run/model.safetensors" > "$WORK/eval.txt" 2>&1 ||
  fail "eval: $(tail -3 "$WORK/eval.txt")"
eval_loss=$(grep -Eo "test loss [0-9.]+" "$WORK/eval.txt" | cut -d' ' -f3)
/usr/bin/python3 -c "import sys; sys.exit(0 if abs($eval_loss - $loss) < 1e-5 else 1)" ||
  fail "eval's test loss $eval_loss is not the run's $loss"

# A PyTorch GPT of nanoGPT's layout (written here) loads the file and scores the test windows.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  split=$(grep -Eo "char tokens [0-9]+–[0-9]+ of [0-9]+" "$WORK/run.log" | tail -1 | grep -Eo "[0-9]+" | head -1)
  /usr/bin/python3 - "$WORK" "$split" "$eval_loss" > "$WORK/torch.txt" 2>&1 <<'PY' || fail "PyTorch: $(tail -5 "$WORK/torch.txt")"
import json, math, struct, sys
import torch
from torch import nn
from torch.nn import functional as F

work, test_start, expected = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
T, C, HEADS, LAYERS = 32, 32, 2, 2
text = open(f"{work}/corpus.txt", encoding="utf-8").read()
chars = sorted(set(text))
ids = torch.tensor([chars.index(c) for c in text])
V = len(chars)

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
    def forward(self, x):
        n, t, _ = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(n, t, HEADS, C // HEADS).transpose(1, 2) for z in (q, k, v))
        a = q @ k.transpose(-2, -1) / math.sqrt(C // HEADS)
        a = a.masked_fill(torch.ones(t, t).tril() == 0, float("-inf")).softmax(-1)
        return self.c_proj((a @ v).transpose(1, 2).reshape(n, t, C))

class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.gelu, self.c_proj = nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C)
    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(C), Attention(), nn.LayerNorm(C), Mlp()
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
            h=nn.ModuleList([Block() for _ in range(LAYERS)]), ln_f=nn.LayerNorm(C)))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
    def forward(self, idx):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

data = open(f"{work}/run/model.safetensors", "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header.pop("__metadata__", None)
state = {k: torch.frombuffer(bytearray(data[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]]),
                             dtype=torch.float32).reshape(h["shape"]) for k, h in header.items()}
model = Gpt().eval()
missing, unexpected = model.load_state_dict(state, strict=False)
assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)
test = ids[test_start:]
windows = (len(test) - 1) // T
x = torch.stack([test[i * T:i * T + T] for i in range(windows)])
y = torch.stack([test[i * T + 1:i * T + T + 1] for i in range(windows)])
with torch.no_grad():
    loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).item()
print(f"PyTorch test loss {loss:.6f}, dtrain {expected:.6f}")
assert abs(loss - expected) < 1e-4, "the losses differ"
PY
else
  echo "skipped the PyTorch check: no torch for /usr/bin/python3"
fi

# Pipelines (PipeDream updates with SGD): the tied GPT cut in two, the table on the first stage and
# the head on the last (each with a copy, gradients summed every step). With GPipe (a flush per
# step) it is sync: its model.safetensors has the single-rank run's names and, to float
# rounding, its values; the copies' equality is checked by the MPI test test_tied_pipeline_mpi.
sgd="optimizer={name: sgd, lr: 0.1, momentum: 0.9}"
pipe_sets=(--set "$sgd" --set train.max_iterations=12 --set train.epochs=1)
"$DTRAIN" --config "$WORK/gpt.yaml" "${pipe_sets[@]}" --out "$WORK/single" --progress none \
  > "$WORK/single.log" 2>&1 || fail "the single-rank SGD run: $(tail -3 "$WORK/single.log")"
mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/gpt.yaml" --set algorithm.name=pipedream \
  "${pipe_sets[@]}" --set "algorithm.stages=[transformer.h.1.ln_1]" --set algorithm.schedule=gpipe \
  --set "algorithm.replicas=[1, 1]" --out "$WORK/pipe" --progress none > "$WORK/pipe.log" 2>&1 ||
  fail "the 2-stage tied pipeline: $(tail -3 "$WORK/pipe.log")"
/usr/bin/python3 - "$WORK/single/model.safetensors" "$WORK/pipe/model.safetensors" \
  > "$WORK/pipe_cmp.txt" 2>&1 <<'PY' || fail "the pipeline's weights: $(cat "$WORK/pipe_cmp.txt")"
import json, struct, sys
def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        out[name] = struct.unpack(f"<{len(raw) // 4}f", raw)
    return list(header), out
names1, single = read(sys.argv[1])
names2, pipe = read(sys.argv[2])
assert names1 == names2, (names1, names2)
worst = max(abs(x - y) for k in single for x, y in zip(single[k], pipe[k]))
print(f"largest difference {worst:.3g}")
assert worst < 1e-4, "the pipelined GPT differs from the single-rank one"
PY
# A resumed GPT run equals the uninterrupted one bit for bit: dropout on (its masks follow the
# step), AdamW with warm-up, cosine over max_iterations and clipping, the char vocabulary kept
# in vocab.json; resumed mid-epoch and after an epoch. A changed vocabulary is refused on resume.
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
resume_sets=(--set model.dropout=0.1 --set optimizer.clip_grad_norm=1.0
  --set "optimizer.schedule={name: cosine, min_lr: 0.0003, warmup_iterations: 4}"
  --set train.max_iterations=60 --set train.eval_every_iterations=20
  --set "checkpoint={every_epochs: 1, every_iterations: 12, keep: 100}")
"$DTRAIN" --config "$WORK/gpt.yaml" "${resume_sets[@]}" --out "$WORK/whole" --progress none \
  > "$WORK/whole.log" 2>&1 || fail "the checkpointed run: $(tail -3 "$WORK/whole.log")"
[ -s "$WORK/whole/vocab.json" ] || fail "no vocab.json in the run's folder"
mid=$(cd "$WORK/whole/checkpoints" && ls -d epoch-0001-iteration-* | head -1)
for from in "$mid" epoch-0001; do
  copy="$WORK/whole.from.$from"
  cp -r "$WORK/whole" "$copy"
  $TOOL rewind "$copy" "$from"
  "$DTRAIN" --config "$WORK/gpt.yaml" "${resume_sets[@]}" --resume "$copy" --progress none \
    > "$copy.log" 2>&1 || { fail "resumed from $from: $(tail -3 "$copy.log")"; continue; }
  $TOOL same "$WORK/whole" "$copy" > "$WORK/same.txt" ||
    fail "the GPT resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
  cmp -s "$WORK/whole/model.safetensors" "$copy/model.safetensors" ||
    fail "the GPT resumed from $from saved other weights"
done
copy="$WORK/whole.vocab"
cp -r "$WORK/whole" "$copy"
$TOOL rewind "$copy" "$mid"
echo "Zebra" >> "$WORK/corpus.txt"  # a letter the vocabulary did not have
"$DTRAIN" --config "$WORK/gpt.yaml" "${resume_sets[@]}" --resume "$copy" --progress none \
  > "$copy.log" 2>&1
code=$?
[ "$code" -eq 2 ] || fail "a resume with another vocabulary: exit $code, expected 2"
grep -q "vocab.json" "$copy.log" || fail "the vocabulary's refusal does not name vocab.json: $(tail -2 "$copy.log")"
finish
