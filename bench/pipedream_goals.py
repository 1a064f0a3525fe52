#!/usr/bin/python3
"""PipeDream goals, every ratio measured in one run of this script: the paper's
Table 1 in shape — pipeline parallelism beats data parallelism where communication dominates,
with a fraction of its traffic and the same accuracy.

 1. Speed, the communication-bound case: the zoo's VGG-16 (33.6M parameters at 32x32) on
    synthetic 3x32x32 images, global minibatch 64, 2 ranks x 1 thread, every message paced to an
    emulated 1 Gbit/s + 50 us link, SGD with momentum 0.9 for both (configs/paper/pipedream/
    small/synthetic_vgg16_*.yaml): sync (all-reduce of every gradient) against pipedream (two
    stages cut before conv3_3, 1f1b with weight stashing). 2 epochs of 20 minibatches, --rounds
    rounds one after the other; samples/s of the second epoch from timing.csv (the first pays
    for creating the compute primitives, differently for one whole model and a stage's graphs
    per minibatch in flight), the slowest rank's wall time. Goal: pipedream >= 2x sync.
 2. Traffic: bytes sent per training sample, all ranks together. pipedream from pipeline.csv
    (activations, gradients and replicas' all-reduces); sync from its ring all-reduce's volume
    (each rank sends 2(p-1)/p of the 4-byte gradient of every parameter per iteration). Goal:
    pipedream <= 10 % of sync (the paper: 90-95 % less).
 3. Accuracy: LeNet-5 on Fashion-MNIST, 2 ranks, global minibatch 64, SGD momentum 0.9, lr 0.05
    cosine, 5 epochs, --seeds seeds (configs/paper/pipedream/small/fashion_lenet_*.yaml): the
    convolutions on rank 0 and the classifier on rank 1 (1f1b, weight stashing) against sync.
    Goal: pipedream's mean final test accuracy within 1 point of sync's.
All runs go through scripts/sweep.py; --out keeps them (and scripts/plot.py's figures).

    /usr/bin/python3 bench/pipedream_goals.py [--build build] [--rounds 2] [--seeds 2] [--out DIR]
"""
import argparse, csv, os, re, statistics, subprocess, sys, tempfile

from dtrain_runs import ENV, ROOT, binary, epoch_iteration_seconds, verdict  # beside this script

SMALL = os.path.join(ROOT, "configs", "paper", "pipedream", "small")
SCRIPTS = os.path.join(ROOT, "scripts")
PYTHON = "/usr/bin/python3"
SPEED = {"sync": "{name: sync}",
         "pipedream": "{name: pipedream, schedule: 1f1b, stages: [conv3_3]}"}
ACCURACY = {"sync": "{name: sync}",
            "pipedream": "{name: pipedream, schedule: 1f1b, stages: [f5]}"}


def sweep(dtrain, config, out, grid, extra):
    command = [PYTHON, os.path.join(SCRIPTS, "sweep.py"), "--config", config, "--ranks", "2",
               "--dtrain", dtrain, "--out", out, "--grid", "algorithm=" + ",".join(grid.values())]
    run = subprocess.run(command + extra, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        sys.exit(f"sweep.py failed ({run.returncode}):\n{run.stdout[-3000:]}")
    labels = {v: k for k, v in grid.items()}
    rows = {}
    for row in csv.DictReader(open(os.path.join(out, "summary.csv"))):
        if row["status"] != "ok":
            sys.exit(f"{out}: run {row['dir']} did not finish ({row['status']})")
        row["dir"] = os.path.join(out, row["dir"])
        rows[(labels[row["algorithm"]], row.get("seed", ""))] = row
    return rows


def epoch_rate(run_dir, epoch, batch):
    """Samples/s of one epoch: its minibatches over the slowest rank's wall time."""
    return batch / epoch_iteration_seconds(run_dir, epoch)


def bytes_per_sample(label, run_dir, epochs, batch, ranks=2):
    log = open(os.path.join(run_dir, "log.txt")).read()
    iterations = sum(int(r["iterations"]) for r in csv.DictReader(open(os.path.join(
        run_dir, "timing.csv"))) if r["rank"] == "0")
    if label == "pipedream":
        total = sum(int(r["activation_bytes_sent"]) + int(r["gradient_bytes_sent"]) +
                    int(r["allreduce_bytes_sent"])
                    for r in csv.DictReader(open(os.path.join(run_dir, "pipeline.csv"))))
    else:
        parameters = int(re.search(r"^parameters: (\d+)", log, re.M)[1])
        total = iterations * ranks * 2 * (ranks - 1) / ranks * 4 * parameters
    return total / (iterations * batch)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5, help="of the accuracy runs")
    ap.add_argument("--out", help="keep the sweeps (and their figures) here instead of a temp dir")
    a = ap.parse_args()
    dtrain = binary(a.build)
    batch = 64

    with tempfile.TemporaryDirectory() as temporary:
        top = a.out or temporary
        vgg = os.path.join(SMALL, "synthetic_vgg16_sync.yaml")
        rates, traffic = [], {}
        for r in range(1, a.rounds + 1):
            rows = sweep(dtrain, vgg, os.path.join(top, f"speed_round{r}"), SPEED,
                         ["--set", "train.epochs=2"])
            rates.append({(label, e): epoch_rate(rows[(label, "")]["dir"], e, batch)
                          for label in SPEED for e in (1, 2)})
            for label in SPEED:
                traffic[label] = bytes_per_sample(label, rows[(label, "")]["dir"], 2, batch)
            pipeline = open(os.path.join(rows[("pipedream", "")]["dir"], "pipeline.csv")).read()
        seeds = ",".join(str(s) for s in range(1, a.seeds + 1))
        acc_out = os.path.join(top, "accuracy")
        acc = sweep(dtrain, os.path.join(SMALL, "fashion_lenet_sync.yaml"), acc_out, ACCURACY,
                    ["--grid", f"seed={seeds}", "--set", f"train.epochs={a.epochs}"])
        subprocess.run([PYTHON, os.path.join(SCRIPTS, "plot.py"), acc_out], env=ENV,
                       capture_output=True)

    print("VGG-16 (32x32 synthetic), global minibatch 64, 2 ranks x 1 thread, link 1 Gbit/s + "
          "50 us, SGD momentum 0.9; samples/s of epoch 2 (20 minibatches)")
    print(f"{'round':>5} {'sync':>10} {'pipedream':>10} {'ratio':>7}   (epoch 1: sync, pipedream, "
          "ratio)")
    ratios = []
    for i, r in enumerate(rates, 1):
        ratios.append(r[("pipedream", 2)] / r[("sync", 2)])
        print(f"{i:5} {r[('sync', 2)]:10.1f} {r[('pipedream', 2)]:10.1f} {ratios[-1]:6.2f}x   "
              f"({r[('sync', 1)]:.1f}, {r[('pipedream', 1)]:.1f}, "
              f"{r[('pipedream', 1)] / r[('sync', 1)]:.2f}x)")
    ratio = statistics.median(ratios)
    share = traffic["pipedream"] / traffic["sync"]
    print("\npipeline.csv of the last round:\n" + pipeline.rstrip())
    print(f"\nbytes sent per sample: sync {traffic['sync'] / 1e6:.2f} MB, pipedream "
          f"{traffic['pipedream'] / 1e6:.3f} MB ({share * 100:.1f} % of sync)")
    seed_list = [str(s) for s in range(1, a.seeds + 1)]
    mean = {label: statistics.mean(float(acc[(label, s)]["final_test_acc"]) for s in seed_list)
            * 100 for label in ACCURACY}
    print(f"\nLeNet-5 on Fashion-MNIST, 2 ranks, minibatch 64, {a.epochs} epochs, final test "
          f"accuracy, mean of {a.seeds} seed(s):")
    for label in ACCURACY:
        print(f"  {label:10} {mean[label]:6.2f}%  per seed: " + " ".join(
            f"{float(acc[(label, s)]['final_test_acc']) * 100:.2f}" for s in seed_list))
    gap = mean["sync"] - mean["pipedream"]
    print(f"\npipedream samples/s vs sync (median of {a.rounds} round(s)): {ratio:.2f}x "
          f"(goal >= 2x): {verdict(ratio >= 2)}")
    print(f"pipedream bytes per sample vs sync: {share * 100:.1f} % (goal <= 10 %): "
          f"{verdict(share <= 0.10)}")
    print(f"LeNet accuracy: pipedream - sync = {-gap:+.2f} points (goal within 1): "
          f"{verdict(abs(gap) <= 1.0)}")
    if a.out:
        print(f"figures: {top}/accuracy/accuracy_vs_time.png, {top}/accuracy/time_breakdown.png")


if __name__ == "__main__":
    sys.exit(main())
