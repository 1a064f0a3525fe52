#!/usr/bin/env bash
# Two hosts over TCP (scripts/netlab.sh: two network namespaces joined by a veth pair): a sync
# and a pipe_sgd run across them end with the same training state as on one host, bit for bit;
# each host's rank is local rank 0 there (run.yaml); a link cut mid-run with cluster.timeout_s 5
# ends every rank within 35 s, each naming its peer, and mpirun with exit 1. Skipped (77) where
# network namespaces cannot be made (not root, no iproute2, a container without CAP_NET_ADMIN).
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LAB="$ROOT/scripts/netlab.sh"
TOOL="/usr/bin/python3 $ROOT/tests/app/checkpoint_tool.py"
why=$("$LAB" check 2>&1) || { echo "skipped: $why"; exit 77; }
trap '"$LAB" down; rm -rf "$WORK"' EXIT
"$LAB" up || { echo "FAIL: netlab.sh up"; exit 1; }

cat > "$WORK/base.yaml" <<'YAML'
name: netlab
seed: 4
model: {name: mlp, hidden: [24]}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {lr: 0.05, momentum: 0.9}
train: {epochs: 2}
checkpoint: {every_epochs: 1}
YAML

for algorithm in "{name: sync}" "{name: pipe_sgd, K: 2}"; do
  name=$(echo "$algorithm" | sed -E 's/.*name: ([a-z_]+).*/\1/')
  timeout 120 "$LAB" run -- "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" \
    --out "$WORK/two.$name" --progress none > "$WORK/two.$name.log" 2>&1 ||
    { fail "$name across two hosts: $(tail -3 "$WORK/two.$name.log")"; continue; }
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/base.yaml" --set "algorithm=$algorithm" \
    --out "$WORK/one.$name" --progress none > "$WORK/one.$name.log" 2>&1 || fail "$name on one host"
  $TOOL same "$WORK/one.$name" "$WORK/two.$name" > "$WORK/same.txt" ||
    fail "$name: two hosts differ from one: $(cat "$WORK/same.txt")"
done
grep -q "^hosts: \[dtrain-a, dtrain-b\]" "$WORK/two.sync/run.yaml" || fail "hosts: $(grep hosts "$WORK/two.sync/run.yaml")"
grep -q "^local_ranks: \[0, 0\]" "$WORK/two.sync/run.yaml" || fail "two hosts: $(grep local_ranks "$WORK/two.sync/run.yaml")"
grep -q "^local_ranks: \[0, 1\]" "$WORK/one.sync/run.yaml" || fail "one host: $(grep local_ranks "$WORK/one.sync/run.yaml")"

# The link cut mid-run: each rank's output in a file of its own (rank 1's cannot cross the cut).
# 100000 epochs: only the cut ends the run, however fast the machine; it comes once the first
# epoch's rows are there (waited for as long as the job runs, however slow the machine).
"$LAB" run --output-filename "$WORK/cut.out" -- "$DTRAIN" --config "$WORK/base.yaml" \
  --set train.epochs=100000 --set cluster.timeout_s=5 --out "$WORK/cut" --progress none \
  > "$WORK/cut.log" 2>&1 &
runner=$!
wait_until $runner test -s "$WORK/cut/timing.csv" || fail "link cut: the run ended before its first epoch"
"$LAB" cut
cut_at=$(date +%s)
lab_ranks() { ip netns pids "$1" | xargs -r ps -o comm= -p | grep -q dtrain; }
ranks_gone=""
while [ $(( $(date +%s) - cut_at )) -le 60 ]; do
  if [ -z "$ranks_gone" ] && ! lab_ranks dtrain-a && ! lab_ranks dtrain-b; then
    ranks_gone=$(( $(date +%s) - cut_at ))
  fi
  [ -n "$ranks_gone" ] && ! kill -0 $runner 2>/dev/null && break
  sleep 0.5
done
# Still there a minute after the cut (a failure, reported below): the test ends the job itself.
if kill -0 $runner 2>/dev/null; then kill $runner; "$LAB" down; fi
wait $runner; code=$?
[ -n "$ranks_gone" ] && [ "$ranks_gone" -le 35 ] || fail "link cut: the ranks were still running ${ranks_gone:-60+} s later"
[ $code = 1 ] || fail "link cut: mpirun exit $code, expected 1: $(tail -3 "$WORK/cut.log")"
for r in 0 1; do
  peer=$((1 - r))
  grep -rqh "dtrain: rank $r: no answer from rank $peer in .* for 5 s (cluster.timeout_s)" "$WORK/cut.out" ||
    fail "link cut: rank $r does not name rank $peer: $(cat "$WORK"/cut.out/*/rank.$r/stderr 2>/dev/null | tail -2)"
done
echo "link cut: every rank gone after $ranks_gone s, mpirun exit $code"
finish
