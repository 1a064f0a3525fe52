#!/usr/bin/env bash
# scripts/sweep.py end to end on tiny synthetic runs: a 2 × 2 grid over ranks 1,2 and its
# summary, resuming after the sweep is killed, a failing run among good ones, --dry-run and bad
# arguments. Usage: test_sweep.sh DTRAIN REPO_ROOT
source "$(dirname "$0")/lib.sh"
skip_without_modules yaml
cd "$WORK" || exit 1
write_synthetic_config base.yaml "$WORK/unused"

# --- a 2 × 2 grid on 1 and 2 ranks: every run done, the summary sane --------------------------
grid_sweep=(--config base.yaml --ranks 1,2 --grid algorithm.name=sync,pipe_sgd
            --grid compression.name=none,quantize8 --set train.max_iterations=6 --target 0.3
            --out grid)
sweep "${grid_sweep[@]}" > grid.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "grid sweep: exit $rc, expected 0: $(tail -5 grid.out)"
[ "$(grep -c '^\[[1-8]/8\] .* done in [0-9.]* s (test acc [0-9.]*) | ETA [0-9]*:[0-9][0-9]$' grid.out)" -eq 8 ] \
  || fail "grid sweep: expected 8 progress lines '[i/8] NAME ... done in S s (test acc A) | ETA M:SS': $(cat grid.out)"
[ -d "grid/algorithm=pipe_sgd,compression=quantize8,ranks=2" ] \
  || fail "no run folder named after its settings: $(ls grid)"
check_python "grid summary.csv" grid <<'PY'
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
assert len(rows) == 8, f"{len(rows)} rows, expected 8"
for column in ["algorithm.name", "compression.name", "ranks", "repeat", "status", "final_test_acc",
               "best_test_acc", "time_to_target_s", "epochs", "iterations", "samples_per_s",
               "iteration_s", "comm_s_per_iter", "wait_s_per_iter", "no_effect", "dir"]:
    assert column in rows[0], f"no column {column}: {list(rows[0])}"
combinations = {(r["algorithm.name"], r["compression.name"], r["ranks"]) for r in rows}
assert len(combinations) == 8, f"not every combination once: {sorted(combinations)}"
for r in rows:
    name = r["dir"]
    assert r["status"] == "ok" and r["exit_code"] == "0", f"{name}: {r['status']} {r['exit_code']}"
    for column in ["final_test_acc", "best_test_acc"]:
        assert 0 <= float(r[column]) <= 1, f"{name}: {column} {r[column]}"
    assert float(r["best_test_acc"]) >= float(r["final_test_acc"]), name
    assert float(r["samples_per_s"]) > 0 and float(r["iteration_s"]) > 0, name
    assert int(r["iterations"]) == 6, f"{name}: {r['iterations']} iterations, expected 6"
    assert float(r["comm_s_per_iter"]) >= 0 and float(r["wait_s_per_iter"]) >= 0, name
    if r["ranks"] == "2":
        assert float(r["comm_s_per_iter"]) > 0, f"{name}: 2 ranks but no communication"
    # A codec on one rank encodes nothing: marked, so that it is not read as its own experiment.
    compressed_alone = r["compression.name"] == "quantize8" and r["ranks"] == "1"
    assert r["no_effect"] == ("compression.name" if compressed_alone else ""), \
        f"{name}: no_effect '{r['no_effect']}'"
    run_dir = os.path.join(out, name)
    status = json.load(open(os.path.join(run_dir, "sweep_status.json")))
    assert status["status"] == "ok" and status["exit_code"] == 0 and status["attempt"] == 1, status
    assert "--progress" in status["command"], f"{name}: dtrain not run with --progress log"
    assert (r["ranks"] == "2") == (status["command"][0] == "mpirun"), status["command"]
    assert os.path.getsize(os.path.join(run_dir, "log.txt")) > 0, f"{name}: empty log.txt"
definition = json.load(open(os.path.join(out, "sweep.json")))["definition"]
assert definition["grid"][0] == ["algorithm.name", ["sync", "pipe_sgd"]], definition
PY

# The same command again: everything is complete, nothing is run.
md5sum grid/*/sweep_status.json > status_before.md5
sweep "${grid_sweep[@]}" > grid_again.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "grid sweep re-run: exit $rc"
[ "$(grep -c ' \.\.\. skip (completed earlier' grid_again.out)" -eq 8 ] \
  || fail "re-run: expected 8 skips: $(cat grid_again.out)"
md5sum --quiet -c status_before.md5 || fail "re-run rewrote a completed run's sweep_status.json"

# Another --set into the same folder: the runs there are other experiments, exit 2, untouched.
sweep --config base.yaml --ranks 1,2 --grid algorithm.name=sync,pipe_sgd \
      --grid compression.name=none,quantize8 --set train.max_iterations=7 --out grid \
      > conflict.out 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "other settings into the same folder: exit $rc, expected 2"
grep -q 'train.max_iterations: recorded 6, planned 7' conflict.out \
  || fail "conflict message does not name the differing key: $(cat conflict.out)"
md5sum --quiet -c status_before.md5 || fail "a refused sweep touched the runs"

# --- resume: kill the whole sweep (its process group) once its first run finished -------------
# The sweep runs one at a time: the kill comes when the second run has begun, so the third has
# not. An emulated link (50 ms a message, 40 iterations) holds each run for seconds whatever the
# machine's speed, so the second and third cannot both finish before the kill lands.
# shellcheck disable=SC2054  # the commas are the grid's
resume_args=(--config base.yaml --ranks 2 --grid algorithm.name=sync,pipe_sgd,local_sgd
             --set train.max_iterations=40 --set cluster.link.bandwidth=10Gbps
             --set cluster.link.latency=50ms --out resume)
first_done_second_begun() {
  [ "$(grep -ls '"status": "ok"' resume/*/sweep_status.json | wc -l)" -ge 1 ] &&
    [ "$(find resume -mindepth 2 -maxdepth 2 -name sweep_status.json 2> /dev/null | wc -l)" -ge 2 ]
}
setsid "$PY" "$SWEEP" --dtrain "$DTRAIN" "${resume_args[@]}" > killed.out 2>&1 &
sweep_pid=$!
wait_until "$sweep_pid" first_done_second_begun
kill -KILL -- "-$sweep_pid" 2> /dev/null
wait "$sweep_pid" 2> /dev/null
# mpirun's ranks have process groups of their own; they end when mpirun dies (within a second:
# the minute is only there to report a hang rather than wait for CTest's timeout).
# Only this test's: its config's path is in their command lines.
mine="$WORK/base.yaml --out resume/"
ranks_left() { pgrep -f -- "$mine" > /dev/null; }
for _ in $(seq 1200); do
  ranks_left || break
  sleep 0.05
done
if ranks_left; then
  fail "dtrain processes of the killed sweep still run: $(pgrep -af -- "$mine")"
  for pid in $(pgrep -f -- "$mine"); do kill -KILL "$pid"; done
fi
completed=$(grep -ls '"status": "ok"' resume/*/sweep_status.json | wc -l)
[ "$completed" -ge 1 ] || fail "resume: no run completed before the kill: $(cat killed.out)"
[ "$completed" -lt 3 ] || fail "resume: the sweep finished before it was killed (test too slow to kill)"
grep -ls '"status": "ok"' resume/*/sweep_status.json | while read -r status; do
  cp "$status" "$WORK/$(basename "$(dirname "$status")").before"
done
sweep "${resume_args[@]}" > resumed.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "resumed sweep: exit $rc: $(cat resumed.out)"
[ "$(grep -c 'skip (completed earlier' resumed.out)" -eq "$completed" ] \
  || fail "resumed sweep should skip the $completed completed run(s): $(cat resumed.out)"
[ "$(grep -c ' done in ' resumed.out)" -eq $((3 - completed)) ] \
  || fail "resumed sweep should run the other $((3 - completed)): $(cat resumed.out)"
for before in "$WORK"/*.before; do
  name=$(basename "$before" .before)
  cmp -s "$before" "resume/$name/sweep_status.json" || fail "completed run $name was redone"
done
check_python "resumed sweep" resume <<'PY'
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
assert sorted(r["algorithm.name"] for r in rows) == ["local_sgd", "pipe_sgd", "sync"], rows
assert all(r["status"] == "ok" for r in rows), [(r["dir"], r["status"]) for r in rows]
runs = [d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)) and d != "plans"]
assert sorted(runs) == sorted(r["dir"] for r in rows), f"stray folders: {runs}"
attempts = {r["dir"]: json.load(open(os.path.join(out, r["dir"], "sweep_status.json")))["attempt"]
            for r in rows}
assert all(a in (1, 2) for a in attempts.values()), attempts
PY

# --- an interrupted run that left a checkpoint continues with dtrain --resume -----------------
cat base.yaml > ckpt.yaml
echo "checkpoint: {every_epochs: 1}" >> ckpt.yaml
# An emulated link (50 ms a message) holds each 16-iteration epoch for about a second whatever
# the machine's speed: the SIGTERM sent once the first checkpoint is there finds the run in
# progress (the 3 epochs left take seconds), and the run stops 8 iterations after it.
ckpt_args=(--config ckpt.yaml --ranks 2 --set train.epochs=4 --set cluster.link.bandwidth=10Gbps
           --set cluster.link.latency=50ms --out ckpt)
has_checkpoint() { ls ckpt/*/checkpoints/*/manifest.yaml > /dev/null 2>&1; }
setsid "$PY" "$SWEEP" --dtrain "$DTRAIN" "${ckpt_args[@]}" > ckpt1.out 2>&1 &
sweep_pid=$!
wait_until "$sweep_pid" has_checkpoint
kill -TERM "$sweep_pid"
wait "$sweep_pid"; rc=$?
[ "$rc" -eq 143 ] || fail "SIGTERM to the sweep: exit $rc, expected 143: $(cat ckpt1.out)"
grep -qs '"status": "interrupted"' ckpt/*/sweep_status.json || fail "not recorded as interrupted: $(cat ckpt/*/sweep_status.json)"
sweep "${ckpt_args[@]}" > ckpt2.out 2>&1 || fail "resumed sweep: $(cat ckpt2.out)"
grep -q "resuming from its checkpoint ... done in" ckpt2.out || fail "the run was not resumed: $(cat ckpt2.out)"
grep -qs -- '--resume' ckpt/*/sweep_status.json || fail "the record lacks --resume"
[ "$(wc -l < ckpt/*/accuracy.csv)" -eq 5 ] || fail "resumed run: $(wc -l ckpt/*/accuracy.csv) rows, expected 4 + header"

# --- a failing run among good ones: reported, the rest finish, exit 1 ------------------------
sweep --config base.yaml --grid optimizer.lr=-1,0.05 --set train.max_iterations=3 \
      --out failing > failing.out 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "sweep with a failing run: exit $rc, expected 1"
grep -q '^\[2/2\] optimizer.lr=0.05 \.\.\. done in' failing.out \
  || fail "the run after the failing one did not finish: $(cat failing.out)"
grep -q 'optimizer.lr=-1: exit 2' failing.out || fail "failure list lacks the run: $(cat failing.out)"
grep -q 'optimizer.lr: must be > 0' failing.out \
  || fail "failure list lacks the end of dtrain's log: $(cat failing.out)"
check_python "failing summary" failing <<'PY'
import csv, os, sys
rows = {r["optimizer.lr"]: r for r in csv.DictReader(open(os.path.join(sys.argv[1], "summary.csv")))}
assert rows["-1"]["status"] == "failed" and rows["-1"]["exit_code"] == "2", rows["-1"]
assert rows["0.05"]["status"] == "ok" and float(rows["0.05"]["samples_per_s"]) > 0, rows["0.05"]
PY

# --- --dry-run lists the runs and their commands, runs nothing -------------------------------
sweep --config base.yaml --ranks 1,2 --grid algorithm.name=sync,pipe_sgd --plan --dry-run \
      --out dry > dry.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "--dry-run: exit $rc"
[ ! -e dry ] || fail "--dry-run created its output folder"
[ "$(grep -c '^\[[1-4]/4\] algorithm=' dry.out)" -eq 4 ] || fail "--dry-run lists: $(cat dry.out)"
grep -q "mpirun -np 2 .*dtrain --config .*base.yaml --out dry/algorithm=pipe_sgd,ranks=2 --set algorithm.name=pipe_sgd" dry.out \
  || fail "--dry-run does not show the full command: $(cat dry.out)"
sweep --config base.yaml --ranks 1,2 --grid algorithm.name=sync,pipe_sgd \
      --grid compression.name=none,quantize8 --set train.max_iterations=6 --target 0.3 \
      --dry-run --out grid > dry_grid.out 2>&1
[ "$(grep -c 'complete: would be skipped' dry_grid.out)" -eq 8 ] \
  || fail "--dry-run over a finished sweep should say every run would be skipped"

# --- bad sweep arguments: exit 2, a message, nothing run ------------------------------------
expect_usage_error() {  # expect_usage_error WHAT-THE-MESSAGE-SAYS ARGS...
  local says=$1
  shift
  sweep "$@" --out bad > bad.out 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || fail "sweep $*: exit $rc, expected 2"
  grep -q -- "$says" bad.out || fail "sweep $*: message lacks '$says': $(cat bad.out)"
  [ ! -e bad ] || fail "sweep $*: created its output folder"
}
expect_usage_error "expected KEY=VALUE" --config base.yaml --grid algorithm.name
expect_usage_error "empty value" --config base.yaml --grid algorithm.name=sync,
expect_usage_error "--ranks" --config base.yaml --ranks 0,2
expect_usage_error "no such file" --config missing.yaml
expect_usage_error "both in --set and in --grid" --config base.yaml --grid optimizer.lr=0.1,0.2 \
                   --set optimizer.lr=0.3
expect_usage_error "not an executable" --config base.yaml --dtrain "$WORK/no-dtrain"
[ -n "${KEEP_WORK:-}" ] && cp -r "$WORK" "$KEEP_WORK"  # KEEP_WORK=DIR: keep the scratch folder
finish
