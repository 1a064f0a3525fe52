#!/usr/bin/env bash
# scripts/plot.py on a small sweep that supports every figure (ranks 1,2 with repeats and
# --plan; a straggler run added by a second grid into the same folder), on single run folders,
# and on folders with a missing CSV or path (exit 2, naming it). Usage: test_plot.sh DTRAIN REPO_ROOT
source "$(dirname "$0")/lib.sh"
skip_without_modules yaml numpy matplotlib
cd "$WORK" || exit 1
write_synthetic_config base.yaml "$WORK/unused"
ALL_FIGURES="accuracy_vs_time accuracy_vs_epoch time_breakdown scaling stragglers predicted_vs_measured"

# check_figures DIR NAME... — each NAME.png is a PNG and each NAME.svg parses as XML.
check_figures() {
  local dir=$1
  shift
  local name
  for name in "$@"; do
    [ -s "$dir/$name.png" ] || { fail "$dir/$name.png: missing or empty"; continue; }
    [ "$(head -c 4 "$dir/$name.png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] \
      || fail "$dir/$name.png: not a PNG"
    [ -s "$dir/$name.svg" ] || { fail "$dir/$name.svg: missing or empty"; continue; }
    "$PY" -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$dir/$name.svg" \
      || fail "$dir/$name.svg: not XML"
  done
}

# --- the sweep: sync and pipe_sgd on 1 and 2 ranks, twice each, with plan predictions; then a
# second grid into the same folder adds the same two with a straggler on 2 ranks.
sweep --config base.yaml --ranks 1,2 --grid algorithm.name=sync,pipe_sgd --repeat 2 \
      --set train.epochs=2 --target 0.5 --plan --out sweep > sweep.out 2>&1 \
  || fail "sweep: exit $?: $(tail -5 sweep.out)"
sweep --config base.yaml --ranks 2 --grid algorithm.name=sync,pipe_sgd --set train.epochs=2 \
      --set 'cluster.stragglers=[{rank: 1, slowdown: 3}]' --out sweep > stragglers.out 2>&1 \
  || fail "straggler sweep: exit $?: $(tail -5 stragglers.out)"
head -1 sweep/plan.csv | grep -q '^ranks,algorithm,compression,compute_s,comm_s,predicted_iteration_s,bound' \
  || fail "plan.csv header: $(head -1 sweep/plan.csv)"
[ "$(cut -d, -f1 sweep/plan.csv | sort -u | tr '\n' ' ')" = "1 2 ranks " ] \
  || fail "plan.csv should hold ranks 1 and 2: $(cut -d, -f1 sweep/plan.csv | sort -u)"
grep -q 'predicted_iteration_s' sweep/summary.csv || fail "summary.csv lacks predicted_iteration_s"

"$PY" "$PLOT" sweep > plot.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "plot.py sweep: exit $rc: $(cat plot.out)"
grep -q skipped plot.out && fail "plot.py skipped a figure the sweep supports: $(cat plot.out)"
# shellcheck disable=SC2086  # the names are words
check_figures sweep $ALL_FIGURES
[ "$(grep -c '^sweep/.*\.\(png\|svg\)$' plot.out)" -eq 12 ] \
  || fail "plot.py should print the 12 paths it wrote: $(cat plot.out)"

# --- one run folder: its figures go into it; those it cannot support are skipped, saying why
run="sweep/algorithm=pipe_sgd,ranks=2,rep=1"
cp -r "$run" one
"$PY" "$PLOT" one > one.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "plot.py one run: exit $rc: $(cat one.out)"
check_figures one accuracy_vs_time accuracy_vs_epoch time_breakdown
for name in scaling stragglers predicted_vs_measured; do
  grep -q "^skipped $name: " one.out || fail "one run: $name not reported as skipped: $(cat one.out)"
  [ ! -e "one/$name.png" ] || fail "one run: $name.png drawn without the data for it"
done

# --- several run folders, figures into --out
"$PY" "$PLOT" "sweep/algorithm=sync,ranks=1,rep=1" "sweep/algorithm=sync,ranks=2,rep=1" \
      "sweep/algorithm=sync" --out several > several.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "plot.py several runs: exit $rc: $(cat several.out)"
check_figures several accuracy_vs_time time_breakdown scaling stragglers

# --- errors: exit 2 with a message naming the file
expect_error() {  # expect_error WHAT-THE-MESSAGE-NAMES PATH...
  local names=$1
  shift
  "$PY" "$PLOT" "$@" > error.out 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || fail "plot.py $*: exit $rc, expected 2: $(cat error.out)"
  grep -q -- "$names" error.out || fail "plot.py $*: message does not name $names: $(cat error.out)"
}
cp -r "$run" no_timing && rm no_timing/timing.csv
expect_error "no_timing/timing.csv" no_timing
cp -r "$run" no_accuracy && rm no_accuracy/accuracy.csv
expect_error "no_accuracy/accuracy.csv" no_accuracy
cp -r sweep broken_sweep && rm "broken_sweep/algorithm=sync,ranks=2,rep=2/timing.csv"
expect_error "broken_sweep/algorithm=sync,ranks=2,rep=2/timing.csv" broken_sweep
expect_error "missing_folder" missing_folder
mkdir empty_folder
expect_error "empty_folder" empty_folder
[ -n "${KEEP_WORK:-}" ] && cp -r "$WORK" "$KEEP_WORK"  # KEEP_WORK=DIR: keep the scratch folder
finish
