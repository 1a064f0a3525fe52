#!/usr/bin/python3
"""Two builds of dtrain against each other, as alternating A/B runs: the check that a refactoring
changed no speed. The machine drifts by 20-30 % between minutes, so each pair of runs (old, new —
the order alternating) gives one ratio, and the median ratio over the pairs is what counts.

Measured, with the workloads of the peer benchmarks so that "within noise" means the same thing:
  engine   single-thread training samples/s of engine_vs_pytorch.py's models (its configs: same
           batch, SGD, data), best epoch after the first of each run
  gpt      single-thread training tokens/s of lm_vs_pytorch.py's baby GPT (AdamW, clipped):
           one epoch of 300 iterations on a short copy of the corpus, evaluation not counted
  ring     busbw of the ring all-reduce (no codec) at 16 MiB on 2 ranks (comm_vs_peers.py part 1)
  sync     2-rank `sync` MLP samples/s on Fashion-MNIST (comm_vs_peers.py part 2)
  q8link   the same under an emulated 1 Gbit/s link with quantize8 (comm_vs_peers.py part 3)

    /usr/bin/python3 bench/ab_builds.py --old OLD_BUILD [--new build] [--pairs 5]
        [--models mlp,lenet,resnet20,cifar_cnn] [--parts engine,gpt,ring,sync,q8link]
"""
import argparse, os, statistics, sys, tempfile

import comm_vs_peers as comm  # busbw_ratio, dtrain_rate (beside this script)
import engine_vs_pytorch as engine  # MODELS, dtrain_run
import lm_vs_pytorch as lm  # MODELS, dtrain_run, short_corpus, tokens_per_s
from dtrain_runs import binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def engine_rate(build, name, tmp):
    m = engine.MODELS[name]
    if m["data"] == "fashion":  # two whole epochs, the first skipped
        return engine.dtrain_run(build, tmp, name, m, m["batch"], 1, 2, 0, True)[0]
    epochs, size = 3, m["iterations"] * m["batch"]
    return engine.dtrain_run(build, tmp, name, m, m["batch"], 1, epochs, size, True)[0]


def gpt_rate(build, tmp, iterations=300):
    m = lm.MODELS["baby"]
    text = open(lm.CORPUS, encoding="utf-8").read()
    corpus = lm.short_corpus(tmp, text, iterations * m["batch"], m["block"])
    run = lm.dtrain_run(build, tmp, "ab", m, corpus, 1, m["batch"],
                        {"epochs": 1, "eval_every_iterations": 0})
    return lm.tokens_per_s(run["timing"], m["batch"], m["block"])


def measurements(parts, models, iterations):
    """(label, function of a build folder → a number where higher is faster)."""
    out = []
    if "engine" in parts:
        for name in models:
            out.append((f"engine {name} samples/s",
                        lambda b, n=name: engine_rate(b, n, tempfile.mkdtemp(prefix="ab-"))))
    if "gpt" in parts:
        out.append(("gpt baby 1 thread tokens/s",
                    lambda b: gpt_rate(b, tempfile.mkdtemp(prefix="ab-"))))
    if "ring" in parts:
        out.append(("ring busbw GB/s, 16 MiB, 2 ranks", lambda b: comm.busbw_ratio(binary(b), 2)[0]))
    if "sync" in parts:
        out.append(("sync MLP 2 ranks samples/s",
                    lambda b: comm.dtrain_rate(binary(b), iterations)[0]))
    if "q8link" in parts:
        out.append(("sync+quantize8, 1 Gbit/s link, samples/s",
                    lambda b: comm.dtrain_rate(binary(b), iterations // 3,
                                               "cluster.link={bandwidth: 1Gbps, latency: 50us}",
                                               "compression.name=quantize8")[0]))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--old", required=True, help="the baseline's build folder")
    p.add_argument("--new", default=os.path.join(ROOT, "build"))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--models", default="mlp,lenet,resnet20,cifar_cnn")
    p.add_argument("--parts", default="engine,gpt,ring,sync,q8link")
    p.add_argument("--iterations", type=int, default=300, help="of the 2-rank MLP runs")
    a = p.parse_args()
    parts, models = a.parts.split(","), a.models.split(",")
    for b in (a.old, a.new):
        if not os.access(binary(b), os.X_OK):
            sys.exit(f"ab_builds: no dtrain in {b}")
    print(f"old: {a.old}\nnew: {a.new}\n{a.pairs} pairs per measurement, order alternating; "
          "ratio new/old per pair, median counts")
    print(f"{'measurement':44} {'old (median)':>13} {'new (median)':>13} {'new/old':>8}  pairs")
    for label, measure in measurements(parts, models, a.iterations):
        old, new, ratios = [], [], []
        for i in range(a.pairs):
            order = [(a.old, old), (a.new, new)] if i % 2 == 0 else [(a.new, new), (a.old, old)]
            for build, values in order:
                values.append(measure(build))
            ratios.append(new[-1] / old[-1])
        pairs = " ".join(f"{r:.3f}" for r in ratios)
        print(f"{label:44} {statistics.median(old):13.1f} {statistics.median(new):13.1f} "
              f"{statistics.median(ratios):8.3f}  {pairs}", flush=True)


if __name__ == "__main__":
    main()
