#!/usr/bin/env bash
# Trained weights are kept and can be loaded: every run writes model.safetensors; `dtrain eval`
# with it gives the run's last test loss; model.init_from starts a run from it; a file of
# another model, a misnamed tensor, a file that is not safetensors or a missing file is exit 2
# naming them; a layers: list without names names the weights by its default layer names; the
# weights of algorithms whose ranks differ are the evaluated mean; a pipeline's
# stages are gathered into one file that one process evaluates; a hand-written numpy reader (and
# PyTorch, where installed: its LeNet computes dtrain's loss with the file's tensors) reads the
# file.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=/usr/bin/python3

last_test_loss() { tail -1 "$1/accuracy.csv" | cut -d, -f6; }
# same_loss A B: the two losses agree to accuracy.csv's rounding (6 decimals).
same_loss() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d <= 1.5e-6 && d >= -1.5e-6) }'; }
# eval_loss CONFIG WEIGHTS [--set ...]: the loss `dtrain eval` prints (and checks the line's form).
eval_loss() {
  local config=$1 weights=$2; shift 2
  local line
  line=$("$DTRAIN" eval --config "$config" --weights "$weights" "$@" 2>"$WORK/eval.err") ||
    { echo "eval exit $?: $(cat "$WORK/eval.err")" >&2; return 1; }
  echo "$line" | grep -qE '^test loss [0-9]+\.[0-9]{6} acc [0-9]\.[0-9]{6} \([0-9]+ samples\)$' ||
    { echo "eval line: $line" >&2; return 1; }
  echo "$line" | cut -d' ' -f3
}
# expect_input_error WHAT PATTERN... COMMAND...: exit 2 and a message holding every PATTERN.
expect_input_error() {
  local what=$1; shift
  local patterns=()
  while [ "$1" != -- ]; do patterns+=("$1"); shift; done
  shift
  "$@" > "$WORK/err.txt" 2>&1; local code=$?
  [ $code = 2 ] || { fail "$what: exit $code, expected 2: $(tail -3 "$WORK/err.txt")"; return; }
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" "$WORK/err.txt" || fail "$what: the message lacks '$p': $(cat "$WORK/err.txt")"
  done
}

# ---- data-parallel algorithms on synthetic data: the file holds the evaluated model ----
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/unused"
for algorithm in "sync {name: sync}" "local_sgd {name: local_sgd, sync_period: 3}" \
                 "d_psgd {name: d_psgd, topology: ring}" "gossip {name: gossip}"; do
  name=${algorithm%% *} spec=${algorithm#* }
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$cfg" --set "algorithm=$spec" \
    --out "$WORK/$name" --progress none > "$WORK/$name.log" 2>&1 ||
    { fail "$name: exit $? ($(tail -3 "$WORK/$name.log"))"; continue; }
  [ -s "$WORK/$name/model.safetensors" ] || { fail "$name: no model.safetensors"; continue; }
  [ ! -e "$WORK/$name/model.safetensors.partial" ] || fail "$name: the temporary file stayed"
  loss=$(eval_loss "$cfg" "$WORK/$name/model.safetensors") || { fail "$name: eval failed"; continue; }
  same_loss "$loss" "$(last_test_loss "$WORK/$name")" ||
    fail "$name: eval's test loss $loss, the run's last $(last_test_loss "$WORK/$name")"
done

# ---- bad weights files: exit 2 naming the key, the file and the tensor; nothing written ----
mkdir -p "$WORK/narrow"
"$DTRAIN" --config "$cfg" --set "model.hidden=[16]" --out "$WORK/narrow/run" --progress none \
  > "$WORK/narrow.log" 2>&1 || fail "narrow run: $(tail -3 "$WORK/narrow.log")"
narrow="$WORK/narrow/run/model.safetensors"
expect_input_error "init_from of another shape" "model.init_from" "$narrow" \
  "tensor 'fc1.weight' has shape [16, 64], the model's is [32, 64]" -- \
  "$DTRAIN" --config "$cfg" --set "model.init_from=$narrow" --out "$WORK/bad1"
[ ! -e "$WORK/bad1" ] || fail "a refused init_from created its output folder"
expect_input_error "eval of another shape" "--weights" "$narrow" "'fc1.weight'" -- \
  "$DTRAIN" eval --config "$cfg" --weights "$narrow"
# A tensor renamed in the header (same length: the offsets stay valid).
$PY - "$WORK/sync/model.safetensors" "$WORK/renamed.safetensors" <<'PY' || fail "renaming failed"
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = data[8:8 + n].replace(b'"fc2.weight"', b'"fcX.weight"')
assert len(header) == n
open(sys.argv[2], "wb").write(data[:8] + header + data[8 + n:])
PY
expect_input_error "init_from with a wrong name" "model.init_from" "$WORK/renamed.safetensors" \
  "has no tensor 'fc2.weight'" "'fcX.weight'" -- \
  "$DTRAIN" --config "$cfg" --set "model.init_from=$WORK/renamed.safetensors" --out "$WORK/bad2"
expect_input_error "init_from of a YAML file" "model.init_from" "$cfg" "not a safetensors file" -- \
  "$DTRAIN" --config "$cfg" --set "model.init_from=$cfg" --out "$WORK/bad3"
expect_input_error "init_from of a missing file" "model.init_from" "$WORK/none.safetensors" -- \
  "$DTRAIN" --config "$cfg" --set "model.init_from=$WORK/none.safetensors" --out "$WORK/bad4"
head -c 100 "$narrow" > "$WORK/truncated.safetensors"
expect_input_error "eval of a truncated file" "--weights" "$WORK/truncated.safetensors" \
  "not a safetensors file" -- "$DTRAIN" eval --config "$cfg" --weights "$WORK/truncated.safetensors"
for d in bad2 bad3 bad4; do [ ! -e "$WORK/$d" ] || fail "$d: a refused run created its output folder"; done
expect_input_error "init_from without a value" "model.init_from" -- \
  "$DTRAIN" --config "$cfg" --set "model.init_from=" --dry-run

# ---- init_from on synthetic data; --resume takes the checkpoint's weights, not the file's ----
cp "$WORK/sync/model.safetensors" "$WORK/start.safetensors"
sets=(--set "model.init_from=$WORK/start.safetensors" --set "checkpoint={every_epochs: 1}")
"$DTRAIN" --config "$cfg" "${sets[@]}" --set train.epochs=1 --out "$WORK/resumed" --progress none \
  > "$WORK/resumed.log" 2>&1 || fail "init_from with checkpoints: $(tail -3 "$WORK/resumed.log")"
# Far from a fresh start: the first epoch begins from the trained weights.
awk -F, 'NR == 2 { exit !($4 < 0.5) }' "$WORK/resumed/accuracy.csv" ||
  fail "init_from: the first epoch's train loss is a fresh start's: $(cat "$WORK/resumed/accuracy.csv")"
rm "$WORK/start.safetensors"  # a resumed run does not read it
"$DTRAIN" --config "$cfg" "${sets[@]}" --set train.epochs=2 --resume "$WORK/resumed" --progress none \
  > "$WORK/resumed2.log" 2>&1 || fail "--resume read model.init_from: $(tail -3 "$WORK/resumed2.log")"
[ "$(wc -l < "$WORK/resumed/accuracy.csv")" = 3 ] || fail "resumed: accuracy.csv $(cat "$WORK/resumed/accuracy.csv")"

# ---- a layers: list without names: each layer is named <type><position> (from 0) in config.yaml
# and the weights file, which `dtrain eval` with the nameless list reads; --resume agrees ----
unnamed="model={layers: [{type: flatten}, {type: linear, out_features: 16}, {type: relu}, {type: linear, out_features: 4}]}"
"$DTRAIN" --config "$cfg" --set "$unnamed" --set "checkpoint={every_epochs: 1}" --set train.epochs=1 \
  --out "$WORK/unnamed" --progress none > "$WORK/unnamed.log" 2>&1 ||
  fail "nameless layers: exit $? ($(tail -3 "$WORK/unnamed.log"))"
for n in flatten0 linear1 relu2 linear3; do
  grep -q "name: $n" "$WORK/unnamed/config.yaml" ||
    fail "config.yaml lacks the default name $n: $(grep -A6 '^model' "$WORK/unnamed/config.yaml")"
done
header=$(head -c 2000 "$WORK/unnamed/model.safetensors" | tr -c '[:print:]' ' ')
for t in linear1.weight linear1.bias linear3.weight linear3.bias; do
  echo "$header" | grep -qF "\"$t\"" || fail "model.safetensors lacks '$t': $header"
done
loss=$(eval_loss "$cfg" "$WORK/unnamed/model.safetensors" --set "$unnamed") ||
  fail "nameless layers: eval failed"
same_loss "$loss" "$(last_test_loss "$WORK/unnamed")" ||
  fail "nameless layers: eval's test loss $loss, the run's $(last_test_loss "$WORK/unnamed")"
"$DTRAIN" --config "$cfg" --set "$unnamed" --set "checkpoint={every_epochs: 1}" --set train.epochs=2 \
  --resume "$WORK/unnamed" --progress none > "$WORK/unnamed2.log" 2>&1 ||
  fail "nameless layers: --resume: $(tail -3 "$WORK/unnamed2.log")"
expect_input_error "a name that is another layer's default name" \
  "model.layers[1]: its default name 'relu1' (its type and position) is taken by model.layers[0]" -- \
  "$DTRAIN" --config "$cfg" --set "model={layers: [{name: relu1, type: flatten}, {type: relu}, {type: linear, out_features: 4}]}" --dry-run

# ---- the default experiment: Fashion-MNIST's MLP ----
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: Fashion-MNIST is not installed"
  finish
fi
MLP="$ROOT/configs/fashion_mlp_sync.yaml"
short=(--set train.epochs=1 --set dataset.train_size=3000 --set dataset.test_size=1000 --progress none)
"$DTRAIN" --config "$MLP" "${short[@]}" --out "$WORK/mlp" > "$WORK/mlp.log" 2>&1 ||
  fail "mlp run: exit $? ($(tail -3 "$WORK/mlp.log"))"
weights="$WORK/mlp/model.safetensors"
run_loss=$(last_test_loss "$WORK/mlp")
# eval writes nothing: run from an empty folder, with no output folder.
mkdir "$WORK/empty"
loss=$(cd "$WORK/empty" && eval_loss "$MLP" "$weights" --set dataset.test_size=1000) ||
  fail "mlp eval failed"
same_loss "$loss" "$run_loss" || fail "mlp: eval's test loss $loss, the run's $run_loss"
[ -z "$(ls -A "$WORK/empty")" ] || fail "eval wrote $(ls -A "$WORK/empty")"

# A run from the weights with a learning rate too small to change them evaluates as they did.
"$DTRAIN" --config "$MLP" "${short[@]}" --set "model.init_from=$weights" --set optimizer.lr=1e-30 \
  --set train.max_iterations=1 --out "$WORK/from" > "$WORK/from.log" 2>&1 ||
  fail "init_from run: exit $? ($(tail -3 "$WORK/from.log"))"
same_loss "$(last_test_loss "$WORK/from")" "$run_loss" ||
  fail "init_from run: test loss $(last_test_loss "$WORK/from"), the weights' $run_loss"
grep -q "init_from: $weights" "$WORK/from/config.yaml" || fail "config.yaml lacks model.init_from"

# A hand-written numpy reader reads the file; a file it writes (tensors in reverse order, its
# own metadata) evaluates as the original; PyTorch's Linear layers take the tensors as they are.
if $PY -c "import numpy" 2>/dev/null; then
  $PY - "$weights" "$WORK/numpy.safetensors" > "$WORK/numpy.log" 2>&1 <<'PY' || fail "numpy reader: $(cat "$WORK/numpy.log")"
import json, struct, sys
import numpy as np

def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, stop = info["data_offsets"]
        assert info["dtype"] == "F32" and begin == end, (name, info)
        tensors[name] = np.frombuffer(data, "<f4", (stop - begin) // 4, 8 + n + begin).reshape(info["shape"])
        end = stop
    assert 8 + n + end == len(data)
    return tensors, meta

def write(path, tensors, meta):
    header, offset = {"__metadata__": meta}, 0
    for name, t in tensors:
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, t in tensors:
            f.write(t.astype("<f4").tobytes())

tensors, meta = read(sys.argv[1])
assert meta["model"] == "mlp" and meta["format"] == "pt", meta
shapes = {k: list(v.shape) for k, v in tensors.items()}
assert shapes == {"fc1.weight": [500, 784], "fc1.bias": [500], "fc2.weight": [500, 500],
                  "fc2.bias": [500], "fc3.weight": [10, 500], "fc3.bias": [10]}, shapes
assert all(np.isfinite(t).all() and t.any() for t in tensors.values())
write(sys.argv[2], list(reversed(list(tensors.items()))), {"writer": "numpy"})
try:
    import torch
except ImportError:
    sys.exit(0)
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 500), torch.nn.ReLU(),
                          torch.nn.Linear(500, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))
index = {"fc1": "1", "fc2": "3", "fc3": "5"}
state = {index[k.split(".")[0]] + "." + k.split(".")[1]: torch.from_numpy(v.copy()) for k, v in tensors.items()}
net.load_state_dict(state, strict=True)
print("torch: loaded", sum(p.numel() for p in net.parameters()), "parameters")
PY
  loss=$(eval_loss "$MLP" "$WORK/numpy.safetensors" --set dataset.test_size=1000) ||
    fail "eval of numpy's file failed"
  same_loss "$loss" "$run_loss" || fail "numpy's file: test loss $loss, the original's $run_loss"
else
  echo "skip: no numpy for the reader check"
fi

# ---- a pipeline: the stages' weights gathered into one file that one process evaluates ----
PIPE="$ROOT/configs/paper/pipedream/small/fashion_lenet_pipedream.yaml"
mpirun -np 2 --oversubscribe "$DTRAIN" --config "$PIPE" "${short[@]}" --out "$WORK/pipe" \
  > "$WORK/pipe.log" 2>&1 || fail "pipedream: exit $? ($(tail -3 "$WORK/pipe.log"))"
[ -s "$WORK/pipe/model.safetensors" ] || fail "pipedream: no model.safetensors"
loss=$(eval_loss "$PIPE" "$WORK/pipe/model.safetensors" --set dataset.test_size=1000) ||
  fail "pipedream: eval failed"
same_loss "$loss" "$(last_test_loss "$WORK/pipe")" ||
  fail "pipedream: eval's test loss $loss, the run's last $(last_test_loss "$WORK/pipe")"

# PyTorch's LeNet (bench/torch_models.py's twin) with the file's tensors computes the loss dtrain
# computes (pixels / 255, no normalisation on either side): the layouts are PyTorch's.
if $PY -c "import torch, numpy" 2>/dev/null; then
  raw=(--set dataset.test_size=1000 --set "dataset.mean=[0]" --set "dataset.std=[1]")
  loss=$(eval_loss "$PIPE" "$WORK/pipe/model.safetensors" "${raw[@]}") || fail "pipedream: raw eval failed"
  torch_loss=$($PY - "$WORK/pipe/model.safetensors" "$ROOT/bench" 2>"$WORK/torch.err" <<'PY'
import gzip, json, struct, sys
import numpy as np, torch
sys.path.insert(0, sys.argv[2])
import torch_models

data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header.pop("__metadata__")
tensors = {k: torch.frombuffer(bytearray(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                               dtype=torch.float32).reshape(v["shape"]) for k, v in header.items()}
net = torch_models.lenet()
layers = [i for i, m in enumerate(net) if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
net.load_state_dict({f"{i}.{p}": tensors[f"{name}.{p}"]
                     for i, name in zip(layers, ["c1", "c3", "f5", "f6", "f7"]) for p in ("weight", "bias")})
root = "/usr/share/datasets/fashion-mnist/"
images = np.frombuffer(gzip.open(root + "t10k-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
labels = np.frombuffer(gzip.open(root + "t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
x = torch.from_numpy(images.reshape(-1, 1, 28, 28)[:1000].astype(np.float32) / 255)
with torch.no_grad():
    loss = torch.nn.functional.cross_entropy(net(x), torch.from_numpy(labels[:1000].astype(np.int64)))
print("%.6f" % loss.item())
PY
) || fail "PyTorch's LeNet: $(cat "$WORK/torch.err")"
  same_loss "$torch_loss" "$loss" || fail "PyTorch's LeNet: test loss $torch_loss, dtrain's $loss"
else
  echo "skip: no PyTorch for the LeNet check"
fi
finish
