#!/usr/bin/env bash
# HPSGD and PipeDream with AdamW and a clip, end to end on two ranks: a run resumed from its
# checkpoints (after epoch 1, and within epoch 2) ends with the uninterrupted run's state bit for
# bit — HPSGD's global model, its optimizer state (w's) and the replica's, the accumulated and
# in-flight sums; PipeDream's stage weights and the stage's AdamW moments and step count — and
# each learns.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
MPI=(mpirun -np 2 --oversubscribe)

cat > "$WORK/base.yaml" <<'YAML'
name: adamw_hpsgd_pipedream
seed: 3
model:
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {name: relu, type: relu}
    - {name: drop, type: dropout, p: 0.2}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {name: adamw, lr: 0.01, clip_grad_norm: 0.5, schedule: {name: cosine, min_lr: 0.001, warmup_iterations: 5}}
train: {epochs: 2, max_iterations: 35, eval_every_iterations: 10}
checkpoint: {every_epochs: 1, every_iterations: 7, keep: 100}
YAML

check_resume() {  # NAME STATE_ENTRY -- SETS...
  local name=$1 entry=$2; shift 3
  local run="$WORK/$name"
  "${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" "$@" --out "$run" --progress none \
    > "$run.log" 2>&1 || { fail "$name: the run failed: $(tail -3 "$run.log")"; return; }
  $TOOL state "$run" | grep -q "$entry" || fail "$name: no $entry in the checkpoint"
  local mid; mid=$(cd "$run/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  [ -n "$mid" ] || fail "$name: no checkpoint within epoch 2"
  for from in epoch-0001 $mid; do
    local copy="$run.from.$from"
    rm -rf "$copy"; cp -r "$run" "$copy"
    $TOOL rewind "$copy" "$from"
    "${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" "$@" --resume "$copy" --progress none \
      > "$copy.log" 2>&1 || { fail "$name from $from: $(tail -3 "$copy.log")"; continue; }
    $TOOL same "$run" "$copy" > "$WORK/same.txt" ||
      fail "$name resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
    diff <(cut -d, -f1,2,4- "$run/accuracy.csv") <(cut -d, -f1,2,4- "$copy/accuracy.csv") \
      > "$WORK/rows.txt" || fail "$name from $from: accuracy.csv differs: $(head -4 "$WORK/rows.txt")"
  done
}

# A period of 2: the mid-epoch checkpoint (7 iterations in) holds a round in flight and an
# accumulated gradient.
check_resume hpsgd hpsgd.global_optimizer.step -- --set "algorithm={name: hpsgd, sync_period: 2}"
check_resume pipedream pipedream.stage.step -- --set "algorithm={name: pipedream, stages: [fc2]}"

# Each learns with AdamW: the training loss of the last epoch is below the first's.
for algorithm in "{name: hpsgd}" "{name: pipedream, stages: [fc2]}"; do
  out="$WORK/learns_${algorithm:7:5}"
  "${MPI[@]}" "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" \
    --set train.epochs=4 --set train.max_iterations=0 --set train.eval_every_iterations=0 \
    --set checkpoint=null --out "$out" --progress none > "$out.log" 2>&1 ||
    { fail "$algorithm learns: $(tail -3 "$out.log")"; continue; }
  check_learns "$algorithm" "$out"
done

finish
