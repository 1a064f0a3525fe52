#!/usr/bin/env bash
# scripts/sweep.py and scripts/plot.py on language-model runs: a few iterations of the baby GPT
# (configs/gpt_kjv.yaml on a small text file) over two learning rates on 1 and 2 ranks. The
# summary's final_test_ppl and best_test_ppl are exp of accuracy.csv's test_loss, tokens_per_s is
# timing.csv's iterations × batch × block_size over wall_s (on 1 rank dtrain's printed tokens/s),
# --target-ppl gives time_to_target_s; an image sweep leaves those columns empty; plot.py draws
# the LM sweep's figures. Usage: test_sweep_lm.sh DTRAIN REPO_ROOT
source "$(dirname "$0")/lib.sh"
skip_without_modules yaml numpy matplotlib
cd "$WORK" || exit 1
for i in $(seq 1 200); do
  echo "In the beginning God created the heaven and the earth, day $i. And the earth was without form."
done > corpus.txt

# --- the LM sweep: lr 1e-3 and 3e-3 on 1 and 2 ranks, 4 iterations, evaluated at 2 and 4 ------
# A perplexity of 1000 is above a fresh model's (about the vocabulary's 36): reached at the first
# evaluation, whose time is then time_to_target_s.
# shellcheck disable=SC2054  # the commas are the grid's
lm_sweep=(--config "$ROOT/configs/gpt_kjv.yaml" --ranks 1,2 --grid optimizer.lr=1e-3,3e-3
          --set "dataset.path=$WORK/corpus.txt" --set train.max_iterations=4
          --set train.eval_every_iterations=2 --set dataset.test_size=24
          --set cluster.threads_per_rank=1 --target-ppl 1000 --out lm)
sweep "${lm_sweep[@]}" > lm.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "LM sweep: exit $rc, expected 0: $(tail -5 lm.out)"
[ "$(grep -c '^\[[1-4]/4\] .* done in [0-9.]* s (test acc [0-9.]*, perplexity [0-9.]*) | ETA' lm.out)" -eq 4 ] \
  || fail "LM sweep: expected 4 progress lines '... (test acc A, perplexity P) | ETA': $(cat lm.out)"
check_python "LM summary.csv" lm <<'PY'
import csv, json, math, os, re, sys
out = sys.argv[1]
reader = csv.DictReader(open(os.path.join(out, "summary.csv")))
columns = reader.fieldnames
rows = list(reader)
assert len(rows) == 4, f"{len(rows)} rows, expected 4"
# The existing columns keep their order; the new ones come last, before dir.
expected = ["optimizer.lr", "ranks", "repeat", "status", "exit_code", "seconds", "final_test_acc",
            "best_test_acc", "time_to_target_s", "epochs", "iterations", "samples_per_s",
            "iteration_s", "comm_s_per_iter", "wait_s_per_iter", "no_effect", "final_test_ppl",
            "best_test_ppl", "tokens_per_s", "dir"]
assert columns == expected, f"columns {columns}"
def close(a, b, what):
    assert math.isclose(a, b, rel_tol=2e-5), f"{what}: {a} != {b}"
for r in rows:
    name = r["dir"]
    assert r["status"] == "ok", f"{name}: {r['status']}"
    run_dir = os.path.join(out, name)
    accuracy = list(csv.DictReader(open(os.path.join(run_dir, "accuracy.csv"))))
    timing = list(csv.DictReader(open(os.path.join(run_dir, "timing.csv"))))
    assert len(accuracy) == 2, f"{name}: {len(accuracy)} evaluations, expected 2"
    losses = [float(row["test_loss"]) for row in accuracy]
    for column in ("final_test_ppl", "best_test_ppl", "tokens_per_s"):
        assert float(r[column]) > 0, f"{name}: {column} '{r[column]}'"
    close(float(r["final_test_ppl"]), math.exp(losses[-1]), f"{name} final_test_ppl")
    close(float(r["best_test_ppl"]), math.exp(min(losses)), f"{name} best_test_ppl")
    close(float(r["final_test_acc"]), float(accuracy[-1]["test_acc"]), f"{name} final_test_acc")
    # dtrain's arithmetic: iterations × batch (12) × block_size (64) over the slowest rank's
    # training wall time (one epoch here).
    iterations = max(int(row["iterations"]) for row in timing)
    wall = max(float(row["wall_s"]) for row in timing)
    assert iterations == 4 == int(r["iterations"]), f"{name}: {iterations} iterations"
    assert len(timing) == int(r["ranks"]), f"{name}: {len(timing)} timing rows"
    close(float(r["tokens_per_s"]), iterations * 12 * 64 / wall, f"{name} tokens_per_s")
    close(float(r["tokens_per_s"]), float(r["samples_per_s"]) * 64, f"{name} tokens vs samples")
    if r["ranks"] == "1":  # rank 0's wall is the only one: the number dtrain printed
        log = open(os.path.join(run_dir, "log.txt")).read()
        printed = float(re.findall(r"([0-9]+) tokens/s", log)[-1])
        assert abs(printed - float(r["tokens_per_s"])) <= 1, \
            f"{name}: dtrain printed {printed} tokens/s, summary {r['tokens_per_s']}"
    close(float(r["time_to_target_s"]), float(accuracy[0]["wall_s"]), f"{name} time_to_target_s")
definition = json.load(open(os.path.join(out, "sweep.json")))["definition"]
assert definition["target_ppl"] == 1000 and definition["target"] is None, definition
PY

# --- plot.py on the LM sweep: loss and perplexity against time and iterations, coloured by lr;
# scaling in tokens/s -------------------------------------------------------------------------
"$PY" "$PLOT" lm > plot.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "plot.py lm: exit $rc: $(cat plot.out)"
for name in loss_vs_time loss_vs_iteration accuracy_vs_time time_breakdown scaling; do
  [ -s "lm/$name.png" ] || { fail "lm/$name.png: missing or empty"; continue; }
  [ "$(head -c 4 "lm/$name.png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] \
    || fail "lm/$name.png: not a PNG"
done
grep -q "throughput (tokens/s)" lm/scaling.svg || fail "scaling.svg: throughput not in tokens/s"
grep -q "perplexity = exp(loss)" lm/loss_vs_iteration.svg \
  || fail "loss_vs_iteration: no perplexity axis"
grep -q "target perplexity 1000" lm/loss_vs_time.svg || fail "loss_vs_time: no --target-ppl line"
grep -q "skipped accuracy_vs_epoch: language-model runs" plot.out \
  || fail "plot.py should skip accuracy_vs_epoch for language models: $(cat plot.out)"

# --- an image sweep: the language-model columns are there and empty --------------------------
write_synthetic_config image.yaml "$WORK/unused"
sweep --config image.yaml --grid optimizer.lr=0.05,0.1 --set train.max_iterations=3 \
      --target-ppl 1000 --out image > image.out 2>&1 || fail "image sweep: $(tail -5 image.out)"
check_python "image summary.csv" image <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "summary.csv"))))
assert len(rows) == 2, rows
for r in rows:
    assert r["status"] == "ok" and float(r["samples_per_s"]) > 0, r
    for column in ("final_test_ppl", "best_test_ppl", "tokens_per_s", "time_to_target_s"):
        assert column in r and r[column] == "", f"{r['dir']}: {column} '{r.get(column)}'"
PY
grep -q "perplexity" image.out \
  && fail "image runs' progress lines name a perplexity: $(cat image.out)"

# --- a perplexity target below 1 is no perplexity: exit 2, nothing run ------------------------
sweep --config image.yaml --target-ppl 0.5 --out bad > bad.out 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "--target-ppl 0.5: exit $rc, expected 2"
grep -q -- "--target-ppl 0.5: a perplexity, at least 1" bad.out \
  || fail "--target-ppl message: $(cat bad.out)"
[ ! -e bad ] || fail "--target-ppl 0.5 created its output folder"
[ -n "${KEEP_WORK:-}" ] && cp -r "$WORK" "$KEEP_WORK"  # KEEP_WORK=DIR: keep the scratch folder
finish
