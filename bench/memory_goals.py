#!/usr/bin/python3
"""Issue 51's goals: what a rank holds under algorithm.shard and model.recompute, against the
memory model's prediction (--dry-run's table) and against `shard: none`; the speed the sharded
modes cost. One run prints every ratio with its verdict.

 1. State (2 ranks, AdamW, fp32): the dry run's per-rank table for each mode, and the measured
    peak resident memory (run.yaml's peak_rss_bytes, the larger rank) of a short run of the same
    config; measured / predicted (goal: within 10 %), and each mode's peak against none's
    (goals on GPT-2 medium: optimizer <= 0.8x, parameters <= 0.55x). The model: GPT-2 medium on
    the byte-level corpus (vocabulary 256: 304 M parameters), block 512, batch 1 a rank.
 2. Recomputation: build/bench/dtrain_recompute_bench (the wide GPT: activation bytes per token
    <= 0.3x at <= 1.4x the step time).
 3. Speed (2 ranks, the wide GPT 6/6/384 on block 256, and ResNet-20 on CIFAR-shaped synthetic
    images): iterations per second of each mode against none, with no link and at 1 Gbit/s +
    50 us, in interleaved rounds (best of --pairs); goal >= 0.95x for optimizer and gradients,
    >= 0.85x (no link) / 0.75x (1 Gbit/s) for parameters.
 4. Capability: GPT-2 large (774 M parameters: GPT-2's vocabulary of 50257, over the corpus's
    bytes written as an llm.c token file) with shard: parameters and recompute: blocks trains 5
    iterations on 2 ranks (both ranks' peak <= 14 GB together) while shard: none is refused up
    front by the memory check.

    /usr/bin/python3 bench/memory_goals.py [--build build] [--parts state,recompute,speed,capability]
        [--quick]   (a small GPT instead of GPT-2 medium, fewer pairs: a smoke test of the script)
"""
import argparse, csv, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtrain_runs import ENV, ROOT, binary, sets, verdict  # noqa: E402

CORPUS = os.path.join(ROOT, "datasets", "kjv", "kjv.txt")
MODES = ["none", "optimizer", "gradients", "parameters"]
SPEED_GOAL = {"optimizer": (0.95, 0.95), "gradients": (0.95, 0.95), "parameters": (0.85, 0.75)}
LINK = ["cluster.link={bandwidth: 1Gbps, latency: 50us}"]


def config(path, model, block, batch, iterations, dataset=None):
    dataset = dataset or (f"{{name: text, path: {CORPUS}, tokenizer: byte, block_size: {block}, "
                          f"batch_size: {batch}, test_size: {batch}}}")
    with open(path, "w") as f:
        f.write(f"""name: memory_goals
seed: 1
model: {model}
dataset: {dataset}
cluster: {{threads_per_rank: 1}}
algorithm: {{name: sync}}
optimizer: {{name: adamw, lr: 1.0e-4, weight_decay: 0.1, clip_grad_norm: 1.0}}
train: {{epochs: 1, max_iterations: {iterations}, eval_every_iterations: 0}}
""")
    return path


def dry_total(dtrain, cfg, overrides, ranks=2):
    """The dry run's per-rank total (bytes), or its exit message when refused."""
    r = subprocess.run([dtrain, "--config", cfg, "--dry-run", "--ranks", str(ranks)] +
                       sets(overrides), env=ENV, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["total"] and r.returncode == 0:
            return int(parts[-1]), ""
    errors = [l for l in r.stderr.splitlines() if "error" in l] or r.stderr.splitlines() or ["?"]
    return None, errors[0][:200]


def train(dtrain, cfg, out, overrides, ranks=2):
    r = subprocess.run(["mpirun", "-np", str(ranks), "--oversubscribe", dtrain, "--config", cfg,
                        "--out", out, "--overwrite", "--progress", "none"] + sets(overrides),
                       env=ENV, capture_output=True, text=True)
    errors = [l for l in r.stderr.splitlines() if "error" in l] or [""]
    return r.returncode, errors[0][:200]


def peak_rss(out):
    import yaml
    text = open(os.path.join(out, "run.yaml")).read().replace("\n# how", "\n---\n# how")
    return max(list(yaml.safe_load_all(text))[-1]["memory"]["peak_rss_bytes"])


def tokens_per_s(out):
    rows = list(csv.DictReader(open(os.path.join(out, "timing.csv"))))
    wall = max(float(r["wall_s"]) for r in rows)
    return int(rows[0]["iterations"]) / wall  # iterations per second: tokens scale alike


def part_state(dtrain, work, quick):
    model = "{name: gpt, n_layer: 4, n_head: 4, n_embd: 256}" if quick else "{name: gpt2, size: medium}"
    cfg = config(os.path.join(work, "state.yaml"), model, 128 if quick else 512, 2, 3)
    print(f"1. state per rank, 2 ranks, AdamW fp32, model {model}")
    peaks = {}
    for mode in MODES:
        o = [f"algorithm.shard={mode}"]
        predicted, why = dry_total(dtrain, cfg, o)
        out = os.path.join(work, f"state_{mode}")
        code, why = train(dtrain, cfg, out, o)
        if code != 0:
            print(f"   {mode:10s} run failed ({code}): {why}")
            continue
        peaks[mode] = peak_rss(out)
        ratio = peaks[mode] / predicted
        print(f"   {mode:10s} predicted {predicted:>13,d} B, peak RSS {peaks[mode]:>13,d} B: "
              f"measured/predicted {ratio:.3f} ({verdict(abs(ratio - 1) <= 0.10)}: within 10 %)")
    for mode, goal in (("optimizer", 0.8), ("parameters", 0.55)):
        if "none" in peaks and mode in peaks:
            r = peaks[mode] / peaks["none"]
            print(f"   {mode} / none peak RSS {r:.3f} ({verdict(r <= goal)}: <= {goal}x)")


def part_recompute(build):
    bench = os.path.join(build, "bench", "dtrain_recompute_bench")
    print("2. recomputation (the wide GPT):")
    r = subprocess.run([bench, "--pairs", "3"], env=ENV, capture_output=True, text=True)
    lines = [l for l in r.stdout.strip().splitlines() if "ratio" in l or "goal" in l]
    print("   " + "\n   ".join(lines or r.stdout.strip().splitlines()[-4:]))


def part_speed(dtrain, work, quick, pairs):
    block = 64 if quick else 256
    models = {
        "the wide GPT": config(os.path.join(work, "speed_gpt.yaml"),
                               "{name: gpt, n_layer: 6, n_head: 6, n_embd: 384}", block, 4,
                               4 if quick else 12),
        "ResNet-20": config(os.path.join(work, "speed_resnet.yaml"), "{name: resnet20}", 0, 0,
                            4 if quick else 12,
                            "{name: synthetic, shape: [3, 32, 32], classes: 10, "
                            "train_size: 4096, test_size: 128, batch_size: 128}"),
    }
    print(f"3. speed, 2 ranks (best of {pairs} interleaved rounds)")
    for name, cfg in models.items():
        for link in ([], LINK):
            best = {}
            for _ in range(pairs):
                for mode in MODES:
                    out = os.path.join(work, f"speed_{mode}")
                    code, why = train(dtrain, cfg, out, [f"algorithm.shard={mode}"] + link)
                    if code == 0:
                        best[mode] = max(best.get(mode, 0), tokens_per_s(out))
                    else:
                        print(f"   {name} {mode}: run failed ({code}): {why}")
            where = "1 Gbit/s + 50 us" if link else "no link"
            for mode in MODES[1:]:
                if mode not in best or "none" not in best:
                    continue
                goal = SPEED_GOAL[mode][1 if link else 0]
                r = best[mode] / best["none"]
                print(f"   {name:12s} {where:17s} {mode:10s} / none {r:.3f} "
                      f"({verdict(r >= goal)}: >= {goal}x)")


def token_file(work):
    """The corpus's bytes as an llm.c token file pair (train.bin, val.bin): ids below 256 of a
    dataset whose vocabulary is GPT-2's 50257, so that the model has GPT-2's full size."""
    import struct
    folder = os.path.join(work, "tokens")
    os.makedirs(folder, exist_ok=True)
    data = open(CORPUS, "rb").read()
    for name, part in (("train.bin", data[:-65536]), ("val.bin", data[-65536:])):
        header = struct.pack("<256i", *([20240520, 1, len(part)] + [0] * 253))
        with open(os.path.join(folder, name), "wb") as f:
            f.write(header)
            f.write(struct.pack(f"<{len(part)}H", *part))
    return folder


def part_capability(dtrain, work):
    folder = token_file(work)
    cfg = config(os.path.join(work, "large.yaml"), "{name: gpt2, size: large, recompute: blocks}",
                 512, 2, 5, f"{{name: tokens, path: {folder}, block_size: 512, vocab_size: 50257, "
                 "batch_size: 2, test_size: 2}")
    print("4. capability: GPT-2 large (vocabulary 50257), 2 ranks, AdamW")
    total, why = dry_total(dtrain, cfg, ["algorithm.shard=none", "model.recompute=none"])
    print(f"   shard none: {'refused: ' + why if total is None else 'NOT refused: table total ' + str(total)}")
    o = ["algorithm.shard=parameters"]
    total, why = dry_total(dtrain, cfg, o)
    out = os.path.join(work, "large")
    code, why = train(dtrain, cfg, out, o)
    if code != 0:
        print(f"   shard parameters + recompute blocks: run failed ({code}): {why}")
        return
    import yaml
    text = open(os.path.join(out, "run.yaml")).read().replace("\n# how", "\n---\n# how")
    peaks = list(yaml.safe_load_all(text))[-1]["memory"]["peak_rss_bytes"]
    both = sum(peaks)
    print(f"   shard parameters + recompute blocks: trained 5 iterations; table {total:,d} B a "
          f"rank; peak RSS {peaks[0]:,d} + {peaks[1]:,d} = {both:,d} B "
          f"({verdict(both <= 14e9)}: <= 14 GB)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--parts", default="state,recompute,speed,capability")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--pairs", type=int, default=3)
    a = p.parse_args()
    dtrain = binary(a.build)
    parts = a.parts.split(",")
    with tempfile.TemporaryDirectory() as work:
        if "state" in parts:
            part_state(dtrain, work, a.quick)
        if "recompute" in parts:
            part_recompute(a.build)
        if "speed" in parts:
            part_speed(dtrain, work, a.quick, 1 if a.quick else a.pairs)
        if "capability" in parts:
            part_capability(dtrain, work)


if __name__ == "__main__":
    main()
