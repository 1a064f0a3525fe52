#!/usr/bin/env bash
# Sharded data parallelism (algorithm.shard, ZeRO-1/2/3): a sharded sync run, in every mode, ends
# with the unsharded run's weights (model.safetensors) bit for bit — on 2 ranks with AdamW (clip,
# dropout, accumulation, fp32 and bf16), SGD with momentum, Lion, recomputed blocks with
# evaluations; on 4 ranks over the ring with a codec; pipe_sgd's optimizer and gradients modes
# too — and resumes from its own checkpoints bit for bit (each rank's file holds its shard of the
# optimizer state, and of the weights when they are sharded). A checkpoint of another shard
# layout, `shard` on an algorithm that keeps a model per rank, and pipe_sgd's `parameters` are
# exit 2 naming the key; so are sapipe and pipedream with model.recompute: blocks. Each mode's
# peak resident memory falls below the previous one's, by at least half of what the dry run's
# table predicts against none.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"

cat "$ROOT"/docs/*.md > "$WORK/corpus.txt"  # text the repository always has
cat > "$WORK/gpt.yaml" <<YAML
name: shard_gpt
seed: 1
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, dropout: 0.1, bias: true, tie_weights: true}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 16, batch_size: 8}
algorithm: {name: sync, segments: 4}
optimizer: {name: adamw, lr: 3.0e-3, weight_decay: 0.1, clip_grad_norm: 0.5}
train: {epochs: 1, max_iterations: 20, eval_every_iterations: 0}
YAML
cat > "$WORK/mlp.yaml" <<'YAML'
name: shard_mlp
seed: 2
model:
  layers:
    - {type: flatten}
    - {name: fc1, type: linear, out_features: 256}
    - {type: relu}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
algorithm: {name: sync, segments: 2}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.001, clip_grad_norm: 0.3}
train: {epochs: 2, max_iterations: 0, eval_every_epochs: 1}
YAML

# run NAME RANKS CONFIG [--set ...]: trains into $WORK/NAME; fails the test when the run does.
run() {
  local name=$1 ranks=$2 config=$3
  shift 3
  rm -rf "$WORK/$name"
  mpirun -np "$ranks" --oversubscribe "$DTRAIN" --config "$WORK/$config" --out "$WORK/$name" \
    --progress none "$@" > "$WORK/$name.log" 2>&1 || { fail "$name: $(tail -3 "$WORK/$name.log")"; return 1; }
}
# same_weights WHAT A B: the two runs' model.safetensors are identical.
same_weights() {
  cmp -s "$WORK/$2/model.safetensors" "$WORK/$3/model.safetensors" ||
    fail "$1: the sharded run's weights differ from the unsharded run's"
}

# 2 ranks: every optimizer, fp32 and bf16 (where this CPU computes it), with clipping, dropout
# and accumulation.
variants=("adamw" "adamw_accum --set train.accumulation_steps=2 --set algorithm.segments=1")
if "$DTRAIN" --dry-run --config "$WORK/gpt.yaml" --set cluster.precision=bf16 > "$WORK/probe.log" 2>&1; then
  variants+=("adamw_bf16 --set cluster.precision=bf16")
else
  grep -q "no native bfloat16" "$WORK/probe.log" || fail "bf16 dry run: $(tail -3 "$WORK/probe.log")"
  echo "note: no native bf16 on this CPU: the bf16 comparison is skipped"
fi
MODES=(optimizer gradients parameters)
# compare NAME RANKS CONFIG [--set ...]: the unsharded run and one per mode end alike.
compare() {
  local name=$1 ranks=$2 config=$3
  shift 3
  run "${name}_none" "$ranks" "$config" "$@" || return
  for mode in "${MODES[@]}"; do
    run "${name}_$mode" "$ranks" "$config" "$@" --set algorithm.shard="$mode" &&
      same_weights "$ranks ranks, $name, $mode" "${name}_none" "${name}_$mode"
  done
}
for variant in "${variants[@]}"; do
  read -r name sets <<< "$variant"
  # shellcheck disable=SC2086
  compare "$name" 2 gpt.yaml $sets
done
grep -q "reduce-scatter + all-gather" "$WORK/adamw_optimizer.log" ||
  fail "the sharded run's log does not say how it communicates: $(grep algo "$WORK/adamw_optimizer.log")"
compare sgd 2 mlp.yaml
compare lion 2 mlp.yaml --set "optimizer={name: lion, lr: 0.002, weight_decay: 0.5, clip_grad_norm: 0.3}"
# Recomputed blocks with evaluations between steps (every rank gathers the weights with the
# others in each evaluation forward): the same weights and the same test figures.
compare recompute 2 gpt.yaml --set model.recompute=blocks --set train.eval_every_iterations=7
cut -d, -f1,2,4- "$WORK/recompute_none/accuracy.csv" > "$WORK/acc_none.csv"
cut -d, -f1,2,4- "$WORK/recompute_parameters/accuracy.csv" > "$WORK/acc_parameters.csv"
cmp -s "$WORK/acc_none.csv" "$WORK/acc_parameters.csv" ||
  fail "the sharded weights evaluate otherwise: $(diff "$WORK/acc_none.csv" "$WORK/acc_parameters.csv" | head -4)"

# Pipe-SGD's stale all-reduce split the same way (optimizer and gradients: its deepest mode),
# K = 2 with segments; `parameters` is refused naming the key.
pipe=(--set "algorithm={name: pipe_sgd, K: 2, segments: 3}")
run pipe_none 2 gpt.yaml "${pipe[@]}" && for mode in optimizer gradients; do
  run "pipe_$mode" 2 gpt.yaml "${pipe[@]}" --set algorithm.shard=$mode &&
    same_weights "pipe_sgd, $mode" pipe_none "pipe_$mode"
done
"$DTRAIN" --config "$WORK/gpt.yaml" --set "algorithm={name: pipe_sgd, shard: parameters}" \
  --dry-run > "$WORK/pipe_p.log" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q "algorithm.shard" "$WORK/pipe_p.log" ||
  fail "pipe_sgd with shard: parameters: exit $status, $(tail -2 "$WORK/pipe_p.log")"

# 4 ranks: both over the ring (a codec), accumulation on; AdamW and SGD with momentum.
compare q8 4 gpt.yaml --set compression.name=quantize8 --set train.accumulation_steps=2
compare sgd_q8 4 mlp.yaml --set compression.name=quantize8 --set train.accumulation_steps=2

# Resumed from its checkpoints (after epoch 1 and within epoch 2), bit for bit, in each mode
# (sharding the weights, each rank's file holds its pieces of them).
for mode in "${MODES[@]}"; do
  ck=(--set algorithm.shard=$mode --set "checkpoint={every_epochs: 1, every_iterations: 7, keep: 100}")
  run "ck_$mode" 2 mlp.yaml "${ck[@]}" || continue
  mid=$(cd "$WORK/ck_$mode/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  for from in epoch-0001 $mid; do
    copy="$WORK/ck_$mode.from.$from"
    rm -rf "$copy"; cp -r "$WORK/ck_$mode" "$copy"
    $TOOL rewind "$copy" "$from"
    mpirun -np 2 "$DTRAIN" --config "$WORK/mlp.yaml" "${ck[@]}" --resume "$copy" --progress none \
      > "$copy.log" 2>&1 || { fail "$mode: resume from $from: $(tail -3 "$copy.log")"; continue; }
    $TOOL same "$WORK/ck_$mode" "$copy" > "$WORK/same.txt" ||
      fail "$mode: resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
  done
  # The same checkpoint read by an unsharded run: refused, naming the key.
  copy="$WORK/ck_$mode.unsharded"
  rm -rf "$copy"; cp -r "$WORK/ck_$mode" "$copy"
  $TOOL rewind "$copy" epoch-0001
  mpirun -np 2 "$DTRAIN" --config "$WORK/mlp.yaml" --set "${ck[3]}" --resume "$copy" \
    --progress none > "$copy.log" 2>&1
  status=$?
  [ "$status" -eq 2 ] && grep -q "algorithm.shard" "$copy.log" ||
    fail "$mode: an unsharded resume of a sharded checkpoint: exit $status, $(tail -2 "$copy.log")"
done

# Memory: a model whose AdamW state dominates (eight 1024-wide layers, 8.4 M parameters: 134 MB
# of state unsharded on 2 ranks) — each rank's peak resident memory (run.yaml) falls with the
# mode, and by at least half of what the dry run's table predicts against none.
cat > "$WORK/deep.yaml" <<'YAML'
name: shard_deep
seed: 4
model:
  layers:
    - {type: flatten}
    - {name: fc1, type: linear, out_features: 1024}
    - {name: fc2, type: linear, out_features: 1024}
    - {name: fc3, type: linear, out_features: 1024}
    - {name: fc4, type: linear, out_features: 1024}
    - {name: fc5, type: linear, out_features: 1024}
    - {name: fc6, type: linear, out_features: 1024}
    - {name: fc7, type: linear, out_features: 1024}
    - {name: fc8, type: linear, out_features: 1024}
    - {name: head, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 32, 32], classes: 4, train_size: 64, test_size: 16, batch_size: 8}
algorithm: {name: sync, segments: 8}
optimizer: {name: adamw, lr: 0.001}
train: {epochs: 1, max_iterations: 3, eval_every_iterations: 0}
YAML
predicted() {  # the dry run's total for 2 ranks with algorithm.shard=$1
  "$DTRAIN" --config "$WORK/deep.yaml" --dry-run --ranks 2 --set algorithm.shard="$1" 2>&1 |
    awk '$1 == "total" { print $NF; exit }'
}
peak() {  # the larger rank's peak resident bytes of the run in $WORK/$1
  /usr/bin/python3 - "$WORK/$1/run.yaml" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1]).read().replace("\n# how", "\n---\n# how")))
print(max(docs[-1]["memory"]["peak_rss_bytes"]))
PY
}
if run deep_none 2 deep.yaml; then
  before=$(peak deep_none)
  for mode in "${MODES[@]}"; do
    run "deep_$mode" 2 deep.yaml --set algorithm.shard="$mode" || continue
    saving=$(($(predicted none) - $(predicted "$mode")))
    now=$(peak "deep_$mode")
    measured=$(($(peak deep_none) - now))
    [ "$saving" -gt 25000000 ] || fail "memory, $mode: the table predicts a saving of only $saving bytes"
    [ "$measured" -gt $((saving / 2)) ] ||
      fail "memory, $mode: peak RSS fell by $measured bytes; the table predicts $saving"
    [ "$now" -lt "$before" ] || fail "memory, $mode: peak RSS $now is not below the previous mode's $before"
    before=$now
    echo "memory, $mode: predicted saving $saving bytes a rank, measured $measured"
  done
fi

# Recomputation where it cannot be exact: refused, naming the key.
for algorithm in "{name: sapipe, stale_layers: 1, compensation: none}" "{name: pipedream}"; do
  mpirun -np 2 "$DTRAIN" --config "$WORK/gpt.yaml" --set "algorithm=$algorithm" \
    --set optimizer="{name: sgd, lr: 0.01}" --set model.recompute=blocks --out "$WORK/rc" \
    --progress none > "$WORK/rc.log" 2>&1
  status=$?
  [ "$status" -eq 2 ] && grep -q "model.recompute" "$WORK/rc.log" ||
    fail "$algorithm with recompute: exit $status, $(grep -m1 error "$WORK/rc.log")"
done

# `shard` is sync's: an algorithm with a model per rank refuses it, naming the key.
"$DTRAIN" --config "$WORK/mlp.yaml" --set "algorithm={name: local_sgd, shard: optimizer}" \
  --dry-run > "$WORK/local.log" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q "algorithm.shard" "$WORK/local.log" ||
  fail "local_sgd with shard: exit $status, $(tail -2 "$WORK/local.log")"
finish
