#!/usr/bin/env bash
# Settings without effect are warnings: each printed once on stderr (by rank 0 only), exit 0,
# and kept in run.yaml's notes ("no effect: KEY: why", what scripts/sweep.py's no_effect column
# reads). Those that depend on the number of ranks are judged where it is known: the job's, or
# `--dry-run --ranks N`'s; a one-process dry run without --ranks judges none of them.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/unused"
short=(--set train.epochs=1 --set train.max_iterations=2 --progress none)

# expect_warning_once NAME KEY OUT_DIR_OR_EMPTY COMMAND... — exit 0, one "no effect: KEY:" line on
# stderr (none on stdout), and, with a folder, the same note in its run.yaml.
expect_warning_once() {
  local name=$1 key=$2 dir=$3
  shift 3
  "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" < /dev/null
  local rc=$?
  [ "$rc" -eq 0 ] || { fail "$name: exit $rc, expected 0: $(tail -3 "$WORK/err.txt")"; return; }
  local count
  count=$(grep -c "dtrain: warning: no effect: $key:" "$WORK/err.txt")
  [ "$count" -eq 1 ] || fail "$name: the warning about $key $count times on stderr, expected once: $(cat "$WORK/err.txt")"
  ! grep -q "no effect: $key" "$WORK/out.txt" || fail "$name: the warning about $key on stdout"
  if [ -n "$dir" ]; then
    grep -q "no effect: $key:" "$dir/run.yaml" || fail "$name: run.yaml lacks the note: $(cat "$dir/run.yaml")"
  fi
}

# One rank: a codec, an emulated link and a straggler change nothing.
expect_warning_once "compression on one rank" compression.name "$WORK/c1" \
  "$DTRAIN" --config "$cfg" --out "$WORK/c1" "${short[@]}" --set compression.name=quantize8
expect_warning_once "cluster.link on one rank" cluster.link "$WORK/l1" \
  "$DTRAIN" --config "$cfg" --out "$WORK/l1" "${short[@]}" --set cluster.link.bandwidth=10Gbps
expect_warning_once "a straggler on one rank" cluster.stragglers "$WORK/s1" \
  "$DTRAIN" --config "$cfg" --out "$WORK/s1" "${short[@]}" \
  --set 'cluster.stragglers=[{rank: 0, slowdown: 1.5}]'

# Two ranks: the codec works (no warning); under mpirun rank 0 alone warns (once, not per rank):
# pipedream on 2 ranks has 2 stages and no replicated stage, so nothing it all-reduces.
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --out "$WORK/c2" "${short[@]}" \
  --set compression.name=quantize8 > "$WORK/out.txt" 2> "$WORK/err.txt" < /dev/null \
  || fail "compression on 2 ranks: exit $?: $(tail -3 "$WORK/err.txt")"
! grep -q "no effect" "$WORK/err.txt" "$WORK/c2/run.yaml" \
  || fail "compression on 2 ranks: warned though it has an effect: $(cat "$WORK/err.txt")"
expect_warning_once "pipedream without replicas" compression.name "$WORK/p2" \
  timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --out "$WORK/p2" "${short[@]}" \
  --set 'algorithm={name: pipedream, stages: [fc2]}' --set compression.name=quantize8

# A dry run: for --ranks N's job; without --ranks the ranks are unknown, so no warning.
expect_warning_once "--dry-run --ranks 1" compression.name "" \
  "$DTRAIN" --config "$cfg" --dry-run --ranks 1 --set compression.name=quantize8
"$DTRAIN" --config "$cfg" --dry-run --ranks 2 --set compression.name=quantize8 \
  > /dev/null 2> "$WORK/err.txt" || fail "--dry-run --ranks 2: exit $?"
! grep -q "no effect" "$WORK/err.txt" || fail "--dry-run --ranks 2 warned: $(cat "$WORK/err.txt")"
"$DTRAIN" --config "$cfg" --dry-run --set compression.name=quantize8 \
  > /dev/null 2> "$WORK/err.txt" || fail "--dry-run: exit $?"
! grep -q "no effect" "$WORK/err.txt" || fail "--dry-run without --ranks warned: $(cat "$WORK/err.txt")"
# --ranks belongs to a one-process dry run.
"$DTRAIN" --config "$cfg" --ranks 2 > /dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "--ranks without --dry-run: exit $rc, expected 2"
finish
