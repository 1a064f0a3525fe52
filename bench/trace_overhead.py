#!/usr/bin/python3
"""Tracing overhead (issue 12): training samples/s of the Fashion-MNIST MLP with output.trace on
and off, in one run of this script (goal: on costs < 3 %). With --baseline, also a dtrain built
without the trace hooks (an older commit), tracing off: "off costs nothing measurable".

Runs alternate (off, on, [baseline]) so that the machine's drifts hit all alike; each
configuration's median samples/s is kept. Samples/s = iterations x global batch over the
slowest rank's epoch wall time (evaluation and set-up excluded).

    /usr/bin/python3 bench/trace_overhead.py [--build build] [--ranks 1 2] [--rounds 5]
        [--epochs 1] [--baseline OLD_BUILD]
"""
import argparse, csv, os, statistics, subprocess, sys, tempfile

from dtrain_runs import ENV, ROOT, binary, sets  # beside this script

CONFIG = os.path.join(ROOT, "configs", "fashion_mlp_sync.yaml")


def samples_per_s(dtrain, ranks, overrides, flags):
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
    if traced != any(o == "output.trace=true" for o in overrides):
        sys.exit("trace.json presence does not match output.trace")
    rank_ids = sorted({r["rank"] for r in timing})
    iterations = sum(int(r["iterations"]) for r in timing if r["rank"] == rank_ids[0])
    wall = max(sum(float(r["wall_s"]) for r in timing if r["rank"] == k) for k in rank_ids)
    return iterations * batch / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline", help="build folder of a dtrain without trace hooks")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    quiet = ["--progress", "none"]
    runs = {"off": (binary(a.build), ["output.trace=false"], quiet),
            "on": (binary(a.build), ["output.trace=true"], quiet)}
    if a.baseline:  # older than --progress: its log lines go to /dev/null alike
        runs["baseline"] = (binary(a.baseline), [], [])
    common = [f"train.epochs={a.epochs}"]

    print(f"Fashion-MNIST MLP 784-500-500-10 (configs/fashion_mlp_sync.yaml), {a.epochs} epoch(s), "
          f"median of {a.rounds} alternating runs")
    print(f"{'ranks':>5} " + " ".join(f"{k + ' samples/s':>20}" for k in runs) + f" {'on/off':>8}" +
          (f" {'off/baseline':>13}" if a.baseline else ""))
    worst = 0.0
    for ranks in a.ranks:
        rates = {k: [] for k in runs}
        for _ in range(a.rounds):
            for k, (dtrain, overrides, flags) in runs.items():
                rates[k].append(samples_per_s(dtrain, ranks, common + overrides, flags))
        median = {k: statistics.median(v) for k, v in rates.items()}
        on_off = median["on"] / median["off"]
        worst = max(worst, 1 - on_off)
        line = f"{ranks:5d} " + " ".join(f"{median[k]:20.0f}" for k in runs) + f" {on_off:8.3f}"
        if a.baseline:
            line += f" {median['off'] / median['baseline']:13.3f}"
        print(line)
    print(f"goal: tracing on costs < 3 % of samples/s: worst cost {100 * worst:.1f} % -> "
          f"{'met' if worst < 0.03 else 'NOT met'}")


if __name__ == "__main__":
    main()
