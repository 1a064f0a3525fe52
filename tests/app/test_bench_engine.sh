#!/usr/bin/env bash
# bench/engine_vs_pytorch.py --quick (a smoke test of the script, not a measurement) on ResNet-20:
# where dtrain trains in bf16 on this CPU, the run also measures bf16 mixed precision (dtrain
# bf16 and PyTorch under autocast, the bf16 memory side) and judges its goals; where it cannot
# (here forced with ONEDNN_MAX_CPU_ISA below bf16), one line says so and the bf16 goals are
# "not measured", never FAIL. Skipped (77) without PyTorch. Third argument: the build folder.
source "$(dirname "$0")/lib.sh"
BUILD=$3
PY=/usr/bin/python3
BENCH="$PY $ROOT/bench/engine_vs_pytorch.py --quick --models resnet20 --build $BUILD"
"$PY" -c "import torch" 2>/dev/null || { echo "skipped: $PY has no torch"; exit 77; }

has() {  # has FILE REGEX WHAT
  grep -Eq "$2" "$1" || fail "$3: no line matching '$2' in $(basename "$1")"
}

bf16_here=1
"$DTRAIN" --dry-run --config /dev/stdin --set cluster.precision=bf16 > /dev/null 2>&1 <<'YAML' || bf16_here=0
model: {name: mlp, hidden: [8]}
dataset: {name: synthetic, shape: [1, 4, 4], classes: 2, train_size: 8, test_size: 8, batch_size: 4}
YAML

$BENCH > "$WORK/default.log" 2>&1 || fail "default run: exit $?: $(tail -5 "$WORK/default.log")"
if [ "$bf16_here" = 1 ]; then
  has "$WORK/default.log" "^bf16: dtrain trains in bf16 here, oneDNN ISA .*AMX-BF16 (yes|no)" \
    "header"
  has "$WORK/default.log" "^1b\. bf16 mixed precision, samples/s" "bf16 table"
  has "$WORK/default.log" \
    "^resnet20( +[0-9.]+){5} +(nchw|cl) +[0-9.]+ +[0-9.]+  x fp32 >= 3\.0x: (PASS|FAIL); ratio >= 1\.5x: (PASS|FAIL)$" \
    "bf16 row of resnet20"
  has "$WORK/default.log" "^resnet20 +dtrain bf16 +[0-9]+ +[0-9]+ +-?[0-9.]+$" "bf16 memory side"
  has "$WORK/default.log" "dtrain bf16 [-0-9.]+, dtrain fp32 [-0-9.]+, .*goal <= 0\.6x: (PASS|FAIL)$" \
    "bf16 memory goal"
  has "$WORK/default.log" "^goals: [0-9]+ of 5 PASS" "every goal measured"
  grep -q "not measured" "$WORK/default.log" && fail "default run: a goal not measured"
else
  echo "dtrain does not train in bf16 on this CPU: only the not-measured path is checked"
fi

# A CPU without native bf16, as dtrain sees it.
ONEDNN_MAX_CPU_ISA=AVX512_CORE $BENCH > "$WORK/no_bf16.log" 2>&1 ||
  fail "run without bf16: exit $?: $(tail -5 "$WORK/no_bf16.log")"
has "$WORK/no_bf16.log" "^bf16: NOT measured \(.*exit code 2, cluster\.precision" "header"
has "$WORK/no_bf16.log" "^1b\. bf16 mixed precision: not measured" "one line for part 1b"
has "$WORK/no_bf16.log" \
  "not measured: resnet20 bf16 vs fp32, resnet20 bf16 vs torch bf16, resnet20 bf16 memory$" \
  "summary"
# No bf16 goal line FAILs, nor does the summary's FAIL list name one.
grep -v "^goals:" "$WORK/no_bf16.log" | grep -E "bf16.*: FAIL" &&
  fail "run without bf16: a bf16 goal FAILed"
grep "^goals:" "$WORK/no_bf16.log" | sed 's/; not measured:.*//' | grep -q "bf16" &&
  fail "run without bf16: the summary FAILs a bf16 goal"
grep -q "dtrain bf16" "$WORK/no_bf16.log" && fail "run without bf16: a dtrain bf16 measurement"
finish
