#!/usr/bin/env bash
# Mixed precision end to end (cluster.precision: bf16): every algorithm trains a small CNN in
# bf16 on 2 ranks, and the deterministic ones resume from a checkpoint in the middle of epoch 2
# to the uninterrupted run's state bit for bit (weights, optimizer state, gradients in flight:
# all f32, as in an f32 run); --dry-run shows each activation's dtype, the casts and the planned
# activation bytes; PipeDream's stages exchange bf16 (half the bytes); a CPU without native bf16 is refused with exit 2 naming the key.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
MPI="mpirun -np 2 --oversubscribe"

if ! "$DTRAIN" --dry-run --config /dev/stdin --set cluster.precision=bf16 > "$WORK/probe.log" 2>&1 <<'YAML'
model: {name: mlp, hidden: [8]}
dataset: {name: synthetic, shape: [1, 4, 4], classes: 2, train_size: 8, test_size: 8, batch_size: 4}
YAML
then
  grep -q "no native bfloat16" "$WORK/probe.log" || fail "bf16 dry run: $(tail -3 "$WORK/probe.log")"
  echo "skipped: $(grep -o 'this CPU has no native bfloat16[^;]*' "$WORK/probe.log")"
  finish
  exit 0
fi

cat > "$WORK/base.yaml" <<'YAML'
name: bf16
seed: 3
model:
  layers:
    - {name: conv, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
    - {name: bn, type: batchnorm2d}
    - {name: relu, type: relu}
    - {name: pool, type: maxpool2d, kernel: 2}
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 24}
    - {name: relu1, type: relu}
    - {name: drop, type: dropout, p: 0.2}
    - {name: fc2, type: linear, out_features: 4}
dataset: {name: synthetic, shape: [3, 8, 8], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
cluster: {precision: bf16}
optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.0001}
train: {epochs: 2}
checkpoint: {every_epochs: 1, every_iterations: 7, keep: 100}
YAML

# --dry-run: the dtype column, the casts at the model's ends, half the activation bytes.
"$DTRAIN" --config "$WORK/base.yaml" --dry-run > "$WORK/dry_bf16.txt" 2>&1 || fail "dry run: $(tail -3 "$WORK/dry_bf16.txt")"
"$DTRAIN" --config "$WORK/base.yaml" --set cluster.precision=fp32 --dry-run > "$WORK/dry_f32.txt" 2>&1
grep -q "input.bf16 *cast bf16" "$WORK/dry_bf16.txt" || fail "dry run: no cast of the input: $(cat "$WORK/dry_bf16.txt")"
grep -q "fc2.f32 *cast f32" "$WORK/dry_bf16.txt" || fail "dry run: no cast before the loss"
grep -Eq "^conv .* bf16$" "$WORK/dry_bf16.txt" || fail "dry run: conv is not bf16"
per_sample() { sed -n 's/^activations: .*(\([0-9]*\) bytes per sample.*/\1/p' "$1"; }
b=$(per_sample "$WORK/dry_bf16.txt") f=$(per_sample "$WORK/dry_f32.txt")
[ -n "$b" ] && [ -n "$f" ] && [ $((b * 10)) -le $((f * 6)) ] ||
  fail "dry run: bf16 plans $b activation bytes per sample, f32 $f (expected <= 0.6x)"
echo "activations per sample: f32 $f bytes, bf16 $b bytes"

# Every algorithm trains in bf16; the deterministic ones resume bit for bit.
check_algorithm() {  # NAME ALGORITHM-MAP [--set ...]
  local name=$1 algorithm=$2; shift 2
  local run="$WORK/$name"
  $MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" "$@" --out "$run" \
    --progress none > "$run.log" 2>&1 || { fail "$name: the run failed: $(tail -3 "$run.log")"; return; }
  [ "$(wc -l < "$run/accuracy.csv")" = 3 ] || fail "$name: accuracy.csv $(cat "$run/accuracy.csv")"
  grep -qi "nan\|inf" "$run/accuracy.csv" && fail "$name: $(cat "$run/accuracy.csv")"
  [ "${RESUME:-1}" = 1 ] || return
  local mid; mid=$(cd "$run/checkpoints" && ls -d epoch-0002-iteration-* | head -1)
  rm -rf "$run.resumed"; cp -r "$run" "$run.resumed"
  $TOOL rewind "$run.resumed" "$mid"
  $MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" "$@" --resume "$run.resumed" \
    --progress none > "$run.resumed.log" 2>&1 || { fail "$name resumed: $(tail -3 "$run.resumed.log")"; return; }
  $TOOL same "$run" "$run.resumed" > "$WORK/same.txt" ||
    fail "$name in bf16 resumed from $mid differs from the uninterrupted run: $(cat "$WORK/same.txt")"
}
check_algorithm sync "{name: sync, segments: 2}"
check_algorithm ps_sync "{name: ps_sync}"
check_algorithm pipe_sgd "{name: pipe_sgd, K: 2}"
check_algorithm sapipe "{name: sapipe, stale_layers: 1, compensation: wp3}"
check_algorithm pipedream "{name: pipedream, stages: [fc1]}"
check_algorithm local_sgd "{name: local_sgd, sync_period: 3}"
check_algorithm d_psgd "{name: d_psgd, topology: ring}"
check_algorithm hpsgd "{name: hpsgd, sync_period: 2}" --set optimizer.momentum=0
check_algorithm sync_adamw "{name: sync}" --set "optimizer={name: adamw, lr: 0.01}"
RESUME=0 check_algorithm gossip "{name: gossip}" --set optimizer.momentum=0

# PipeDream's stages send their activations and gradients in bf16: half the bytes of f32.
$MPI "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm={name: pipedream, stages: [fc1]}" \
  --set cluster.precision=fp32 --out "$WORK/pipedream_f32" --progress none > "$WORK/pipedream_f32.log" 2>&1 ||
  fail "pipedream f32: $(tail -3 "$WORK/pipedream_f32.log")"
sent() { awk -F, 'NR == 2 { print $9 } NR == 3 { print $10 }' "$1/pipeline.csv" | paste -sd' '; }
read -r act16 grad16 <<< "$(sent "$WORK/pipedream")"
read -r act32 grad32 <<< "$(sent "$WORK/pipedream_f32")"
echo "pipedream bytes sent: activations f32 $act32, bf16 $act16; gradients f32 $grad32, bf16 $grad16"
[ $((act16 * 100)) -le $((act32 * 55)) ] && [ $((grad16 * 100)) -le $((grad32 * 55)) ] ||
  fail "pipedream in bf16 sent $act16 / $grad16 bytes, f32 $act32 / $grad32 (expected about half)"

# dtrain plan profiles the bf16 model and says so.
"$DTRAIN" plan --config "$WORK/base.yaml" --set "algorithm={name: pipedream, stages: auto}" \
  > "$WORK/plan.txt" 2>&1 || fail "plan in bf16: $(tail -3 "$WORK/plan.txt")"
grep -q "^precision bf16" "$WORK/plan.txt" || fail "plan in bf16: no precision line: $(head -5 "$WORK/plan.txt")"
# Its layer profile counts the bytes that cross each cut in the dtype that crosses: half of f32's
# where the model is bf16 there (the trunk), the same where it is f32 (the logits).
for p in fp32 bf16; do
  "$DTRAIN" plan --config "$WORK/base.yaml" --set cluster.precision=$p \
    --set "algorithm={name: pipedream, stages: auto}" --write-profile "$WORK/profile_$p.csv" \
    > "$WORK/plan_$p.txt" 2>&1 || fail "plan --write-profile in $p: $(tail -3 "$WORK/plan_$p.txt")"
done
halved=$(paste -d, "$WORK/profile_fp32.csv" "$WORK/profile_bf16.csv" | awk -F, -v n="$(head -1 "$WORK/profile_fp32.csv" | awk -F, '{ print NF }')" \
  'NR > 1 && $4 == 2 * $(n + 4) { h++ } END { print h + 0 }')
[ "$halved" -ge 1 ] || fail "plan's bf16 profile: no cut crosses in bf16: $(cat "$WORK/profile_fp32.csv" "$WORK/profile_bf16.csv")"

# Refused where the CPU has no native bf16 (oneDNN told to stop below AVX512-BF16).
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" --config "$WORK/base.yaml" --dry-run > "$WORK/refused.txt" 2>&1
code=$?
[ $code = 2 ] || fail "bf16 without AVX512-BF16: exit $code, expected 2: $(tail -3 "$WORK/refused.txt")"
grep -q "cluster.precision: bf16: this CPU has no native bfloat16" "$WORK/refused.txt" ||
  fail "bf16 without AVX512-BF16: $(cat "$WORK/refused.txt")"
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" --config "$WORK/base.yaml" --set cluster.precision=fp32 \
  --dry-run > /dev/null 2>&1 || fail "fp32 without AVX512-BF16 refused"
"$DTRAIN" --config "$WORK/base.yaml" --set cluster.precision=fp16 --dry-run > "$WORK/fp16.txt" 2>&1
code=$?
[ $code = 2 ] && grep -q "cluster.precision" "$WORK/fp16.txt" ||
  fail "cluster.precision: fp16: exit $code: $(cat "$WORK/fp16.txt")"
finish
