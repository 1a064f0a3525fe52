#!/usr/bin/env bash
# gossip (AD-PSGD) and d_psgd end to end on 4 ranks: one epoch of the Fashion-MNIST MLP of
# configs/paper/adpsgd/small/ trains above 80 % test accuracy; d_psgd's ranks each do an epoch of
# their shard, gossip's ranks together do N/M updates (a faster rank more); gossip's trace shows
# its exchange and server threads, nested spans that add up to timing.csv.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SMALL="$ROOT/configs/paper/adpsgd/small"

for a in gossip d_psgd; do
  extra=()
  [ "$a" = gossip ] && extra=(--set output.trace=true)
  mpirun -np 4 --oversubscribe "$DTRAIN" --config "$SMALL/fashion_mlp_$a.yaml" --out "$WORK/$a" \
    --set train.epochs=1 "${extra[@]}" > "$WORK/$a.log" 2>&1 || fail "$a: exit $? ($(tail -3 "$WORK/$a.log"))"
  acc=$(tail -1 "$WORK/$a/accuracy.csv" | cut -d, -f7)
  awk -v a="$acc" 'BEGIN { exit !(a > 0.80) }' || fail "$a: test accuracy $acc after one epoch"
done
# 60000 samples, 25 a rank's batch: 600 iterations per rank (d_psgd), 2400 updates in all (gossip),
# plus those the ranks do while the end reaches them: a few here, more when a busy machine stalls
# rank 0's server, so up to 10 % more (each rank doing N/M alone would be 9600). How promptly
# the end arrives is bounded in tests/sched/test_gossip_mpi.cpp, on slowed ranks.
awk -F, 'NR > 1 && $3 != 600 { bad = 1 } END { exit bad }' "$WORK/d_psgd/timing.csv" ||
  fail "d_psgd iterations: $(cut -d, -f1,3 "$WORK/d_psgd/timing.csv" | tr '\n' ' ')"
total=$(awk -F, 'NR > 1 { s += $3 } END { print s }' "$WORK/gossip/timing.csv")
[ "$total" -ge 2400 ] && [ "$total" -le 2640 ] || fail "gossip updates over all ranks: $total, expected 2400 (+ up to 10 %)"
# accuracy.csv counts the epoch's updates over all ranks (d_psgd: each rank's iterations).
[ "$(tail -1 "$WORK/gossip/accuracy.csv" | cut -d, -f2)" = "$total" ] ||
  fail "gossip accuracy.csv iteration $(tail -1 "$WORK/gossip/accuracy.csv" | cut -d, -f2), updates $total"
[ "$(tail -1 "$WORK/d_psgd/accuracy.csv" | cut -d, -f2)" = 600 ] || fail "d_psgd accuracy.csv iteration"
/usr/bin/python3 "$ROOT/tests/app/check_trace.py" "$WORK/gossip" 4 || fail "gossip trace"
for thread in gossip "gossip server"; do
  grep -q "\"args\":{\"name\":\"$thread\"}" "$WORK/gossip/trace.json" || fail "no '$thread' thread in the trace"
done
finish
