#!/usr/bin/env bash
# The README's ten-minute tour runs as written: every ```sh block between the tour's markers, in
# order, on a fresh output tree that already holds the quickstart's run (runs/fashion_mlp_sync),
# each block under `bash -e`; then what each step promises is there. The tree links the
# repository's build, configs and scripts, so the commands run exactly as a user types them.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # the README's --allow-run-as-root
tree="$WORK/tree"
mkdir -p "$tree"
build=$(cd "$(dirname "$DTRAIN")/../.." && pwd)
ln -s "$build" "$tree/build"
ln -s "$ROOT/configs" "$tree/configs"
ln -s "$ROOT/scripts" "$tree/scripts"
cd "$tree" || { fail "no tree"; finish; }

# The quickstart's run (scripts/quickstart.sh installs and builds first).
build/apps/dtrain/dtrain --config configs/fashion_mlp_sync.yaml --out runs/fashion_mlp_sync \
  --progress none > quickstart.log 2>&1 || fail "the quickstart's run: $(tail -3 quickstart.log)"

/usr/bin/python3 - "$ROOT/README.md" "$WORK/blocks" <<'PY' || fail "README.md: no tour"
import os, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
tour = re.search(r"<!-- tour: begin -->(.*?)<!-- tour: end -->", text, re.S)
blocks = re.findall(r"```sh\n(.*?)```", tour.group(1), re.S) if tour else []
if not blocks:
    sys.exit(1)
os.makedirs(sys.argv[2])
for i, block in enumerate(blocks, 1):
    open(os.path.join(sys.argv[2], f"{i:02d}.sh"), "w").write(block)
PY
for block in "$WORK"/blocks/*.sh; do
  n=$(basename "$block" .sh)
  echo "== tour block $n"; cat "$block"
  bash -e -o pipefail "$block" > "$WORK/tour-$n.log" 2>&1 ||
    fail "tour block $n failed (exit $?):
$(cat "$block")
$(tail -15 "$WORK/tour-$n.log")"
  [ "$failures" = 0 ] || finish  # the later blocks need this one's outputs
  tail -4 "$WORK/tour-$n.log"
done

# What the steps promise.
for f in config.yaml run.yaml accuracy.csv timing.csv model.safetensors; do
  [ -s runs/tour/lenet/$f ] || fail "train: no runs/tour/lenet/$f"
done
grep -q '^status: completed$' runs/tour/mlp/run.yaml || fail "two ranks: $(grep status runs/tour/mlp/run.yaml)"
ok=$(/usr/bin/python3 -c "
import csv; print(sum(r['status'] == 'ok' for r in csv.DictReader(open('runs/tour/compare/summary.csv'))))")
[ "$ok" = 2 ] || fail "compare: $ok of 2 runs ok: $(cat runs/tour/compare/summary.csv)"
ls runs/tour/compare/*.png > /dev/null 2>&1 || fail "compare: no figures"
grep -q "pipe_sgd" "$WORK"/tour-04.log || fail "plan: no pipe_sgd row"
[ -s runs/tour/trace/trace.json ] || fail "trace: no trace.json"
grep -q "stopped: exit 130" "$WORK"/tour-06.log || fail "interrupt: $(cat "$WORK"/tour-06.log | tail -5)"
grep -q '^status: stopped$' "$WORK"/tour-06.log || fail "interrupt: run.yaml did not say stopped"
grep -q '^status: completed$' runs/tour/resume/run.yaml || fail "resume: $(grep status runs/tour/resume/run.yaml)"
[ "$(wc -l < runs/tour/resume/accuracy.csv)" = 4 ] || fail "resume: $(cat runs/tour/resume/accuracy.csv)"
# eval prints the run's last test loss (accuracy.csv rounds to 6 decimals too).
want=$(tail -1 runs/tour/lenet/accuracy.csv | cut -d, -f6)
grep -q "^test loss $want " "$WORK"/tour-07.log || fail "eval: $(grep 'test loss' "$WORK"/tour-07.log) vs accuracy.csv's $want"
[ -s runs/tour/finetune/model.safetensors ] || fail "fine-tune: no model.safetensors"
finish
