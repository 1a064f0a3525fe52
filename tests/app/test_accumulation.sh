#!/usr/bin/env bash
# Gradient accumulation (train.accumulation_steps) end to end: a tiny GPT trained with 2 and 4
# micro-batches a step ends with the weights of the run without accumulation, and so does sync
# on 2 ranks; the resolved config.yaml holds the key; --dry-run shows the micro-batch the model
# is built for; a resumed run ends as the uninterrupted one; every algorithm that computes
# through the shared path trains with it and a clipped gradient on 2 ranks; bad values are
# exit 2 naming the key, with nothing written.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# max |a − b| / max |b| over every tensor of two model.safetensors files, below $3.
same_weights() {  # A B TOLERANCE
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
import numpy as np
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), "different tensors"
worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
largest = max(float(np.max(np.abs(b[k]))) for k in b)
print(f"relative difference {worst / largest:.3g}")
sys.exit(0 if worst <= float(sys.argv[3]) * largest else 1)
PY
}

# A tiny GPT, plain SGD, no dropout: the same global batch in 1, 2 and 4 micro-batches.
for i in $(seq 1 200); do
  echo "In the beginning God created the heaven and the earth, day $i."
done > "$WORK/corpus.txt"
cat > "$WORK/gpt.yaml" <<YAML
name: gpt_accumulation
seed: 4
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, dropout: 0}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 16, batch_size: 16}
cluster: {device: cpu}
optimizer: {lr: 0.05, momentum: 0.9}
train: {epochs: 1, max_iterations: 4}
YAML
for steps in 1 2 4; do
  "$DTRAIN" --config "$WORK/gpt.yaml" --set train.accumulation_steps=$steps \
    --out "$WORK/gpt_$steps" --progress none > "$WORK/gpt_$steps.log" 2>&1 ||
    fail "gpt with $steps micro-batches: $(tail -3 "$WORK/gpt_$steps.log")"
done
for steps in 2 4; do
  same_weights "$WORK/gpt_$steps/model.safetensors" "$WORK/gpt_1/model.safetensors" 1e-6 \
    > "$WORK/diff.txt" || fail "gpt: $steps micro-batches differ from one: $(cat "$WORK/diff.txt")"
done
grep -q "accumulation_steps: 4" "$WORK/gpt_4/config.yaml" ||
  fail "config.yaml lacks train.accumulation_steps: 4"
grep -q "accumulation_steps: 1" "$WORK/gpt_1/config.yaml" ||
  fail "config.yaml lacks the default train.accumulation_steps: 1"

# --dry-run: the model is built for the micro-batch (16 rows in 4 micro-batches of 4).
"$DTRAIN" --config "$WORK/gpt.yaml" --set train.accumulation_steps=4 --dry-run \
  > "$WORK/dry.txt" 2>&1 || fail "dry run: $(tail -3 "$WORK/dry.txt")"
grep -q "4 micro-batches of 4" "$WORK/dry.txt" || fail "the dry run does not name the micro-batch"
grep -Eq "^activations: .* at batch 4 " "$WORK/dry.txt" ||
  fail "the dry run's activations are not the micro-batch's: $(grep activations "$WORK/dry.txt")"

# Sync on 2 ranks: 2 micro-batches a step equal one.
out="$WORK/out"
write_synthetic_config "$WORK/mlp.yaml" "$out"
for steps in 1 2; do
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/mlp.yaml" \
    --set train.accumulation_steps=$steps --set train.epochs=1 \
    --out "$WORK/sync_$steps" --progress none > "$WORK/sync_$steps.log" 2>&1 ||
    fail "sync on 2 ranks, $steps micro-batches: $(tail -3 "$WORK/sync_$steps.log")"
done
same_weights "$WORK/sync_2/model.safetensors" "$WORK/sync_1/model.safetensors" 1e-6 \
  > "$WORK/diff.txt" || fail "sync on 2 ranks: 2 micro-batches differ: $(cat "$WORK/diff.txt")"

# A run resumed within an epoch ends as the uninterrupted one, bit for bit: a step's
# micro-batches leave no state between steps.
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
"$DTRAIN" --config "$WORK/mlp.yaml" --set train.accumulation_steps=4 \
  --set "checkpoint={every_iterations: 5, keep: 100}" --out "$WORK/whole" --progress none \
  > "$WORK/whole.log" 2>&1 || fail "checkpointed run: $(tail -3 "$WORK/whole.log")"
mid=$(cd "$WORK/whole/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
cp -r "$WORK/whole" "$WORK/resumed"
$TOOL rewind "$WORK/resumed" "$mid"
"$DTRAIN" --config "$WORK/mlp.yaml" --set train.accumulation_steps=4 \
  --set "checkpoint={every_iterations: 5, keep: 100}" --resume "$WORK/resumed" --progress none \
  > "$WORK/resumed.log" 2>&1 || fail "resumed run: $(tail -3 "$WORK/resumed.log")"
$TOOL same "$WORK/whole" "$WORK/resumed" > "$WORK/same.txt" ||
  fail "resumed from $mid differs from the uninterrupted run: $(cat "$WORK/same.txt")"

# Every algorithm that computes through the shared path, accumulating and clipping on 2 ranks.
for algorithm in ps_sync pipe_sgd local_sgd gossip d_psgd; do
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/mlp.yaml" --set algorithm.name=$algorithm \
    --set train.accumulation_steps=4 --set optimizer.clip_grad_norm=1.0 --set train.epochs=1 \
    --out "$WORK/$algorithm" --progress none > "$WORK/$algorithm.log" 2>&1 ||
    fail "$algorithm with accumulation and clipping: $(tail -3 "$WORK/$algorithm.log")"
  [ -s "$WORK/$algorithm/model.safetensors" ] || fail "$algorithm wrote no model.safetensors"
done

# Bad values: exit 2 naming the key (and the numbers), nothing written.
expect_2() {  # DESCRIPTION PATTERN COMMAND...
  local what=$1 pattern=$2; shift 2
  local msg rc
  msg=$("$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "$what: exit code $rc, expected 2 (stderr: $msg)"
  echo "$msg" | grep -q -- "$pattern" || fail "$what: message lacks '$pattern': $msg"
  [ ! -e "$out" ] || { fail "$what: created $out"; rm -rf "$out"; }
}
expect_2 "zero micro-batches" "train.accumulation_steps: must be >= 1, got 0" \
  "$DTRAIN" --config "$WORK/mlp.yaml" --set train.accumulation_steps=0
expect_2 "micro-batches not dividing the batch" \
  "train.accumulation_steps: 5 does not divide dataset.batch_size 32" \
  "$DTRAIN" --config "$WORK/mlp.yaml" --set train.accumulation_steps=5
expect_2 "micro-batches not dividing a rank's batch (dry run)" \
  "train.accumulation_steps: 32 must divide each rank's batch, dataset.batch_size 32 / 2 rank(s) = 16" \
  "$DTRAIN" --config "$WORK/mlp.yaml" --set train.accumulation_steps=32 --dry-run --ranks 2
expect_2 "micro-batches not dividing a rank's batch (mpirun)" \
  "train.accumulation_steps: 32 must divide each rank's batch" \
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/mlp.yaml" \
  --set train.accumulation_steps=32
expect_2 "accumulation with pipedream" "train.accumulation_steps: algorithm pipedream" \
  "$DTRAIN" --config "$WORK/mlp.yaml" --set algorithm.name=pipedream \
  --set train.accumulation_steps=2
expect_2 "a negative clip" "optimizer.clip_grad_norm: must be >= 0" \
  "$DTRAIN" --config "$WORK/mlp.yaml" --set optimizer.clip_grad_norm=-1

finish
