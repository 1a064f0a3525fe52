#!/usr/bin/python3
"""SAPipe's speed against Pipe-SGD's on the same pipeline: every compensation >= 0.9x.

Fashion-MNIST MLP (784-500-500-10), global batch 100, 2 ranks x 1 thread, 8-bit quantised
gradients, every message paced to an emulated 1 Gbit/s + 50 us link (there SAPipe's chooser
makes every layer stale: sapipe is Pipe-SGD with K = 2 plus its compensation's passes), SGD with
momentum 0.9 (configs/paper/sapipe/small/). Each pair runs pipe_sgd (K: 2) and sapipe
(stale_layers auto, one compensation) one after the other, the order alternating from pair to
pair, so that a drift of the shared machine hits both alike; the ratio of a pair is sapipe's
iterations/s over pipe_sgd's in the second epoch (the first holds sapipe's profile of D-Sync
iterations and the start-up), the slowest rank's wall time; the median over the pairs counts.

    /usr/bin/python3 bench/sapipe_vs_pipe_sgd.py [--build build] [--pairs 5]
        [--compensations none,dc,wp1,wp2,wp3] [--optimizer sgd|adamw]
"""
import argparse, os, re, statistics, subprocess, sys, tempfile

from dtrain_runs import ENV, ROOT, binary, epoch_iteration_seconds, verdict  # beside this script

CONFIG = os.path.join(ROOT, "configs", "paper", "sapipe", "small", "fashion_mlp_sapipe.yaml")
MPIRUN = ["mpirun", "--oversubscribe", "-np", "2"]
GOAL = 0.9
ADAMW = "optimizer={name: adamw, lr: 0.001, betas: [0.9, 0.98], weight_decay: 0.01}"


def iterations_per_s(dtrain, algorithm, optimizer):
    """Iterations/s of the second epoch (the slowest rank's wall time), and the stale layers
    sapipe's `auto` chose ("k/m", '' for pipe_sgd): a noisy profile can choose fewer."""
    with tempfile.TemporaryDirectory() as d:
        command = MPIRUN + [dtrain, "--config", CONFIG, "--out", d,
                            "--set", "train.epochs=2", "--set", "train.eval_every_epochs=2",
                            "--set", "cluster.link={bandwidth: 1Gbps, latency: 50us}",
                            "--set", "compression.name=quantize8", "--set", f"algorithm={algorithm}"]
        if optimizer == "adamw":
            command += ["--set", ADAMW]
        run = subprocess.run(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout[-3000:]}")
        m = re.search(r"stale_layers auto → sapipe \((\d+) of (\d+) layers",
                      run.stdout)
        return 1.0 / epoch_iteration_seconds(d, 2), f"{m[1]}/{m[2]}" if m else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--compensations", default="none,dc,wp1,wp2,wp3")
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    a = ap.parse_args()
    dtrain = binary(a.build)
    pipe = "{name: pipe_sgd, K: 2}"
    compensations = a.compensations.split(",")
    ratios = {c: [] for c in compensations}
    rates = {c: [] for c in compensations}
    pipe_rates = []
    print(f"Fashion-MNIST MLP, 2 ranks x 1 thread, batch 100, quantize8, {a.optimizer}, link "
          f"1 Gbit/s + 50 us; iterations/s of epoch 2; {a.pairs} pairs per compensation, order "
          f"alternating", flush=True)
    for p in range(a.pairs):
        for c in compensations:
            sapipe = f"{{name: sapipe, stale_layers: auto, compensation: {c}}}"
            if (p + compensations.index(c)) % 2 == 0:
                r_pipe, _ = iterations_per_s(dtrain, pipe, a.optimizer)
                r_sap, k = iterations_per_s(dtrain, sapipe, a.optimizer)
            else:
                r_sap, k = iterations_per_s(dtrain, sapipe, a.optimizer)
                r_pipe, _ = iterations_per_s(dtrain, pipe, a.optimizer)
            ratios[c].append(r_sap / r_pipe)
            rates[c].append(r_sap)
            pipe_rates.append(r_pipe)
            print(f"  pair {p + 1} {c:5}: pipe_sgd {r_pipe:7.1f} it/s, sapipe {r_sap:7.1f} it/s, "
                  f"ratio {r_sap / r_pipe:.3f}, k {k}", flush=True)
    print(f"\n{'compensation':12} {'sapipe it/s':>12} {'pipe_sgd it/s':>14} {'ratio':>7}  "
          f"pairs                      goal >= {GOAL}x")
    ok = True
    for c in compensations:
        m = statistics.median(ratios[c])
        ok &= m >= GOAL
        print(f"{c:12} {statistics.median(rates[c]):12.1f} {statistics.median(pipe_rates):14.1f} "
              f"{m:6.3f}x  {' '.join(f'{r:.3f}' for r in ratios[c]):26} "
              f"{'PASS' if m >= GOAL else 'FAIL'}")
    print(f"every compensation >= {GOAL}x pipe_sgd: {verdict(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
