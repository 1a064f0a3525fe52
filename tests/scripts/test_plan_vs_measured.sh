#!/usr/bin/env bash
# bench/plan_vs_measured.py on its quick grid narrowed to two algorithms and one link: every cell
# has a finite prediction and measurement, the CSV has its columns, the summary is printed, --replan
# predicts the same cells again on their measurements, --window measures several epochs,
# --repeatability compares two measurements, scripts/plot.py draws the cells; bad
# names and an existing --out exit 2. No timing value is asserted (the machine is shared).
# Usage: test_plan_vs_measured.sh DTRAIN REPO_ROOT
source "$(dirname "$0")/lib.sh"
skip_without_modules yaml
cd "$WORK" || exit 1
BENCH="$ROOT/bench/plan_vs_measured.py"
bench() { "$PY" "$BENCH" --dtrain "$DTRAIN" "$@"; }

bench --quick --algorithms sync,gossip --links none --iterations 20 --out grid > grid.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "quick grid: exit $rc, expected 0: $(tail -20 grid.out)"
grep -q '^summary: errors .* predicted fastest right in [0-9]*/1 settings' grid.out \
  || fail "no summary line: $(cat grid.out)"
grep -q '^mlp link=none ranks=2: predicted .*, measured ' grid.out \
  || fail "no per-setting line: $(cat grid.out)"
check_python "cells.csv" grid/cells.csv <<'PY'
import csv, math, sys
reader = csv.DictReader(open(sys.argv[1]))
expected = ["model", "link", "ranks", "algorithm", "predicted_s", "measured_s", "error"]
assert reader.fieldnames[:len(expected)] == expected, reader.fieldnames
rows = list(reader)
assert sorted(r["algorithm"] for r in rows) == ["gossip", "sync"], rows
for r in rows:
    assert (r["model"], r["link"], r["ranks"]) == ("mlp", "none", "2"), r
    for column in ("predicted_s", "measured_s", "error"):
        value = float(r[column])
        assert math.isfinite(value) and value >= 0, (column, r)
    assert float(r["predicted_s"]) > 0 and float(r["measured_s"]) > 0, r
PY

# --window: a sizing plan lengthens the runs (several measured epochs after the warm-up), and
# measured_s is every later epoch's wall time over its iterations, never the warm-up's.
bench --quick --algorithms sync --links none --iterations 20 --window 0.5 --setting-budget 30 \
  --out sized > sized.out 2>&1 || fail "--window: exit $?: $(tail -20 sized.out)"
grep -q 'measured epoch(s) after the warm-up' sized.out || fail "--window: no epochs line: $(cat sized.out)"
check_python "sized cells" sized/cells.csv sized/sweeps/mlp~none~ranks=2/algorithm=sync/timing.csv <<'PY'
import csv, sys
cell = next(csv.DictReader(open(sys.argv[1])))
rows = list(csv.DictReader(open(sys.argv[2])))
epochs = max(int(r["epoch"]) for r in rows)
assert epochs >= 3, f"only {epochs} epochs: the window did not lengthen the run"
later = [r for r in rows if int(r["epoch"]) > 1]
expected = sum(float(r["wall_s"]) for r in later) / sum(int(r["iterations"]) for r in later)
assert abs(float(cell["measured_s"]) - expected) <= 1e-5 * expected, (cell, expected)
PY

# --replan: the same cells predicted again from the recorded plan command, measurements reused
# (every measured_s equal to the grid's), nothing trained.
bench --replan grid --algorithms sync,gossip --models mlp --links none --ranks 2 --out again \
  > again.out 2>&1 || fail "--replan: exit $?: $(tail -20 again.out)"
[ -s again/sweeps/mlp~none~ranks=2/plan.csv ] || fail "--replan wrote no plan.csv: $(cat again.out)"
[ ! -e again/sweeps/mlp~none~ranks=2/summary.csv ] || fail "--replan trained"
check_python "replanned cells" grid/cells.csv again/cells.csv <<'PY'
import csv, sys
measured = lambda path: {r["algorithm"]: r["measured_s"] for r in csv.DictReader(open(path))}
first, again = measured(sys.argv[1]), measured(sys.argv[2])
assert first == again and len(again) == 2, (first, again)
PY

# --repeatability: the cells against another measurement of them (here the same one: 0 % apart,
# the fastest agreed in the one setting).
bench --replan grid --algorithms sync,gossip --models mlp --links none --ranks 2 \
  --repeatability grid/cells.csv --out twice > twice.out 2>&1 || fail "--repeatability: exit $?"
grep -q '^sync  *1  *0.0%  *0.0%  *0$' twice.out || fail "--repeatability: no sync line: $(cat twice.out)"
grep -q 'fastest or within 5 % of it in 1/1 settings' twice.out \
  || fail "--repeatability: no agreement line: $(cat twice.out)"

# scripts/plot.py draws the grid's figure from the cells (where matplotlib is installed).
if "$PY" -c "import matplotlib, numpy" 2>/dev/null; then
  "$PY" "$PLOT" --predicted-vs-measured grid/cells.csv --out figure > plot.out 2>&1 \
    || fail "plot.py --predicted-vs-measured: $(cat plot.out)"
  [ -s figure/predicted_vs_measured_grid.png ] || fail "no predicted_vs_measured_grid.png: $(cat plot.out)"
  "$PY" "$PLOT" --predicted-vs-measured no_such.csv > plot.out 2>&1
  [ $? -eq 2 ] || fail "plot.py --predicted-vs-measured no_such.csv: expected exit 2"
fi

# --- bad arguments: exit 2 naming the option; an existing --out is left alone ------------------
expect_usage_error() {
  local option=$1
  shift
  bench "$@" > bad.out 2>&1
  local code=$?
  [ "$code" -eq 2 ] || fail "$*: exit $code, expected 2: $(cat bad.out)"
  grep -q -- "$option" bad.out || fail "$*: the message does not name $option: $(cat bad.out)"
}
expect_usage_error --models --models mlp,nosuchmodel --out bad1
expect_usage_error --algorithms --algorithms sync,nosuchalgorithm --out bad2
expect_usage_error --out --quick --out grid
expect_usage_error --replan --replan no_such_folder --out bad3
expect_usage_error --repeatability --repeatability no_such.csv --out bad4
expect_usage_error --window --window -1 --out bad5
[ ! -e bad1 ] && [ ! -e bad2 ] && [ ! -e bad3 ] && [ ! -e bad4 ] && [ ! -e bad5 ] \
  || fail "a refused run created its --out folder"
[ -f grid/cells.csv ] || fail "the refused run touched the existing --out"
finish
