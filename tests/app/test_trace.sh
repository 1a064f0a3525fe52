#!/usr/bin/env bash
# trace.json (docs/architecture.md §3): valid Trace Event Format JSON with every rank and thread, spans
# that nest per thread and add up to timing.csv, a pipe_sgd trace whose communication overlaps
# the next iteration's compute, and the output.trace windows (check_trace.py says what each
# check means). Without output.trace, no trace.json.
source "$(dirname "$0")/lib.sh"
CHECK="/usr/bin/python3 $ROOT/tests/app/check_trace.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -np 2 --oversubscribe"

cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/plain"
"$DTRAIN" --config "$cfg" > "$WORK/log.txt" 2>&1 || fail "untraced run: exit $?"
[ ! -e "$WORK/plain/trace.json" ] || fail "trace.json written without output.trace"

run() {  # run NAME EXPECTED_RANKS ARGS... : a traced run into $WORK/NAME
  local name=$1 ranks=$2
  shift 2
  local launch=()
  [ "$ranks" -gt 1 ] && launch=($MPIRUN)
  "${launch[@]}" "$DTRAIN" --config "$cfg" --out "$WORK/$name" --set output.trace=true "$@" \
    > "$WORK/$name.log" 2>&1 || fail "$name: exit $? ($(tail -3 "$WORK/$name.log"))"
}

run one 1
$CHECK "$WORK/one" 1 || fail "one rank"

# Pipe-SGD over a slow emulated link: the all-reduce of iteration t runs on the comm thread
# while the compute thread does t+1.
run pipe 2 --set 'algorithm={name: pipe_sgd, K: 2}' --set cluster.link.bandwidth=20Mbps
$CHECK "$WORK/pipe" 2 --overlap || fail "pipe_sgd trace"

# sync with a codec: the comm thread's spans are timing.csv's comm_s and compress_s.
run sync 2 --set compression.name=quantize8
$CHECK "$WORK/sync" 2 --comm-sums || fail "sync trace"

run epochs 2 --set 'output.trace={epochs: [2, 2]}'
$CHECK "$WORK/epochs" 2 --epochs 2 2 || fail "epoch window"
run iterations 2 --set 'output.trace={iterations: [5, 8]}'
$CHECK "$WORK/iterations" 2 --iterations 4 || fail "iteration window"
# 16 iterations an epoch: [14, 20] is the end of epoch 1 and the start of epoch 2.
run across 2 --set 'output.trace={iterations: [14, 20]}'
$CHECK "$WORK/across" 2 --iterations 7 || fail "iteration window across epochs"
# The trace's file travels to rank 0 outside the emulated link (10 KB/s would take minutes).
run slow 2 --set cluster.link.bandwidth=80Kbps --set train.max_iterations=2
$CHECK "$WORK/slow" 2 || fail "trace over a slow emulated link"
finish
