#!/usr/bin/env bash
# Lion end to end, as AdamW is tested: on two ranks every one of the nine algorithms trains with
# it (the training loss of the last epoch below 0.8 of the first's); its checkpoint holds its one
# moment (optimizer.m, no optimizer.v) and no step count; sync with a clip resumed from its
# checkpoints (after epoch 1, and within epoch 2) ends with the uninterrupted run's weights and
# moment bit for bit.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
MPI=(mpirun -np 2 --oversubscribe)

cat > "$WORK/base.yaml" <<'YAML'
name: lion
seed: 3
model:
  layers:
    - {type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {type: relu}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {name: lion, lr: 0.002, weight_decay: 0.5, clip_grad_norm: 1.0, schedule: {name: cosine, min_lr: 0.0002, warmup_iterations: 5}}
train: {epochs: 2, max_iterations: 35, eval_every_iterations: 10}
checkpoint: {every_epochs: 1, every_iterations: 7, keep: 100}
YAML

# Sync, resumed: the state is the weights and Lion's moment.
run="$WORK/sync"
"${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" --out "$run" --progress none > "$run.log" 2>&1 ||
  fail "sync: the run failed: $(tail -3 "$run.log")"
state=$($TOOL state "$run")
grep -q "optimizer.m" <<< "$state" || fail "sync: no optimizer.m in the checkpoint: $state"
grep -qE "optimizer\.(v|step)" <<< "$state" && fail "sync: Lion's checkpoint holds more than m: $state"
mid=$(cd "$run/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
[ -n "$mid" ] || fail "sync: no checkpoint within epoch 2"
for from in epoch-0001 $mid; do
  copy="$run.from.$from"
  rm -rf "$copy"; cp -r "$run" "$copy"
  $TOOL rewind "$copy" "$from"
  "${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" --resume "$copy" --progress none \
    > "$copy.log" 2>&1 || { fail "sync from $from: $(tail -3 "$copy.log")"; continue; }
  $TOOL same "$run" "$copy" > "$WORK/same.txt" ||
    fail "sync resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
done

# Every algorithm learns with Lion.
for algorithm in "{name: sync, segments: 2}" "{name: ps_sync}" "{name: pipe_sgd, K: 2}" \
  "{name: local_sgd, sync_period: 3}" "{name: gossip}" "{name: d_psgd, topology: ring}" \
  "{name: hpsgd, sync_period: 2}" "{name: sapipe, stale_layers: 1, compensation: wp1}" \
  "{name: pipedream, stages: [fc2]}"; do
  name=$(sed 's/{name: \([a-z_]*\).*/\1/' <<< "$algorithm")
  out="$WORK/learns_$name"
  "${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" \
    --set train.epochs=4 --set train.max_iterations=0 --set train.eval_every_iterations=0 \
    --set checkpoint=null --out "$out" --progress none > "$out.log" 2>&1 ||
    { fail "$name with Lion: $(tail -3 "$out.log")"; continue; }
  check_learns "$name with Lion" "$out"
done

finish
