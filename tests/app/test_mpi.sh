#!/usr/bin/env bash
# Multi-rank runs of the binary: 2-rank sync training writes one timing row per rank per
# epoch; a rank started with a different --set stops every rank with exit 2 naming the key;
# a failure on one rank ends the job instead of hanging it.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"

out="$WORK/out"
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$out"

timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --set compression.name=quantize8 \
  > "$WORK/log.txt" 2>&1 || fail "2-rank training exit code $? ($(tail -5 "$WORK/log.txt"))"
[ "$(wc -l < "$out/timing.csv")" -eq 5 ] || fail "timing.csv should have 4 rows (2 ranks × 2 epochs)"
cut -d, -f1 "$out/timing.csv" | tail -n +2 | sort -u | tr '\n' ' ' | grep -q "^0 1 $" \
  || fail "timing.csv ranks: $(cut -d, -f1 "$out/timing.csv" | tr '\n' ' ')"
grep -q "ring all-reduce + quantize8" "$WORK/log.txt" || fail "log does not say which all-reduce runs"
grep -q "world_size: 2" "$out/run.yaml" || fail "run.yaml: $(cat "$out/run.yaml")"
grep -q "hosts: \[[^,]*, [^,]*\]" "$out/run.yaml" || fail "run.yaml lacks both ranks' hosts"

# Local SGD on 2 ranks trains and averages: one timing row per rank per epoch, comm measured.
rm -rf "$out"
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --set "algorithm={name: local_sgd, sync_period: 4}" \
  > "$WORK/local.txt" 2>&1 || fail "2-rank local_sgd exit code $? ($(tail -5 "$WORK/local.txt"))"
grep -q "models averaged every 4 iteration" "$WORK/local.txt" || fail "local_sgd's log line"
awk -F, 'NR > 1 && $10 <= 0 { bad = 1 } END { exit bad }' "$out/timing.csv" \
  || fail "local_sgd: comm_s not measured"
awk -F, 'NR > 1 && $11 <= 0 { bad = 1 } END { exit bad }' "$out/timing.csv" \
  || fail "wait_s not measured on 2 ranks"

# HPSGD on 2 ranks with a codec: trains, all-reduces on the comm thread while training (comm_s
# measured) and says every epoch how often it synchronised.
rm -rf "$out"
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --set "algorithm={name: hpsgd, sync_period: 2}" \
  --set optimizer.momentum=0 --set compression.name=quantize8 > "$WORK/hpsgd.txt" 2>&1 \
  || fail "2-rank hpsgd exit code $? ($(tail -5 "$WORK/hpsgd.txt"))"
grep -q "gradients accumulated on a replica and all-reduced every 2 iteration(s)" \
  "$WORK/hpsgd.txt" || fail "hpsgd's start-up line: $(grep hpsgd "$WORK/hpsgd.txt")"
grep -q "hpsgd: 8 synchronisation(s) in 16 iterations" "$WORK/hpsgd.txt" \
  || fail "hpsgd's epoch line: $(grep hpsgd "$WORK/hpsgd.txt")"
awk -F, 'NR > 1 && $10 <= 0 { bad = 1 } END { exit bad }' "$out/timing.csv" \
  || fail "hpsgd: comm_s not measured"

# A straggler's compute is stretched by its factor: rank 1 (4x) ends each backward with a sleep of
# 3x that iteration's forward and backward, so in every epoch its backward_s is at least 3x its
# forward_s (a sleep's lower bound; 2e-6 for the CSV's rounding), whatever the machine's speed
# or load. (Comparing rank 1's compute with rank 0's would be a race: a stall of rank 0 on a
# busy machine outweighs a tiny model's stretch; that only listed ranks are slowed is
# tests/run/test_run_builder.cpp's, without a clock.)
rm -rf "$out"
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --set 'cluster.stragglers=[{rank: 1, slowdown: 4}]' \
  > "$WORK/straggler.txt" 2>&1 || fail "straggler run exit code $? ($(tail -3 "$WORK/straggler.txt"))"
awk -F, 'NR > 1 && $1 == 1 { n++; if ($7 + 2e-6 < 3 * $6) bad = 1 } END { exit bad || n != 2 }' \
  "$out/timing.csv" || fail "rank 1's compute is not stretched: $(cat "$out/timing.csv")"
timeout 60 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --set 'cluster.stragglers=[{rank: 5, slowdown: 2}]' \
  > "$WORK/bad_straggler.txt" 2>&1
[ $? -eq 2 ] || fail "a straggler rank outside the job should exit 2"
grep -q "cluster.stragglers\[0\].rank" "$WORK/bad_straggler.txt" || fail "bad straggler message: $(tail -2 "$WORK/bad_straggler.txt")"

rm -rf "$out"
timeout 120 $MPIRUN -np 1 "$DTRAIN" --config "$cfg" : -np 1 "$DTRAIN" --config "$cfg" \
  --set train.epochs=3 > "$WORK/mismatch.txt" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "mismatched ranks: exit code $rc, expected 2"
grep -q "train.epochs: 3" "$WORK/mismatch.txt" || fail "mismatch message does not name the key: $(tail -3 "$WORK/mismatch.txt")"
[ ! -e "$out/accuracy.csv" ] || fail "a mismatched start wrote results"
# dtrain bench comm: the CSV contract, every implementation present, exact sums for `none`.
timeout 120 $MPIRUN -np 2 "$DTRAIN" bench comm --min-bytes 4K --max-bytes 64K --iters 3 \
  --csv "$WORK/bench.csv" > "$WORK/bench.txt" 2>&1 || fail "bench comm exit code $? ($(tail -3 "$WORK/bench.txt"))"
[ "$(head -1 "$WORK/bench.csv")" = "ranks,codec,impl,bytes,time_us,algbw_GBps,busbw_GBps,max_rel_error" ] \
  || fail "bench comm CSV header: $(head -1 "$WORK/bench.csv")"
[ "$(wc -l < "$WORK/bench.csv")" -eq 21 ] || fail "bench comm: expected 20 rows (4 impls x 5 sizes)"
awk -F, 'NR > 1 && $2 == "none" && $8 > 1e-6 { bad = 1 } NR > 1 && $2 == "quantize8" && $8 > 0.02 { bad = 1 }
         END { exit bad }' "$WORK/bench.csv" || fail "bench comm errors out of bounds: $(cat "$WORK/bench.csv")"
timeout 60 "$DTRAIN" bench comm --codecs zip > /dev/null 2>&1
[ $? -eq 2 ] || fail "bench comm with an unknown codec should exit 2"
finish
