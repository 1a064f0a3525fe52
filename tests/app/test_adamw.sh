#!/usr/bin/env bash
# AdamW end to end: a run resumed from its checkpoints (after epoch 1, and within epoch 2) ends
# with the uninterrupted run's state bit for bit (weights, AdamW's moments and step count), on
# one rank and on two ranks of sync with the gradient clipped; a clip that never bites equals no
# clip, bit for bit (and sapipe with wp3, clipped, on two ranks); accuracy.csv has a row every
# train.eval_every_iterations and at the end; sync on 2 ranks with AdamW learns.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"

cat > "$WORK/base.yaml" <<'YAML'
name: adamw
seed: 3
model:
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {name: relu, type: relu}
    - {name: drop, type: dropout, p: 0.2}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {name: adamw, lr: 0.01, schedule: {name: cosine, min_lr: 0.001, warmup_iterations: 5}}
train: {epochs: 2, max_iterations: 35, eval_every_iterations: 10}
checkpoint: {every_epochs: 1, every_iterations: 7, keep: 100}
YAML

check_resume() {  # NAME LAUNCHER... -- SETS...
  local name=$1; shift
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  local run="$WORK/$name"
  "${launch[@]}" "$DTRAIN" --config "$WORK/base.yaml" "$@" --out "$run" --progress none \
    > "$run.log" 2>&1 || { fail "$name: the run failed: $(tail -3 "$run.log")"; return; }
  # Rows at iterations 10, 20 (epoch 1's end), 30 and 35 (the budget's end), one each.
  local iterations; iterations=$(tail -n +2 "$run/accuracy.csv" | cut -d, -f2 | tr '\n' ' ')
  [ "$iterations" = "10 20 30 35 " ] || fail "$name: accuracy.csv's iterations are '$iterations'"
  $TOOL state "$run" | grep -q "optimizer.step" || fail "$name: no optimizer.step in the checkpoint"
  # After epoch 1, and 7 iterations into epoch 2 (20 an epoch).
  local mid; mid=$(cd "$run/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  for from in epoch-0001 "$mid"; do
    local copy="$run.from.$from"
    rm -rf "$copy"; cp -r "$run" "$copy"
    $TOOL rewind "$copy" "$from"
    "${launch[@]}" "$DTRAIN" --config "$WORK/base.yaml" "$@" --resume "$copy" --progress none \
      > "$copy.log" 2>&1 || { fail "$name from $from: $(tail -3 "$copy.log")"; continue; }
    $TOOL same "$run" "$copy" > "$WORK/same.txt" ||
      fail "$name resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
    diff <(cut -d, -f1,2,4- "$run/accuracy.csv") <(cut -d, -f1,2,4- "$copy/accuracy.csv") \
      > "$WORK/rows.txt" || fail "$name from $from: accuracy.csv differs: $(head -4 "$WORK/rows.txt")"
  done
}

check_resume one_rank env --
check_resume sync_clipped mpirun -np 2 --oversubscribe -- --set optimizer.clip_grad_norm=0.5
# SAPipe keeps a gradient in flight, the predicted weights in the model and the master apart.
check_resume sapipe_wp3_clipped mpirun -np 2 --oversubscribe -- --set optimizer.clip_grad_norm=0.5 \
  --set "algorithm={name: sapipe, stale_layers: 1, compensation: wp3}"

# One rank: a clip that never bites takes the whole-gradient path, yet updates exactly as the
# per-layer steps during backward do; a clip that bites changes the run.
for clip in 1e9 0.01; do
  "$DTRAIN" --config "$WORK/base.yaml" --set optimizer.clip_grad_norm=$clip \
    --out "$WORK/clip_$clip" --progress none > "$WORK/clip_$clip.log" 2>&1 ||
    fail "clip $clip: $(tail -3 "$WORK/clip_$clip.log")"
done
$TOOL same "$WORK/one_rank" "$WORK/clip_1e9" > "$WORK/same.txt" ||
  fail "a clip that never bites changed the run: $(cat "$WORK/same.txt")"
$TOOL same "$WORK/one_rank" "$WORK/clip_0.01" > /dev/null && fail "a clip of 0.01 changed nothing"

# Sync on 2 ranks with AdamW learns: the training loss of the last epoch is below the first's.
mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/base.yaml" --set train.epochs=4 \
  --set train.max_iterations=0 --set train.eval_every_iterations=0 --set checkpoint=null \
  --out "$WORK/learns" --progress none > "$WORK/learns.log" 2>&1 ||
  fail "learns: $(tail -3 "$WORK/learns.log")"
check_learns "sync with AdamW" "$WORK/learns"

finish
