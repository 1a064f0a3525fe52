#!/usr/bin/python3
"""Tracing overhead: training samples/s of the Fashion-MNIST MLP with output.trace on
and off, in one run of this script (goal: on costs < 3 %).

Two estimates, both printed:
 1. across runs: whole runs with tracing off and on (and, with --baseline, a dtrain built without
    the trace hooks, for "off costs nothing measurable"), alternating; each one's median
    samples/s. On 2 ranks sharing 2 cores this is noisy (±5 % between identical runs).
 2. within runs: runs of 5 epochs that trace a window of two epochs, [2, 3] or [4, 5] (epoch 1
    warms up), so that traced and untraced epochs share one set of processes; the on/off ratio
    of a pair of runs is the geometric mean of both runs' ratios (a drift during a run cancels).
    The goal is judged on this one; the median over rounds is kept.
Samples/s = iterations x global batch over the slowest rank's epoch wall time (evaluation and
set-up excluded).

    /usr/bin/python3 bench/trace_overhead.py [--build build] [--ranks 1 2] [--rounds 5]
        [--baseline OLD_BUILD]
"""
import argparse, csv, math, os, statistics, subprocess, sys, tempfile

from dtrain_runs import ENV, ROOT, binary, sets  # beside this script

CONFIG = os.path.join(ROOT, "configs", "fashion_mlp_sync.yaml")
WINDOWS = ([2, 3], [4, 5])  # traced epochs of the within-run estimate (of 5)


def epoch_rates(dtrain, ranks, overrides, flags):
    """Samples/s of each epoch (1-based dict) of one run, and whether it wrote trace.json."""
    launch = ["mpirun", "--oversubscribe", "-np", str(ranks)] if ranks > 1 else []
    with tempfile.TemporaryDirectory() as d:
        run = subprocess.run(launch + [dtrain, "--config", CONFIG, "--out", d] + flags +
                             sets(overrides), env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"dtrain failed ({run.returncode}):\n{run.stderr}")
        timing = list(csv.DictReader(open(os.path.join(d, "timing.csv"))))
        batch = next(int(l.split(":")[1]) for l in open(os.path.join(d, "config.yaml"))
                     if l.strip().startswith("batch_size:"))
        traced = os.path.exists(os.path.join(d, "trace.json"))
    rates = {}
    for epoch in sorted({int(r["epoch"]) for r in timing}):
        rows = [r for r in timing if int(r["epoch"]) == epoch]
        wall = max(float(r["wall_s"]) for r in rows)
        rates[epoch] = int(rows[0]["iterations"]) * batch / wall
    return rates, traced


def whole_run_rate(rates):
    return len(rates) / sum(1 / r for r in rates.values())  # equal samples per epoch


def across_runs(a, ranks):
    quiet = ["--progress", "none"]
    runs = {"off": (binary(a.build), ["output.trace=false"], quiet),
            "on": (binary(a.build), ["output.trace=true"], quiet)}
    if a.baseline:  # older than --progress: its log lines go to /dev/null alike
        runs["baseline"] = (binary(a.baseline), [], [])
    rates = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, (dtrain, overrides, flags) in runs.items():
            per_epoch, traced = epoch_rates(dtrain, ranks, ["train.epochs=2"] + overrides, flags)
            if traced != (k == "on"):
                sys.exit(f"{k}: trace.json {'missing' if k == 'on' else 'written'}")
            rates[k].append(whole_run_rate(per_epoch))
    return {k: statistics.median(v) for k, v in rates.items()}


def within_runs(a, ranks):
    ratios = []
    for _ in range(a.rounds):
        pair = []
        for on in WINDOWS:
            per_epoch, _ = epoch_rates(binary(a.build), ranks,
                                       ["train.epochs=5", f"output.trace={{epochs: {on}}}"],
                                       ["--progress", "none"])
            off = [e for w in WINDOWS if w is not on for e in w]
            pair.append(statistics.mean(per_epoch[e] for e in on) /
                        statistics.mean(per_epoch[e] for e in off))
        ratios.append(math.sqrt(pair[0] * pair[1]))
    return statistics.median(ratios), min(ratios), max(ratios)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline", help="build folder of a dtrain without trace hooks")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()

    print(f"Fashion-MNIST MLP 784-500-500-10 (configs/fashion_mlp_sync.yaml), median of "
          f"{a.rounds} rounds")
    print("across runs (2 epochs each, alternating):")
    print(f"{'ranks':>5} {'off samples/s':>14} {'on samples/s':>13} {'on/off':>7}" +
          (f" {'baseline samples/s':>19} {'off/baseline':>13}" if a.baseline else ""))
    worst = 0.0
    within = {}
    for ranks in a.ranks:
        m = across_runs(a, ranks)
        line = f"{ranks:5d} {m['off']:14.0f} {m['on']:13.0f} {m['on'] / m['off']:7.3f}"
        if a.baseline:
            line += f" {m['baseline']:19.0f} {m['off'] / m['baseline']:13.3f}"
        print(line, flush=True)
        within[ranks] = within_runs(a, ranks)
    print("within runs (5 epochs, epochs [2, 3] or [4, 5] traced; on/off of traced vs untraced "
          "epochs):")
    print(f"{'ranks':>5} {'on/off':>7} {'min':>7} {'max':>7}")
    for ranks, (median, low, high) in within.items():
        worst = max(worst, 1 - median)
        print(f"{ranks:5d} {median:7.3f} {low:7.3f} {high:7.3f}")
    print(f"goal: tracing on costs < 3 % of samples/s (within runs): worst cost "
          f"{100 * worst:.1f} % -> {'met' if worst < 0.03 else 'NOT met'}")


if __name__ == "__main__":
    main()
