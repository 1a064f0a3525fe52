#!/usr/bin/python3
"""Pipe-SGD goals, every ratio measured in one run of this script.

Fashion-MNIST MLP (784-500-500-10), global batch 100, 2 ranks x 1 thread:
 1. under an emulated link (default 1 Gbit/s + 50 us): samples/s of pipe_sgd + quantize8 vs
    sync + none (goal >= 3.5x);
 2. overlap: (T_sync - T_pipe) / min(c, m) >= 0.8 for none and for quantize8, with c the compute
    time per iteration (forward + backward + update) and m the communication time per iteration
    (comm + compress), both from the sync run's timing.csv;
 3. the timing model (`dtrain plan`) within 15 % of the measured time per iteration for sync,
    ps_sync and pipe_sgd, with none and quantize8;
 4. final test accuracy after 5 epochs: pipe_sgd (warmup_epochs 0), with none and quantize8,
    within 0.5 points of sync (no emulation: the arithmetic does not depend on the link);
 5. without emulation pipe_sgd is not slower than sync (samples/s >= 1.0x);
 6. (information) the effect of warm-up on a CNN: LeNet-5 with sync, pipe_sgd warm-up 0 and 1
    at the config's lr 0.05 and at lr 0.1 (momentum 0.9 throughout).

With --precision bf16 every run trains in bf16 mixed precision (cluster.precision): the
gradients stay f32, so the communication is the same and the compute changes; --link-only runs
parts 1-3 alone (the emulated link: does Pipe-SGD still hide its communication?).

    /usr/bin/python3 bench/pipe_sgd_goals.py [--build build] [--iterations 300] [--rounds 2]
        [--precision fp32|bf16] [--link-only]
"""
import argparse, csv, os, subprocess, sys, tempfile

from dtrain_runs import ENV, ROOT, binary, plan, sets, verdict  # beside this script
MPIRUN = ["mpirun", "--oversubscribe", "-np", "2"]
MLP = os.path.join(ROOT, "configs", "paper", "small", "fashion_mlp_dsync.yaml")
LENET = os.path.join(ROOT, "configs", "paper", "small", "lenet_pipesgd_warmup0.yaml")


def train(dtrain, config, overrides, may_diverge=False):
    """Per-epoch rows of timing.csv (all ranks) and accuracy.csv; None if it diverged (exit 1)
    and that was allowed."""
    with tempfile.TemporaryDirectory() as d:
        run = subprocess.run(MPIRUN + [dtrain, "--config", config, "--out", d] + sets(overrides),
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            if may_diverge and "diverged" in run.stderr:
                return None
            sys.exit(f"dtrain failed ({run.returncode}):\n{run.stderr}")
        timing = list(csv.DictReader(open(os.path.join(d, "timing.csv"))))
        accuracy = list(csv.DictReader(open(os.path.join(d, "accuracy.csv"))))
    return timing, accuracy


def per_iteration(timing):
    """Iteration time (slowest rank), compute c and communication m per iteration (mean rank)."""
    ranks = sorted({r["rank"] for r in timing})
    def total(rank, *cols):
        return sum(float(r[c]) for r in timing if r["rank"] == rank for c in cols)
    its = total(ranks[0], "iterations")
    t = max(total(k, "wall_s") for k in ranks) / its
    c = sum(total(k, "forward_s", "backward_s", "update_s") for k in ranks) / len(ranks) / its
    m = sum(total(k, "comm_s", "compress_s") for k in ranks) / len(ranks) / its
    return t, c, m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iterations", type=int, default=300, help="timed iterations per run")
    ap.add_argument("--rounds", type=int, default=2, help="runs per setting (best is kept)")
    ap.add_argument("--bandwidth", default="1Gbps")
    ap.add_argument("--latency", default="50us")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--link-only", action="store_true", help="parts 1-3 only")
    a = ap.parse_args()
    dtrain = binary(a.build)
    precision = [f"cluster.precision={a.precision}"]
    link = [f"cluster.link.bandwidth={a.bandwidth}", f"cluster.link.latency={a.latency}"] + precision
    no_link = ["cluster.link=null"] + precision
    timed = link + ["train.epochs=1", f"train.max_iterations={a.iterations}"]
    settings = [(alg, codec) for alg in ("sync", "ps_sync", "pipe_sgd")
                for codec in ("none", "quantize8")]
    goals = []

    # 1-3: emulated link. Settings alternate within each round so that drifts hit all alike.
    best = {}
    for _ in range(a.rounds):
        for alg, codec in settings:
            t, c, m = per_iteration(train(dtrain, MLP, timed + [f"algorithm={{name: {alg}}}",
                                                                f"compression.name={codec}"])[0])
            if (alg, codec) not in best or t < best[(alg, codec)][0]:
                best[(alg, codec)] = (t, c, m)
    predicted = plan(dtrain, MLP, link)
    print(f"Fashion-MNIST MLP, 2 ranks x 1 thread, global batch 100, {a.precision}, link "
          f"{a.bandwidth} + {a.latency}, best of {a.rounds} x {a.iterations} iterations")
    print(f"{'algorithm':10} {'codec':10} {'iter_ms':>8} {'c_ms':>7} {'m_ms':>7} "
          f"{'samples/s':>10} {'plan_ms':>8} {'error':>7}")
    worst_error = 0.0
    for alg, codec in settings:
        t, c, m = best[(alg, codec)]
        p = predicted[(alg, codec)]
        err = (p - t) / t
        worst_error = max(worst_error, abs(err))
        print(f"{alg:10} {codec:10} {t * 1e3:8.2f} {c * 1e3:7.2f} {m * 1e3:7.2f} "
              f"{100 / t:10.0f} {p * 1e3:8.2f} {err * 100:+6.1f}%")
    speedup = best[("sync", "none")][0] / best[("pipe_sgd", "quantize8")][0]
    goals.append(f"pipe_sgd+quantize8 vs sync+none: {speedup:.2f}x (goal >= 3.5x): "
                 f"{verdict(speedup >= 3.5)}")
    for codec in ("none", "quantize8"):
        ts, c, m = best[("sync", codec)]
        tp = best[("pipe_sgd", codec)][0]
        overlap = (ts - tp) / min(c, m)
        goals.append(f"overlap with {codec}: (T_sync - T_pipe) / min(c, m) = "
                     f"({ts * 1e3:.2f} - {tp * 1e3:.2f}) / {min(c, m) * 1e3:.2f} ms = "
                     f"{overlap:.2f} (goal >= 0.8): {verdict(overlap >= 0.8)}")
    goals.append(f"timing model: worst error {worst_error * 100:.1f}% (goal <= 15%): "
                 f"{verdict(worst_error <= 0.15)}")

    if a.link_only:
        print("\n" + "\n".join(goals))
        return 0

    # 4: accuracy after 5 epochs, no emulation.
    acc = {}
    for alg, codec in (("sync", "none"), ("pipe_sgd", "none"), ("pipe_sgd", "quantize8")):
        keys = ", warmup_epochs: 0" if alg == "pipe_sgd" else ""
        rows = train(dtrain, MLP, no_link + ["train.epochs=5", f"algorithm={{name: {alg}{keys}}}",
                                             f"compression.name={codec}"])[1]
        acc[(alg, codec)] = [float(r["test_acc"]) for r in rows]
    print("\ntest accuracy per epoch (5 epochs, no emulation):")
    for k, v in acc.items():
        print(f"  {k[0]:9} {k[1]:10} " + " ".join(f"{x:.4f}" for x in v))
    for codec in ("none", "quantize8"):
        gap = (acc[("sync", "none")][-1] - acc[("pipe_sgd", codec)][-1]) * 100
        goals.append(f"accuracy: sync {acc[('sync', 'none')][-1] * 100:.2f}% vs pipe_sgd+{codec} "
                     f"{acc[('pipe_sgd', codec)][-1] * 100:.2f}% ({gap:+.2f} points, goal within "
                     f"0.5): {verdict(abs(gap) <= 0.5 or gap < 0)}")

    # 5: no emulation, whole epochs.
    rate = {}
    for _ in range(a.rounds + 1):
        for alg in ("sync", "pipe_sgd"):
            t = per_iteration(train(dtrain, MLP, no_link + ["train.epochs=2",
                                                            f"algorithm={{name: {alg}}}"])[0])[0]
            rate[alg] = max(rate.get(alg, 0), 100 / t)
    r = rate["pipe_sgd"] / rate["sync"]
    goals.append(f"no emulation: pipe_sgd {rate['pipe_sgd']:.0f} vs sync {rate['sync']:.0f} "
                 f"samples/s = {r:.2f}x (goal >= 1.0x): {verdict(r >= 1.0)}")

    # 6: warm-up on a CNN.
    print("\nLeNet-5 on Fashion-MNIST (configs/paper/small/lenet_pipesgd_warmup0.yaml: lr 0.05, "
          "momentum 0.9), 2 ranks, 5 epochs, test accuracy per epoch:")
    # Whole algorithm maps: each algorithm takes only its own keys (sync has no warmup_epochs).
    pipe = "algorithm={name: pipe_sgd, K: 2, warmup_epochs: %d}"
    for name, extra in (("sync", ["algorithm={name: sync}"]),
                        ("pipe_sgd warm-up 0", [pipe % 0]),
                        ("pipe_sgd warm-up 1", [pipe % 1]),
                        ("pipe_sgd w-up 0, lr 0.1", [pipe % 0, "optimizer.lr=0.1"]),
                        ("pipe_sgd w-up 1, lr 0.1", [pipe % 1, "optimizer.lr=0.1"])):
        result = train(dtrain, LENET, no_link + extra, may_diverge=True)
        print(f"  {name:20} " + ("diverged" if result is None else
                                 " ".join(f"{float(x['test_acc']):.4f}" for x in result[1])))

    print("\n" + "\n".join(goals))


if __name__ == "__main__":
    sys.exit(main())
