#!/usr/bin/env bash
# Checkpoints and --resume. For every algorithm that is deterministic on 2 ranks: a
# run resumed from its checkpoint after epoch 1 of 2, and from one in the middle of epoch 2,
# ends with the same training state as the uninterrupted run, bit for bit (every buffer and
# counter of the newest checkpoint: weights, momentum or AdamW's moments and step count,
# gradients in flight, the algorithm's own), with SGD and with AdamW, and its accuracy.csv / timing.csv continue without a duplicated or missing row. Gossip
# (timing-dependent) resumes and finishes. Then the failures: a damaged checkpoint is named and
# skipped, a rank killed while it writes leaves the previous one in use, another config or
# another number of ranks is exit 2 naming why; the output-folder rule.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
MPI="mpirun -np 2 --oversubscribe"

cat > "$WORK/base.yaml" <<'YAML'
name: resume
seed: 3
model:
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {name: relu, type: relu}
    - {name: drop, type: dropout, p: 0.2}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.0001, schedule: {name: step, every_epochs: 1, gamma: 0.5}}
train: {epochs: 2}
checkpoint: {every_epochs: 1, every_iterations: 7, keep: 100}
YAML

# Resumes a copy of RUN from its checkpoint FOLDER (the newer ones removed) into COPY.
resume_copy() {  # RUN FOLDER COPY SETS...
  local run=$1 folder=$2 copy=$3; shift 3
  rm -rf "$copy"; cp -r "$run" "$copy"
  $TOOL rewind "$copy" "$folder"
  $MPI "$DTRAIN" --config "$WORK/base.yaml" "$@" --resume "$copy" --progress none > "$copy.log" 2>&1
}

check_algorithm() {  # NAME ALGORITHM-MAP [--set ...]
  local name=$1 algorithm=$2; shift 2
  local run="$WORK/$name"
  $MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" "$@" --out "$run" \
    --progress none > "$run.log" 2>&1 || { fail "$name: the run failed: $(tail -3 "$run.log")"; return; }
  # After epoch 1, and 7 iterations into epoch 2 (iterations count over the run: 20 an epoch).
  local mid; mid=$(cd "$run/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  for from in epoch-0001 "$mid"; do
    resume_copy "$run" "$from" "$run.from.$from" --set "algorithm=$algorithm" "$@" ||
      { fail "$name from $from: $(tail -3 "$run.from.$from.log")"; continue; }
    grep -q "resuming" "$run.from.$from.log" || fail "$name from $from: no 'resuming' line"
    $TOOL same "$run" "$run.from.$from" > "$WORK/same.txt" ||
      fail "$name resumed from $from differs from the uninterrupted run: $(cat "$WORK/same.txt")"
    # The rows without the clocks: accuracy.csv's wall_s; timing.csv's rank, epoch, iterations.
    local csv fields
    for csv in accuracy.csv:1,2,4- timing.csv:1-3; do
      fields=${csv#*:} csv=${csv%:*}
      diff <(cut -d, -f"$fields" "$run/$csv") <(cut -d, -f"$fields" "$run.from.$from/$csv") > "$WORK/rows.txt" ||
        fail "$name from $from: $csv's rows differ: $(head -4 "$WORK/rows.txt")"
    done
  done
}

check_algorithm sync "{name: sync, segments: 2}"
check_algorithm ps_sync "{name: ps_sync}"
check_algorithm pipe_sgd "{name: pipe_sgd, K: 2}"
check_algorithm sapipe "{name: sapipe, stale_layers: 1, compensation: wp3}"
check_algorithm pipedream "{name: pipedream, stages: [fc2]}"
check_algorithm local_sgd "{name: local_sgd, sync_period: 3}"
check_algorithm d_psgd "{name: d_psgd, topology: ring}"
check_algorithm hpsgd "{name: hpsgd, sync_period: 2}" --set optimizer.momentum=0

# AdamW: its moments and step count travel in every algorithm's checkpoint, bit for bit.
ADAMW=(--set "optimizer={name: adamw, lr: 0.01, weight_decay: 0.1, schedule: {name: step, every_epochs: 1, gamma: 0.5}}")
check_algorithm sync_adamw "{name: sync, segments: 2}" "${ADAMW[@]}"
check_algorithm ps_sync_adamw "{name: ps_sync}" "${ADAMW[@]}"
check_algorithm pipe_sgd_adamw "{name: pipe_sgd, K: 2}" "${ADAMW[@]}"
check_algorithm sapipe_adamw "{name: sapipe, stale_layers: 1, compensation: wp3}" "${ADAMW[@]}"
check_algorithm pipedream_adamw "{name: pipedream, stages: [fc2]}" "${ADAMW[@]}"
check_algorithm local_sgd_adamw "{name: local_sgd, sync_period: 3}" "${ADAMW[@]}"
check_algorithm d_psgd_adamw "{name: d_psgd, topology: ring}" "${ADAMW[@]}"
check_algorithm hpsgd_adamw "{name: hpsgd, sync_period: 2}" "${ADAMW[@]}"

# Gossip and the automatic choices depend on timing: a resumed run continues and finishes with
# every epoch's row.
for timed in "gossip {name: gossip}" "hpsgd_auto {name: hpsgd, sync_period: auto}" \
             "sapipe_auto {name: sapipe, stale_layers: auto}"; do
  name=${timed%% *} algorithm=${timed#* }
  $MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" --set optimizer.momentum=0 \
    --out "$WORK/$name" --progress none > "$WORK/$name.log" 2>&1 || { fail "$name: $(tail -3 "$WORK/$name.log")"; continue; }
  mid=$(cd "$WORK/$name/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  resume_copy "$WORK/$name" "$mid" "$WORK/$name.resumed" --set "algorithm=$algorithm" \
    --set optimizer.momentum=0 || fail "$name resumed: $(tail -3 "$WORK/$name.resumed.log")"
  [ "$(wc -l < "$WORK/$name.resumed/accuracy.csv")" = 3 ] || fail "$name resumed: accuracy.csv $(cat "$WORK/$name.resumed/accuracy.csv")"
done

# SIGTERM to rank 0 mid-run, for the pipelined and the periodically averaging algorithms: exit
# 143 with a checkpoint where the ranks agreed to stop; --resume ends where the uninterrupted
# run ends, bit for bit. The signalled run is asked for far more epochs than it can reach, so
# only the signal ends it however fast the machine; where it stopped (its newest checkpoint)
# sets the length of the resumed run and of the uninterrupted run it is compared with.
rank0_pid() {  # the dtrain process of rank 0 writing into $1
  for p in $(pgrep -f -- "--out $1"); do
    grep -qa "OMPI_COMM_WORLD_RANK=0" "/proc/$p/environ" 2>/dev/null && echo "$p" && return
  done
  return 1
}
# Epoch 2 done on both ranks (header + 4 rows): a checkpoint exists (rows only grow, folders rotate).
two_epochs_done() { [ "$({ wc -l < "$1/timing.csv"; } 2>/dev/null || echo 0)" -ge 5 ]; }
for signalled in "pipe_sgd {name: pipe_sgd, K: 2}" "local_sgd {name: local_sgd, sync_period: 3}" \
                 "hpsgd {name: hpsgd, sync_period: 2}"; do
  name=${signalled%% *} algorithm=${signalled#* }
  sets=(--set "algorithm=$algorithm" --set optimizer.momentum=0
        --set "checkpoint={every_epochs: 1, keep: 2}")
  $MPI "$DTRAIN" --config "$WORK/base.yaml" "${sets[@]}" --set train.epochs=100000 \
    --out "$WORK/$name.sig" --progress none > "$WORK/$name.sig.log" 2>&1 &
  job=$!
  wait_until $job two_epochs_done "$WORK/$name.sig"
  kill -TERM "$(wait_until $job rank0_pid "$WORK/$name.sig")" 2>/dev/null
  wait $job; code=$?
  [ $code = 143 ] || { fail "$name SIGTERM: exit $code, expected 143: $(tail -3 "$WORK/$name.sig.log")"; continue; }
  grep -q "SIGTERM: stopping at" "$WORK/$name.sig.log" || fail "$name SIGTERM: no stop line"
  # Stopped in epoch E + 1 (E epochs done): both runs end after epoch E + 2.
  done_epochs=$(sed -n 's/^epoch: //p' "$($TOOL newest "$WORK/$name.sig")/manifest.yaml")
  epochs=$((done_epochs + 2))
  echo "$name: stopped by SIGTERM, checkpoint $(sed -n 's/^point: //p' "$($TOOL newest "$WORK/$name.sig")/manifest.yaml"); compared after epoch $epochs"
  $MPI "$DTRAIN" --config "$WORK/base.yaml" "${sets[@]}" --set train.epochs=$epochs \
    --out "$WORK/$name.whole" --progress none > "$WORK/$name.whole.log" 2>&1 ||
    { fail "$name uninterrupted: $(tail -3 "$WORK/$name.whole.log")"; continue; }
  $MPI "$DTRAIN" --config "$WORK/base.yaml" "${sets[@]}" --set train.epochs=$epochs \
    --resume "$WORK/$name.sig" --progress none > "$WORK/$name.resume.log" 2>&1 ||
    { fail "$name resume: $(tail -3 "$WORK/$name.resume.log")"; continue; }
  $TOOL same "$WORK/$name.whole" "$WORK/$name.sig" > "$WORK/same.txt" ||
    fail "$name stopped by SIGTERM and resumed differs: $(cat "$WORK/same.txt")"
done

# More epochs than the checkpoint's run had: train.epochs may change.
sync="$WORK/sync"
resume_copy "$sync" epoch-0002 "$WORK/longer" --set "algorithm={name: sync, segments: 2}" --set train.epochs=3 ||
  fail "train.epochs 2 -> 3: $(tail -3 "$WORK/longer.log")"
[ "$(wc -l < "$WORK/longer/accuracy.csv")" = 4 ] || fail "train.epochs 2 -> 3: $(cat "$WORK/longer/accuracy.csv")"

# A damaged byte in the newest checkpoint: named in the log, the one before is used.
rm -rf "$WORK/damaged"; cp -r "$sync" "$WORK/damaged"
newest=$($TOOL newest "$WORK/damaged")
/usr/bin/python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
" "$newest/rank-00001.bin"
$MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm={name: sync, segments: 2}" --resume "$WORK/damaged" \
  --progress none > "$WORK/damaged.log" 2>&1 || fail "damaged: $(tail -3 "$WORK/damaged.log")"
grep -q "$(basename "$newest")/rank-00001.bin: '[a-z._]*' fails its checksum" "$WORK/damaged.log" ||
  fail "damaged: the damaged buffer is not named: $(cat "$WORK/damaged.log")"
grep -q "checkpoint .*$(basename "$newest") is damaged on 1 rank(s): skipped" "$WORK/damaged.log" ||
  fail "damaged: not skipped: $(cat "$WORK/damaged.log")"
$TOOL same "$sync" "$WORK/damaged" > "$WORK/same.txt" || fail "damaged: the resumed run differs: $(cat "$WORK/same.txt")"

# A rank killed while it writes a checkpoint (after its temporary file): the job ends, the
# previous checkpoint stays intact and --resume finishes the run as if nothing happened.
cat > "$WORK/kill.yaml" <<YAML
$(grep -v '^checkpoint' "$WORK/base.yaml")
checkpoint: {every_epochs: 1, keep: 2}
algorithm: {name: sync, segments: 2}
YAML
DTRAIN_TEST_KILL_IN_CHECKPOINT=1 $MPI "$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=3 \
  --out "$WORK/killed" --progress none > "$WORK/killed.log" 2>&1 && fail "killed: the job did not fail"
ls "$WORK/killed/checkpoints"/*/manifest.yaml > /dev/null 2>&1 && fail "killed: a checkpoint was finished: $(ls -R "$WORK/killed/checkpoints")"
ls "$WORK/killed/checkpoints"/*/rank-00001.bin.tmp > /dev/null 2>&1 || fail "killed: no temporary file was left"
# Killed at its second checkpoint: the first one is used.
$MPI "$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=3 --out "$WORK/whole" --progress none \
  > "$WORK/whole.log" 2>&1 || fail "whole: $(tail -3 "$WORK/whole.log")"
DTRAIN_TEST_KILL_IN_CHECKPOINT=1 DTRAIN_TEST_KILL_AT_CHECKPOINT=2 $MPI "$DTRAIN" --config "$WORK/kill.yaml" \
  --set train.epochs=3 --out "$WORK/killed2" --progress none > "$WORK/killed2.log" 2>&1 && fail "killed2: the job did not fail"
$MPI "$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=3 --resume "$WORK/killed2" --progress none \
  > "$WORK/resumed2.log" 2>&1 || fail "resumed after the kill: $(tail -3 "$WORK/resumed2.log")"
grep -q "resuming after epoch 1" "$WORK/resumed2.log" || fail "resumed after the kill: $(grep resuming "$WORK/resumed2.log")"
$TOOL same "$WORK/whole" "$WORK/killed2" > "$WORK/same.txt" || fail "resumed after the kill differs: $(cat "$WORK/same.txt")"

# Another config (a key that matters), another number of ranks: exit 2, saying why.
$MPI "$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=3 --set optimizer.lr=0.1 --resume "$WORK/whole" \
  > "$WORK/other.log" 2>&1; code=$?
[ $code = 2 ] || fail "another config: exit $code"
grep -q "differs from the checkpoint's .* at \`optimizer.lr\`" "$WORK/other.log" || fail "another config: $(cat "$WORK/other.log")"
mpirun -np 3 --oversubscribe "$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=3 --resume "$WORK/whole" \
  > "$WORK/ranks.log" 2>&1; code=$?
[ $code = 2 ] || fail "another number of ranks: exit $code"
grep -q "was written by 2 rank(s), this job has 3" "$WORK/ranks.log" || fail "another number of ranks: $(cat "$WORK/ranks.log")"

# The output folder: a second run into it is refused and changes nothing; --overwrite replaces.
before=$(md5sum "$WORK/whole/accuracy.csv")
"$DTRAIN" --config "$WORK/kill.yaml" --out "$WORK/whole" > "$WORK/again.log" 2>&1; code=$?
[ $code = 2 ] || fail "a second run into a folder with results: exit $code"
grep -q "output folder $WORK/whole already holds a run's results (accuracy.csv, timing.csv, config.yaml, run.yaml, model.safetensors, checkpoints): continue it with --resume $WORK/whole, write elsewhere with --out DIR, or replace it with --overwrite" "$WORK/again.log" ||
  fail "second run: $(cat "$WORK/again.log")"
[ "$(md5sum "$WORK/whole/accuracy.csv")" = "$before" ] || fail "second run: accuracy.csv changed"
echo mine > "$WORK/whole/notes.txt"  # not a result: --overwrite leaves it
# --overwrite with a config that fails to build (no such dataset folder): nothing is deleted.
"$DTRAIN" --config "$WORK/kill.yaml" --set "dataset={name: mnist, path: $WORK/no_such_folder}" \
  --out "$WORK/whole" --overwrite > "$WORK/over_bad.log" 2>&1; code=$?
[ $code = 2 ] || fail "--overwrite with a bad dataset: exit $code"
[ "$(md5sum "$WORK/whole/accuracy.csv")" = "$before" ] || fail "--overwrite with a bad dataset deleted the results"
"$DTRAIN" --config "$WORK/kill.yaml" --set train.epochs=1 --out "$WORK/whole" --overwrite > "$WORK/over.log" 2>&1 ||
  fail "--overwrite: $(tail -3 "$WORK/over.log")"
[ "$(wc -l < "$WORK/whole/accuracy.csv")" = 2 ] || fail "--overwrite: $(cat "$WORK/whole/accuracy.csv")"
[ "$(ls "$WORK/whole/checkpoints")" = epoch-0001 ] || fail "--overwrite kept old checkpoints: $(ls "$WORK/whole/checkpoints")"
[ "$(cat "$WORK/whole/notes.txt")" = mine ] || fail "--overwrite removed a file that is not a result"
"$DTRAIN" --config "$WORK/kill.yaml" --resume "$WORK/nothing_here" > "$WORK/none.log" 2>&1; code=$?
[ $code = 2 ] || fail "--resume of a folder without checkpoints: exit $code"
finish
