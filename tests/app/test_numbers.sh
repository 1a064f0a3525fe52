#!/usr/bin/env bash
# Numbers that read the same across algorithms: ps_sync without a codec reports no compression
# time; the log says when train.max_iterations ended a run, and how gossip counts it (the ranks'
# updates together); pipedream's progress line shows a loss (the output stage's, carried back to
# rank 0 with the gradients) where other algorithms show theirs.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/unused"

# ps_sync, compression: none — compress_s is 0 on every row; the exchange is comm_s.
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --out "$WORK/ps" --progress none \
  --set algorithm.name=ps_sync --set compression.name=none > "$WORK/ps.log" 2>&1 < /dev/null \
  || fail "ps_sync: exit $?: $(tail -3 "$WORK/ps.log")"
awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
         $c["compress_s"] != 0 { bad = bad " rank " $1 " epoch " $2 ": " $c["compress_s"] }
         END { if (bad != "") { print bad; exit 1 } }' "$WORK/ps/timing.csv" \
  || fail "ps_sync with compression none reports compression time: $(cat "$WORK/ps/timing.csv")"

# train.max_iterations ends the run, and the log says so.
"$DTRAIN" --config "$cfg" --out "$WORK/max" --progress none --set train.max_iterations=3 \
  > "$WORK/max.log" 2>&1 < /dev/null || fail "max_iterations: exit $?"
grep -q "train.max_iterations: 3 iterations reached in epoch 1: training ends" "$WORK/max.log" \
  || fail "the log does not say max_iterations ended the run: $(cat "$WORK/max.log")"
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --out "$WORK/gossip" --progress none \
  --set algorithm.name=gossip --set train.max_iterations=4 > "$WORK/gossip.log" 2>&1 < /dev/null \
  || fail "gossip max_iterations: exit $?: $(tail -3 "$WORK/gossip.log")"
[ "$(grep -c "train.max_iterations: [0-9]* iterations (the ranks' updates together) reached" \
  "$WORK/gossip.log")" -eq 1 ] \
  || fail "gossip: the max_iterations line once, counting the ranks' updates: $(cat "$WORK/gossip.log")"

# pipedream on 2 ranks (2 stages): rank 0 holds the input stage and shows the loss.
timeout 120 $MPIRUN -np 2 "$DTRAIN" --config "$cfg" --out "$WORK/pd" --progress log \
  --set 'algorithm={name: pipedream, stages: [fc2]}' --set train.log_every_iterations=4 \
  > "$WORK/pd.log" 2>&1 < /dev/null || fail "pipedream: exit $?: $(tail -3 "$WORK/pd.log")"
grep -q "epoch 1/2 | iter 16/16 | loss [0-9]*\.[0-9]* (epoch mean) | [0-9]* samples/s" "$WORK/pd.log" \
  || fail "pipedream's progress line lacks the loss: $(grep "iter " "$WORK/pd.log")"
finish
