#!/usr/bin/env bash
# How a run ended, for job scripts: run.yaml's status block after a completed run, a run stopped
# by SIGTERM (rank 0 of 2, with its checkpoint) and a failed one (diverged), as docs/reliability.md's
# requeue script reads it. The output folder's ways out: --resume only where a checkpoint is.
# --resume DIR without --config (DIR/config.yaml), the learning-rate note of a longer resume.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun -np 2 --oversubscribe"
PY=/usr/bin/python3
cat > "$WORK/run.yaml.cfg" <<'YAML'
name: status
model: {name: mlp, hidden: [16]}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {lr: 0.05, schedule: {name: cosine}}
train: {epochs: 2}
checkpoint: {every_epochs: 1, keep: 2}
YAML
CFG="$WORK/run.yaml.cfg"
# KEY of DIR/run.yaml ('last_iteration.epoch' for a nested one, 'resolved.algorithm.segments'
# for a key with dots), as a job script reads it.
field() {
  $PY -c "
import sys, yaml
v = yaml.safe_load(open(sys.argv[1] + '/run.yaml'))
keys = sys.argv[2]
while keys not in v:  # a key with dots (resolved's 'algorithm.segments') is taken whole
    head, _, keys = keys.partition('.')
    v = v[head]
v = v[keys]
print(v)" "$1" "$2"
}

# Completed: status completed, the last iteration, the newest checkpoint; the record's keys stay.
"$DTRAIN" --config "$CFG" --out "$WORK/done" --progress none > "$WORK/done.log" 2>&1 ||
  fail "completed run: $(tail -3 "$WORK/done.log")"
[ "$(field "$WORK/done" status)" = completed ] || fail "completed: $(tail -6 "$WORK/done/run.yaml")"
[ "$(field "$WORK/done" last_iteration.epoch)" = 2 ] || fail "completed: last_iteration $(grep last_iteration "$WORK/done/run.yaml")"
[ "$(field "$WORK/done" last_iteration.iterations)" = 40 ] || fail "completed: iterations $(grep last_iteration "$WORK/done/run.yaml")"
[ "$(field "$WORK/done" checkpoint)" = "$WORK/done/checkpoints/epoch-0002" ] || fail "completed: checkpoint $(grep checkpoint "$WORK/done/run.yaml")"
[ "$(field "$WORK/done" world_size)" = 1 ] || fail "completed: the record's world_size is gone"
grep -q "^reason:" "$WORK/done/run.yaml" && fail "completed: a reason"

# The ways out: --resume where a checkpoint is, not where none is.
"$DTRAIN" --config "$CFG" --out "$WORK/done" > "$WORK/again.log" 2>&1; code=$?
[ $code = 2 ] || fail "a second run into a folder with a checkpoint: exit $code"
grep -q "continue it with --resume $WORK/done, write elsewhere with --out DIR, or replace it with --overwrite" "$WORK/again.log" ||
  fail "with a checkpoint: $(cat "$WORK/again.log")"
"$DTRAIN" --config "$CFG" --set checkpoint=null --set train.epochs=1 --out "$WORK/plain" --progress none > "$WORK/plain.log" 2>&1 ||
  fail "run without checkpoints: $(tail -3 "$WORK/plain.log")"
[ "$(field "$WORK/plain" checkpoint)" = None ] || fail "no checkpoint: $(grep checkpoint "$WORK/plain/run.yaml")"
"$DTRAIN" --config "$CFG" --out "$WORK/plain" > "$WORK/again.log" 2>&1; code=$?
[ $code = 2 ] || fail "a second run into a folder without a checkpoint: exit $code"
grep -q "already holds a run's results (accuracy.csv, timing.csv, config.yaml, run.yaml, model.safetensors) and no checkpoint to continue from: write elsewhere with --out DIR, or replace it with --overwrite" "$WORK/again.log" ||
  fail "without a checkpoint: $(cat "$WORK/again.log")"
grep -q -- "--resume" "$WORK/again.log" && fail "without a checkpoint, --resume is suggested: $(cat "$WORK/again.log")"

# --resume DIR without --config: DIR/config.yaml; a longer cosine schedule says how the rate
# jumps (after epoch 2 of 2 it was 0; of 3 epochs: 0.05 · (1 + cos(2π/3)) / 2 = 0.0125).
cp -r "$WORK/done" "$WORK/longer"
"$DTRAIN" --resume "$WORK/longer" --set train.epochs=3 --progress none > "$WORK/longer.log" 2>&1 ||
  fail "--resume without --config: $(tail -3 "$WORK/longer.log")"
grep -q "train.epochs 2 -> 3: the cosine schedule now spans 3 epochs: the learning rate jumps from 0 to 0.0125 (after epoch 2)" "$WORK/longer.log" ||
  fail "no lr note: $(grep -E "resuming|train.epochs" "$WORK/longer.log")"
[ "$(grep -c "the learning rate" "$WORK/longer.log")" = 1 ] || fail "the lr note is not logged once"
[ "$(wc -l < "$WORK/longer/accuracy.csv")" = 4 ] || fail "--resume without --config: $(cat "$WORK/longer/accuracy.csv")"
[ "$(field "$WORK/longer" status)" = completed ] || fail "resumed: $(tail -6 "$WORK/longer/run.yaml")"
# A step schedule does not depend on train.epochs.
"$DTRAIN" --config "$CFG" --set "optimizer.schedule={name: step, every_epochs: 1, gamma: 0.5}" \
  --out "$WORK/step" --progress none > "$WORK/step.log" 2>&1 || fail "step run: $(tail -3 "$WORK/step.log")"
"$DTRAIN" --resume "$WORK/step" --set train.epochs=3 --progress none > "$WORK/step2.log" 2>&1 ||
  fail "step resumed: $(tail -3 "$WORK/step2.log")"
grep -q "train.epochs 2 -> 3: the step schedule does not depend on train.epochs: unchanged: the learning rate stays 0.0125 (after epoch 2)" "$WORK/step2.log" ||
  fail "step: $(grep -E "train.epochs" "$WORK/step2.log")"
# No DIR/config.yaml: exit 2, naming it.
mkdir -p "$WORK/bare/checkpoints"
"$DTRAIN" --resume "$WORK/bare" > "$WORK/bare.log" 2>&1; code=$?
[ $code = 2 ] || fail "--resume without config.yaml: exit $code"
grep -q "$WORK/bare/config.yaml" "$WORK/bare.log" || fail "--resume without config.yaml: $(cat "$WORK/bare.log")"

# Stopped: SIGTERM to rank 0 of 2 once the first checkpoint is written; the job is held by
# train.epochs=100000 until then. run.yaml: stopped, SIGTERM, a checkpoint that exists.
rank0_pid() {  # the dtrain process of rank 0 writing into $1
  for p in $(pgrep -f -- "--out $1"); do
    grep -qa "OMPI_COMM_WORLD_RANK=0" "/proc/$p/environ" 2>/dev/null && echo "$p" && return
  done
  return 1
}
checkpointed() { ls "$1"/checkpoints/*/manifest.yaml > /dev/null 2>&1; }
$MPI "$DTRAIN" --config "$CFG" --set train.epochs=100000 --out "$WORK/sig" --progress none > "$WORK/sig.log" 2>&1 &
job=$!
wait_until $job checkpointed "$WORK/sig"
kill -TERM "$(wait_until $job rank0_pid "$WORK/sig")" 2>/dev/null
wait $job; code=$?
[ $code = 143 ] || fail "SIGTERM: exit $code, expected 143: $(tail -3 "$WORK/sig.log")"
[ "$(field "$WORK/sig" status)" = stopped ] || fail "SIGTERM: $(tail -6 "$WORK/sig/run.yaml")"
[ "$(field "$WORK/sig" reason)" = SIGTERM ] || fail "SIGTERM: reason $(grep reason "$WORK/sig/run.yaml")"
stopped_at=$(field "$WORK/sig" checkpoint)
[ -f "$stopped_at/manifest.yaml" ] || fail "SIGTERM: the checkpoint '$stopped_at' is not there"
[ "$(field "$WORK/sig" last_iteration.iterations)" -gt 0 ] || fail "SIGTERM: $(grep last_iteration "$WORK/sig/run.yaml")"
# The requeue test of docs/reliability.md: a job script resumes a stopped run (and only a stopped one).
grep -q '^status: stopped$' "$WORK/sig/run.yaml" || fail "SIGTERM: the guide's grep misses: $(grep status "$WORK/sig/run.yaml")"
grep -q '^status: stopped$' "$WORK/done/run.yaml" && fail "completed: the guide's grep requeues it"

# A signal never lands on a compute thread: six SIGINTs to the default experiment (Fashion-MNIST's
# MLP, 3 epochs), each once the run has logged iteration 300, in the middle of its GEMMs; each a
# clean stop. A handler that ran on the compute thread corrupted the heap inside oneDNN about
# every second time (exit 134).
logged() { grep -q "iter 300/" "$1" 2>/dev/null; }
for try in 1 2 3 4 5 6; do
  "$DTRAIN" --config "$ROOT/configs/fashion_mlp_sync.yaml" --set train.epochs=3 \
    --set train.log_every_iterations=50 --progress log --out "$WORK/gemm$try" > "$WORK/gemm$try.log" 2>&1 &
  job=$!
  wait_until $job logged "$WORK/gemm$try.log"
  kill -INT $job 2>/dev/null
  wait $job; code=$?
  [ $code = 130 ] || fail "SIGINT $try to a CPU run: exit $code: $(tail -2 "$WORK/gemm$try.log")"
done

# Failed: a diverging run (every rank finds it; rank 0 reports and writes): exit 1, status
# failed with the error as the reason.
$MPI "$DTRAIN" --config "$CFG" --set optimizer.lr=1e12 --out "$WORK/nan" \
  --progress none > "$WORK/nan.log" 2>&1; code=$?
[ $code = 1 ] || fail "diverged: exit $code: $(tail -3 "$WORK/nan.log")"
[ "$(field "$WORK/nan" status)" = failed ] || fail "diverged: $(tail -6 "$WORK/nan/run.yaml")"
field "$WORK/nan" reason | grep -q "^training diverged: " || fail "diverged: reason $(grep reason "$WORK/nan/run.yaml")"
# Repeatable: what `auto` settled on is in run.yaml as keys to paste back. SAPipe's stale_layers
# (chosen from a profile during the run), sync's segments, the device; a pinned key is not listed.
$MPI "$DTRAIN" --config "$CFG" --set checkpoint=null --set train.epochs=1 \
  --set algorithm.name=sapipe --set algorithm.stale_layers=auto --set cluster.device=auto \
  --out "$WORK/auto" --progress none > "$WORK/auto.log" 2>&1 || fail "sapipe auto: $(tail -3 "$WORK/auto.log")"
k=$(field "$WORK/auto" resolved.algorithm.stale_layers 2>/dev/null) ||
  fail "sapipe auto: no resolved stale_layers: $(sed -n '/^resolved/,$p' "$WORK/auto/run.yaml")"
grep -q "sapipe: stale_layers auto → sapipe ($k of " "$WORK/auto.log" || fail "sapipe auto: run.yaml's k $k is not the log's: $(grep stale_layers "$WORK/auto.log")"
[ "$(field "$WORK/auto" resolved.cluster.device)" = cpu ] || fail "device auto: $(sed -n '/^resolved/,$p' "$WORK/auto/run.yaml")"
$MPI "$DTRAIN" --config "$CFG" --set checkpoint=null --set train.epochs=1 --set "algorithm={name: sync, segments: auto}" \
  --set cluster.device=cpu --out "$WORK/segs" --progress none > "$WORK/segs.log" 2>&1 || fail "sync auto: $(tail -3 "$WORK/segs.log")"
segs=$(field "$WORK/segs" resolved.algorithm.segments) || fail "sync auto: no resolved segments"
[ "$segs" -ge 1 ] || fail "sync auto: segments '$segs'"
grep -q "cluster.device" "$WORK/segs/run.yaml" && fail "a pinned cluster.device is listed as resolved"
# Pasted back, the run says the same.
$MPI "$DTRAIN" --config "$CFG" --set checkpoint=null --set train.epochs=1 --set "algorithm={name: sync, segments: $segs}" \
  --set cluster.device=cpu --out "$WORK/segs2" --progress none > "$WORK/segs2.log" 2>&1 || fail "sync pinned: $(tail -3 "$WORK/segs2.log")"
grep -q "segments" "$WORK/segs2/run.yaml" && fail "a pinned segments is listed as resolved"
[ "$(field "$WORK/segs" algorithm)" = "$(field "$WORK/segs2" algorithm)" ] || fail "pinned segments run differently: $(field "$WORK/segs2" algorithm)"
finish
