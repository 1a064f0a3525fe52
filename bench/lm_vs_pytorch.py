#!/usr/bin/python3
"""dtrain's GPT against a PyTorch GPT, as a user runs each, single thread: loss, tokens/s, memory.

Both sides train the same GPT-2-style causal language model (bench/torch_gpt.py: token + learned
position embedding, pre-LayerNorm blocks with fused c_attn and c_proj, exact-erf GELU MLP, ln_f,
lm_head tied to wte, GPT-2's initialisation) on the same data, batches and optimizer:
  - data: the corpus (--corpus; default datasets/kjv/kjv.txt, the King James Bible that
    scripts/setup.sh writes, one verse per line), a char-level tokenizer (the sorted distinct
    characters), the last 10 % of the tokens for validation. Training windows as dtrain cuts
    them: window i is tokens [i·T, i·T + T + 1) (inputs the first T, targets the last T), the
    windows shuffled every epoch with the seed, `batch` windows a batch, the last partial batch
    dropped. Validation loss: the mean per-token cross-entropy (nats) over ALL validation windows
    cut the same way.
  - optimizer: AdamW, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the matrices and
    embeddings only (nanoGPT's groups), gradient norm clipped to 1.0, lr warmed up linearly
    (lr·(it+1)/(warm-up+1)) then a cosine down to min_lr at the last iteration (nanoGPT's
    get_lr); dtrain's `optimizer: {name: adamw, ..., schedule: {name: cosine, ...}}`.
  - PyTorch as a user of this CPU runs it: fp32, torch.set_num_threads(1), OpenBLAS's core type
    for the CPU and one OpenBLAS thread (bench/openblas_core.py), in a python process of its own
    per run (this script with --torch-worker), so that its peak RSS is its own. dtrain: one rank,
    `cluster: {device: cpu, threads_per_rank: 1}` (its loader thread may use a second core).

 1. baby GPT (4 layers, 4 heads, n_embd 128, block 64, batch 12, 2000 iterations, lr 1e-3 →
    1e-4, warm-up 100, dropout 0), --seeds seeds each side: validation loss at the end, mean of
    the seeds. Goal: dtrain within 0.03 of PyTorch. Tokens/s = iterations × batch × block over
    the time of the training iterations alone (dtrain: timing.csv's wall_s, which excludes
    evaluation; PyTorch: the clock runs around the training steps only), the best seed each side.
    Goal: dtrain >= 2x PyTorch.
 2. wide GPT (6 layers, 6 heads, n_embd 384, block 256, batch 8), a speed measurement: 5 warm-up
    iterations, then 50 timed ones. dtrain runs on a short copy of the corpus (a first line of
    all the corpus's characters, so the vocabulary stays the same, then its beginning) whose
    training windows make 5 iterations an epoch: epoch 1 is the warm-up, epochs 2-11 are timed
    (timing.csv), and its validation is 4 windows. Goals: dtrain >= 1.3x PyTorch's tokens/s and
    >= 60 % of the core's peak fp32 throughput (bench/cpu_peak.cpp) in model FLOP/s.
 3. Memory of the wide GPT: peak RSS (GNU time's %M) of a run at batch 8 and at batch 16 (4
    iterations and the validation, on one short corpus of 40 training windows), both sides; MB
    per token of batch = the slope, (RSS16 − RSS8) / ((16 − 8)·256). Goal: dtrain <= 1.0x
    PyTorch.
 4. GFLOP/s of both models: model FLOPs per token 6·N + 12·n_layer·n_embd·T — nanoGPT's
    estimate_mfu (after PaLM's appendix B), N the parameters without the position table (the
    tied wte / lm_head counted once, as the lm_head's matrix product), 12·n_layer·n_embd·T the
    attention's q·kᵀ and att·v over the full T×T, forward and backward — times tokens/s, as a
    share of the core's peak.

bf16 mixed precision, in the same run wherever dtrain accepts `cluster.precision: bf16` on this
CPU (a dry run with it exits 2 where the CPU lacks native bf16: one line says so and the bf16
goals are "not measured", not FAIL; --no-bf16 skips them too). dtrain: the same configs with
`cluster.precision: bf16` (bf16 matrix products accumulating in f32, bf16 activations, f32
master weights, gradients and AdamW). PyTorch: the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), as a user writes it, backward, clipping and AdamW on
the fp32 parameters as in its fp32 runs (validation under autocast too). The header names the
oneDNN ISA of dtrain's backend and whether the CPU has AMX: without AMX, on AVX512-BF16 alone,
bf16 GEMMs are no faster than fp32 (about half as fast on a VM measured), in dtrain and PyTorch
alike, so the speed goals need AMX.
 1. dtrain bf16, seed 1, the baby's 2000 iterations: validation loss against dtrain fp32's seed
    1. Goal: within 0.02 (its tokens/s printed, no goal).
 2. wide: tokens/s of dtrain bf16 and PyTorch autocast, timed as in fp32. Goals: dtrain bf16
    >= 3x dtrain fp32, and >= 1.5x PyTorch autocast.
 3. memory: the slope of dtrain bf16 and of PyTorch autocast, measured as in fp32. Goal: dtrain
    bf16's <= 0.6x dtrain fp32's (PyTorch autocast's printed, against its fp32).
 4. their GFLOP/s (the same model FLOPs), as a share of the same fp32 peak.

    /usr/bin/python3 bench/lm_vs_pytorch.py   (Debian's python, which has python3-torch)
        [--build build] [--corpus datasets/kjv/kjv.txt] [--seeds 3] [--models baby,wide]
        [--eval-every N]   (the baby's validation loss every N iterations too: a curve)
        [--quick]   (200 iterations of the baby, 1 seed, a few of the wide: a smoke test)
        [--no-bf16]   (skip the bf16 mixed-precision parts)
Needs: scripts/setup.sh --bench (PyTorch, the corpus) and a release build (dtrain,
dtrain_cpu_peak). A build whose dtrain lacks the GPT keys is reported (its message, the goals
FAIL) and the PyTorch side still runs; the exit code is then 2 (else 0, whatever the goals).
"""
import argparse, csv, importlib.metadata, importlib.util, json, math, os, re, subprocess, sys
import tempfile, time

import openblas_core  # PyTorch's BLAS as a user would run it (beside this script)
from dtrain_runs import flow  # YAML flow values (beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "datasets", "kjv", "kjv.txt")  # written by scripts/setup.sh
VALID_FRACTION = 0.1  # the last 10 % of the tokens
ADAMW = dict(betas=[0.9, 0.99], eps=1e-8, weight_decay=0.1, clip_grad_norm=1.0)

# The models: architecture, batch, schedule. baby: `iterations` trained for the loss (and timed);
# wide: `warmup` untimed iterations, then `timed` ones.
MODELS = {
    "baby": dict(n_layer=4, n_head=4, n_embd=128, block=64, batch=12, dropout=0.0,
                 iterations=2000, lr=1e-3, min_lr=1e-4, warmup_lr=100),
    "wide": dict(n_layer=6, n_head=6, n_embd=384, block=256, batch=8, dropout=0.0,
                 warmup=5, timed=50, lr=1e-3, min_lr=1e-4, warmup_lr=100),
}
QUICK = {"baby": dict(iterations=200, warmup_lr=20), "wide": dict(warmup=2, timed=4)}
LOSS_GOAL = 0.03         # |dtrain − PyTorch| validation loss, nats per token
BABY_SPEED_GOAL = 2.0    # dtrain / PyTorch tokens/s
WIDE_SPEED_GOAL = 1.3
WIDE_PEAK_GOAL = 0.60    # dtrain's model FLOP/s / the core's peak
MEMORY_GOAL = 1.0        # dtrain's MB per token of batch <= this × PyTorch's
BF16_LOSS_GOAL = 0.02    # |dtrain bf16 − dtrain fp32| validation loss of the baby, one seed
BF16_SPEED_GOAL = 3.0    # wide: dtrain bf16 / dtrain fp32 tokens/s
BF16_PEER_GOAL = 1.5     # wide: dtrain bf16 / PyTorch autocast tokens/s
BF16_MEMORY_GOAL = 0.6   # wide: dtrain bf16's MB per token of batch <= this × dtrain fp32's
MEMORY_BATCHES, QUICK_MEMORY_BATCHES = (8, 16), (1, 2)
MEMORY_ITERATIONS = 4    # iterations of each memory run (the validation: 4 windows or more)
TIME = "/usr/bin/time"   # GNU time: the peak RSS of a run


def verdict(ok):
    """PASS, FAIL, or (ok None) not measured."""
    return "not measured" if ok is None else "PASS" if ok else "FAIL"


def run_measured(cmd, env=None):
    """Runs `cmd`; returns (exit code, its output, its peak RSS in MB). The peak comes from GNU
    time (%M), as in engine_vs_pytorch.py (os.wait4 could report this process's own high-water
    mark, carried into a child at exec); without /usr/bin/time, wait4's is the fallback (this
    process never imports torch)."""
    with tempfile.TemporaryFile("w+") as log, tempfile.NamedTemporaryFile("r") as peak:
        timed = os.access(TIME, os.X_OK)
        argv = [TIME, "-f", "%M", "-o", peak.name, *cmd] if timed else cmd
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        log.seek(0)
        out = log.read()
        kib = usage.ru_maxrss
        if timed and p.returncode == 0:
            kib = int(peak.read().split()[-1])
    return p.returncode, out, kib / 1024.0


def tail(out, lines=6):
    return "\n".join("    " + line for line in out.strip().splitlines()[-lines:])


# ---- the corpus --------------------------------------------------------------------------------

def short_corpus(tmp, text, train_windows, block):
    """A corpus file whose training part holds `train_windows` windows of `block` tokens (and
    half a window to spare, whichever way the split rounds) and whose vocabulary is `text`'s: a
    first line of all its characters, then its beginning. Returns the path."""
    head = "".join(sorted(set(text) - {"\n"})) + "\n"
    train_tokens = train_windows * block + 1 + block // 2
    total = math.ceil(train_tokens / (1 - VALID_FRACTION))
    assert int(total * VALID_FRACTION) > block, "too short a corpus for one validation window"
    path = os.path.join(tmp, f"corpus-{train_windows}x{block}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + text[:total - len(head)])
    return path


# ---- dtrain ------------------------------------------------------------------------------------

class DtrainFailed(Exception):
    """dtrain did not run (a build without the GPT keys exits 2 naming the key) or failed; `rc`:
    its exit code (None where it exited 0 without results)."""

    def __init__(self, message, rc=None):
        super().__init__(message)
        self.rc = rc


def dtrain_binary(build):
    return os.path.join(build, "apps", "dtrain", "dtrain")


def dtrain_run(build, tmp, what, m, corpus, seed, batch, train, dry_run=False, bf16=False):
    """One dtrain run of model `m` — the one place that names dtrain's keys for the GPT: adjust
    them here. `train`: the `train:` map (iterations or epochs, evaluation period); `bf16`:
    `cluster.precision: bf16` (else the key is left out: fp32, dtrain's default). Returns
    {"rss": peak MB, "timing": timing.csv's rank-0 rows, "accuracy": accuracy.csv's rows, "out":
    the output} or, with `dry_run`, {"params", "backend", "out"}. DtrainFailed (with dtrain's
    message and exit code) when it exits non-zero or leaves no results."""
    exe = dtrain_binary(build)
    if not os.access(exe, os.X_OK):
        raise DtrainFailed(f"no {exe}: build it first (scripts/build.sh), or pass --build DIR")
    run_dir = tempfile.mkdtemp(prefix=f"{what}-", dir=tmp)
    cfg, out_dir = os.path.join(run_dir, "config.in.yaml"), os.path.join(run_dir, "run")
    keys = {
        "name": f"lm_vs_pytorch_{what}",
        "seed": seed,
        "model": {"name": "gpt", "n_layer": m["n_layer"], "n_head": m["n_head"],
                  "n_embd": m["n_embd"], "dropout": m["dropout"], "bias": True,
                  "tie_weights": True},
        "dataset": {"name": "text", "path": json.dumps(corpus),  # a quoted YAML string
                    "tokenizer": "char", "block_size": m["block"], "valid_fraction": VALID_FRACTION,
                    "batch_size": batch},
        "cluster": {"device": "cpu", "threads_per_rank": 1,
                    **({"precision": "bf16"} if bf16 else {})},
        "algorithm": {"name": "sync"},
        "optimizer": {"name": "adamw", "lr": m["lr"], **ADAMW,
                      "eps": f"{ADAMW['eps']:.1e}",  # 1.0e-08: a float to any YAML reader
                      "schedule": {"name": "cosine", "min_lr": m["min_lr"],
                                   "warmup_iterations": m["warmup_lr"]}},
        "train": train,
    }
    with open(cfg, "w") as f:
        f.write("".join(f"{key}: {flow(value)}\n" for key, value in keys.items()))
    cmd = [exe, "--config", cfg] + (["--dry-run"] if dry_run else ["--out", out_dir])
    rc, out, rss = run_measured(cmd)
    if rc != 0:
        raise DtrainFailed(f"`{' '.join(cmd)}` exited {rc}:\n{tail(out)}", rc)
    if dry_run:
        params = re.findall(r"^parameters: (\d+)$", out, re.M)
        backend = re.search(r"^backend\s+(.*)$", out, re.M)
        return {"params": int(params[-1]) if params else None,
                "backend": backend.group(1) if backend else "?", "out": out}
    try:
        with open(os.path.join(out_dir, "timing.csv")) as f:
            timing = [r for r in csv.DictReader(f) if r["rank"] == "0"]
        with open(os.path.join(out_dir, "accuracy.csv")) as f:
            accuracy = list(csv.DictReader(f))
    except OSError as e:
        raise DtrainFailed(f"{what}: dtrain exited 0 but left no {e.filename}") from e
    if not timing or not accuracy:
        raise DtrainFailed(f"{what}: dtrain's timing.csv or accuracy.csv has no rows")
    return {"rss": rss, "timing": timing, "accuracy": accuracy, "out": out}


def tokens_per_s(timing, batch, block, skip_epochs=0):
    """Tokens/s of the training iterations of timing.csv's rows after the first `skip_epochs`:
    their iterations × batch × block over their wall_s (which excludes evaluation)."""
    rows = timing[skip_epochs:]
    return (sum(int(r["iterations"]) for r in rows) * batch * block
            / sum(float(r["wall_s"]) for r in rows))


# ---- PyTorch (in a child process: this script with --torch-worker) ------------------------------

def torch_worker(spec):
    """Trains the PyTorch GPT as `spec` says (see torch_run) and prints `RESULT {json}`:
    parameters, vocabulary, the first and last training losses, the validation losses at
    spec["eval_at"], tokens/s of the timed iterations, the OpenBLAS core. spec `probe`: only
    the core; spec `autocast`: bf16 mixed precision as a user writes it, the forward pass and the
    loss under torch.autocast("cpu", dtype=torch.bfloat16) (validation too), backward, clipping
    and AdamW outside it, on the fp32 parameters; spec `lion` ({betas, weight_decay}): Lion
    (torch_gpt.Lion) in AdamW's place."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torch_gpt  # beside this script

    torch.set_num_threads(1)
    if spec.get("probe"):
        print("RESULT " + json.dumps({"blas": openblas_core.loaded()}), flush=True)
        return
    m, batch, block = spec["model"], spec["batch"], spec["model"]["block"]
    with open(spec["corpus"], encoding="utf-8") as f:
        text = f.read()
    # Char-level tokenizer: a character's id is its rank among the corpus's distinct characters.
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab = np.unique(codes)
    ids = torch.from_numpy(np.searchsorted(vocab, codes).astype(np.int64))
    split = len(ids) - int(len(ids) * VALID_FRACTION)

    def windows(tokens):
        """Window i: inputs tokens[i·T, i·T + T), targets tokens[i·T + 1, i·T + T + 1)."""
        count = (len(tokens) - 1) // block
        return (tokens[:count * block].view(count, block),
                tokens[1:count * block + 1].view(count, block))

    train_x, train_y = windows(ids[:split])
    valid_x, valid_y = windows(ids[split:])
    per_epoch = len(train_x) // batch  # the last partial batch is dropped

    def batches():
        epoch = 0
        while True:  # each epoch its own permutation of the windows, from the seed
            order = np.random.default_rng([spec["seed"], epoch]).permutation(len(train_x))
            for b in range(per_epoch):
                idx = torch.from_numpy(order[b * batch:(b + 1) * batch])
                yield train_x[idx], train_y[idx]
            epoch += 1

    torch.manual_seed(spec["seed"])
    model = torch_gpt.GPT(len(vocab), block, m["n_layer"], m["n_head"], m["n_embd"],
                          m["dropout"])
    if spec.get("lion"):  # {betas, weight_decay}: Lion (bench/optimizers.py) instead of AdamW
        opt = torch_gpt.lion(model, m["lr"], spec["lion"]["betas"], spec["lion"]["weight_decay"])
    else:
        opt = torch_gpt.adamw(model, m["lr"], ADAMW["betas"], ADAMW["eps"],
                              ADAMW["weight_decay"])

    def mixed():
        """The region of autocast (bf16 matrix products, f32 where autocast keeps f32), or fp32."""
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(spec.get("autocast")))

    def validation_loss():
        model.eval()
        total = 0.0
        with torch.no_grad():
            for start in range(0, len(valid_x), batch):
                with mixed():
                    logits = model(valid_x[start:start + batch])
                    total += F.cross_entropy(logits.view(-1, logits.size(-1)),
                                             valid_y[start:start + batch].reshape(-1),
                                             reduction="sum").item()
        model.train()
        return total / valid_y.numel()

    iterations, untimed = spec["iterations"], spec["untimed"]
    eval_at = set(spec["eval_at"])
    result = {"params": sum(p.numel() for p in model.parameters()), "vocab": len(vocab),
              "train_windows": len(train_x), "valid_windows": len(valid_x), "evals": []}
    model.train()
    data = batches()
    timed_s = 0.0
    for it in range(iterations):
        start = time.perf_counter()  # taking the batch counts, as dtrain's wall_s does
        x, y = next(data)
        lr = torch_gpt.cosine_lr(it, m["lr"], m["min_lr"], m["warmup_lr"], iterations)
        for group in opt.param_groups:
            group["lr"] = lr
        with mixed():
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), ADAMW["clip_grad_norm"])
        opt.step()
        value = loss.item()
        if it >= untimed:
            timed_s += time.perf_counter() - start
        if it == 0:
            result["first_loss"] = value
        if it + 1 in eval_at:
            result["evals"].append([it + 1, validation_loss()])
    result["last_loss"] = value
    result["tokens_per_s"] = (iterations - untimed) * batch * block / timed_s
    result["blas"] = openblas_core.loaded()
    print("RESULT " + json.dumps(result), flush=True)


# The PyTorch workers' environment: OpenBLAS as a user would set it (main fills it).
PEER_ENV = dict(os.environ)


def torch_run(what, **spec):
    """One PyTorch run in a fresh python process: (its result dict, its peak RSS in MB)."""
    rc, out, rss = run_measured([sys.executable, os.path.abspath(__file__), "--torch-worker",
                                 json.dumps(spec)], env=PEER_ENV)
    found = re.findall(r"^RESULT (.*)$", out, re.M)
    if rc != 0 or not found:
        sys.exit(f"lm_vs_pytorch: the PyTorch run {what} failed (exit code {rc}):\n{tail(out, 12)}")
    return json.loads(found[-1]), rss


# ---- the benchmark -----------------------------------------------------------------------------

def gpt_params(m, vocab):
    """(all parameters, those without the position table) of the tied GPT with biases."""
    c, layers = m["n_embd"], m["n_layer"]
    block = (2 * c) + (3 * c * c + 3 * c) + (c * c + c) + (2 * c) + (4 * c * c + 4 * c) \
        + (4 * c * c + c)  # ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj
    no_position = vocab * c + layers * block + 2 * c  # wte (= lm_head), blocks, ln_f
    return no_position + m["block"] * c, no_position


def flops_per_token(m, vocab):
    """Training FLOPs per token, nanoGPT's estimate_mfu (PaLM): 6·N + 12·n_layer·n_embd·T."""
    return 6 * gpt_params(m, vocab)[1] + 12 * m["n_layer"] * m["n_embd"] * m["block"]


def check_params(summary, peer):
    """Says so where dtrain's dry run counts other parameters than the PyTorch model has."""
    if summary and summary["params"] != peer["params"]:
        print(f"PARAMETERS DIFFER: dtrain {summary['params']}, torch {peer['params']}")


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (an empty set where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(r"^flags\s*:(.*)$", f.read(), re.M)
    except OSError:
        return set()
    return set(found.group(1).split()) if found else set()


def onednn_isa(backend):
    """The ISA in dtrain's backend name `cpu (oneDNN 2.6.3, <ISA>, 1 thread)`, or '?'."""
    found = re.search(r"oneDNN [^,]*, ([^,]*),", backend or "")
    return found.group(1) if found else "?"


def cpu_peak(build, seconds):
    """(peak GFLOP/s of one core, its ISA) from dtrain_cpu_peak, or (None, why)."""
    exe = os.path.join(build, "bench", "dtrain_cpu_peak")
    if not os.access(exe, os.X_OK):
        return None, f"no {exe}"
    out = subprocess.run([exe, "--seconds", str(seconds)], check=True, capture_output=True,
                         text=True).stdout
    peak = re.search(r"isa=(\w+) peak_gflops=([\d.]+)", out)
    return float(peak.group(2)), peak.group(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--corpus", default=CORPUS,
                   help="the text to train on (default: the one scripts/setup.sh writes)")
    p.add_argument("--seeds", type=int, help="seeds of the baby per side (default 3; --quick 1)")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument("--eval-every", type=int, default=0, metavar="N",
                   help="also the baby's validation loss every N iterations (a curve)")
    p.add_argument("--quick", action="store_true",
                   help="a few iterations of everything, 1 seed: a smoke test, not a measurement")
    p.add_argument("--no-bf16", action="store_true",
                   help="skip the bf16 mixed-precision parts (their goals: not measured)")
    p.add_argument("--torch-worker", metavar="JSON", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_worker:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # torch_gpt
        return torch_worker(json.loads(a.torch_worker))
    names = [n.strip() for n in a.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        p.error(f"--models: unknown {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(MODELS)}")
    seeds = a.seeds if a.seeds is not None else (1 if a.quick else 3)
    if seeds < 1 or a.eval_every < 0:
        p.error("--seeds must be at least 1, --eval-every at least 0")
    if not os.path.isfile(a.corpus):
        p.error(f"no corpus {a.corpus}: scripts/setup.sh writes it (the King James Bible of "
                "Debian's bible-kjv), or pass --corpus FILE")
    if importlib.util.find_spec("torch") is None:
        p.error(f"{sys.executable} has no torch: run this with Debian's /usr/bin/python3 "
                "(python3-torch; scripts/setup.sh --bench)")
    a.build, a.corpus = os.path.abspath(a.build), os.path.abspath(a.corpus)
    models = {n: dict(MODELS[n], **(QUICK[n] if a.quick else {})) for n in MODELS}
    memory_batches = QUICK_MEMORY_BATCHES if a.quick else MEMORY_BATCHES
    # Only the workers import torch: this process stays small (see run_measured).
    torch_version = importlib.metadata.version("torch")
    blas_setting = openblas_core.peer_env(PEER_ENV, 1)
    with open(a.corpus, encoding="utf-8") as f:
        text = f.read()
    vocab = len(set(text))
    valid = int(len(text) * VALID_FRACTION)

    goals = []  # (what, met)

    def judge(what, ok):
        goals.append((what, ok))
        return verdict(ok)

    dtrain_error = None  # dtrain's message once it could not run: its side is skipped after

    def dtrain_failed(e):
        nonlocal dtrain_error
        dtrain_error = str(e)
        print(f"dtrain side: FAILED, skipped from here on — {e}\n  (a build without the "
              "GPT keys: merge the GPT work, rebuild, or adjust dtrain_run's keys)", flush=True)

    def dtrain(*args, **kwargs):
        """dtrain_run, or None (its message printed once) where dtrain cannot run."""
        if dtrain_error:
            return None
        try:
            return dtrain_run(a.build, tmp, *args, **kwargs)
        except DtrainFailed as e:
            dtrain_failed(e)
            return None

    def ratio(ours, theirs):
        return ours / theirs if ours is not None and theirs else None

    def fmt(value, spec, width):
        return f"{value:{width}{spec}}" if value is not None else f"{'-':>{width}}"

    with tempfile.TemporaryDirectory(prefix="lm_vs_pytorch-") as tmp:
        peak, peak_isa = cpu_peak(a.build, 0.2 if a.quick else 1.0)
        blas = torch_run("probe", probe=True)[0]["blas"]
        print(f"PyTorch {torch_version} (OpenBLAS), 1 thread, fp32; load average "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the start"
              + ("; --quick: NOT a measurement" if a.quick else ""))
        print(f"PyTorch's OpenBLAS {openblas_core.describe(blas)}; {blas_setting}")
        print("core peak fp32 (bench/cpu_peak.cpp): "
              + (f"{peak:.1f} GFLOP/s ({peak_isa})" if peak else f"- ({peak_isa})"))
        print(f"corpus {a.corpus}: {len(text):,} characters, vocabulary {vocab} (char), last "
              f"{VALID_FRACTION:.0%} ({valid:,} tokens) for validation; ln(vocabulary) = "
              f"{math.log(vocab):.3f}", flush=True)
        # The dry runs check the keys before any training (a build without them fails here).
        summaries = {n: dtrain(f"{n}-dry", models[n], a.corpus, 1, models[n]["batch"],
                               {"max_iterations": 1}, dry_run=True) for n in names}
        backend = summaries[names[0]]["backend"] if summaries[names[0]] else None
        if backend:
            print(f"dtrain: {backend}, {a.build}")
        flags = cpu_flags()
        print(f"bf16: dtrain's oneDNN ISA {onednn_isa(backend)}; this CPU (/proc/cpuinfo): AMX "
              f"{'yes' if 'amx_bf16' in flags else 'no'}, AVX512-BF16 "
              f"{'yes' if 'avx512_bf16' in flags else 'no'}")
        # Whether dtrain trains in bf16 here: a dry run with cluster.precision: bf16 exits 2 where
        # the CPU has no native bf16 (the bf16 parts are then not measured, not failed).
        bf16_skip = "--no-bf16" if a.no_bf16 else None
        if not bf16_skip and not dtrain_error:
            try:
                dtrain_run(a.build, tmp, "bf16-probe", models[names[0]], a.corpus, 1,
                           models[names[0]]["batch"], {"max_iterations": 1}, dry_run=True,
                           bf16=True)
            except DtrainFailed as e:
                if e.rc != 2:
                    dtrain_failed(e)
                else:
                    why = str(e).strip().splitlines()[-1].strip()
                    bf16_skip = ("dtrain exits 2 for cluster.precision: bf16 here: "
                                 + re.sub(r"^dtrain: error: \S+: ", "", why))
        bf16 = bf16_skip is None  # the bf16 parts run (dtrain's side FAILs if dtrain cannot run)
        print("bf16 mixed precision (dtrain cluster.precision: bf16, PyTorch torch.autocast cpu "
              "bfloat16): " + ("measured" if bf16 else f"NOT MEASURED — {bf16_skip}"),
              flush=True)
        speeds = {}  # label → (model, dtrain tokens/s or None, PyTorch tokens/s)

        # 1. The baby GPT: loss and speed.
        if "baby" in names:
            m = models["baby"]
            its = m["iterations"]
            eval_at = sorted({its} | (set(range(a.eval_every, its, a.eval_every))
                                      if a.eval_every else set()))
            train = {"epochs": 1000, "max_iterations": its,
                     "eval_every_iterations": a.eval_every or its}
            print(f"\n1. baby GPT: {m['n_layer']} layers, {m['n_head']} heads, n_embd "
                  f"{m['n_embd']}, block {m['block']}, batch {m['batch']}, dropout "
                  f"{m['dropout']}; {its} iterations, AdamW lr {m['lr']:g} → {m['min_lr']:g} "
                  f"cosine, warm-up {m['warmup_lr']}; {seeds} seed(s) per side")
            print(f"{'seed':>4} {'dtrain val':>10} {'torch val':>10} {'torch 1st':>10} "
                  f"{'torch last':>10} {'dtrain tok/s':>12} {'torch tok/s':>11}")
            ours, theirs, curves = [], [], {}
            for seed in range(1, seeds + 1):
                run = dtrain(f"baby-s{seed}", m, a.corpus, seed, m["batch"], train)
                mine = None
                if run:
                    mine = (float(run["accuracy"][-1]["test_loss"]),
                            tokens_per_s(run["timing"], m["batch"], m["block"]))
                    for row in run["accuracy"]:
                        curves.setdefault(int(row["iteration"]), ([], [], []))[0].append(
                            float(row["test_loss"]))
                peer, _ = torch_run(f"baby seed {seed}", corpus=a.corpus, model=m, seed=seed,
                                    batch=m["batch"], iterations=its, untimed=0,
                                    eval_at=eval_at)
                for it, loss in peer["evals"]:
                    curves.setdefault(it, ([], [], []))[1].append(loss)
                theirs.append((peer["evals"][-1][1], peer["tokens_per_s"]))
                ours.append(mine)
                print(f"{seed:4d} {fmt(mine and mine[0], '.4f', 10)} {theirs[-1][0]:10.4f} "
                      f"{peer['first_loss']:10.4f} {peer['last_loss']:10.4f} "
                      f"{fmt(mine and mine[1], '.0f', 12)} {peer['tokens_per_s']:11.0f}",
                      flush=True)
            print(f"PyTorch: {peer['params']:,} parameters, vocabulary {peer['vocab']}, "
                  f"{peer['train_windows']:,} training / {peer['valid_windows']:,} validation "
                  f"windows; torch 1st / last: training loss of its first / last iteration")
            print("tok/s: iterations × batch × block over the training iterations' time, "
                  "evaluation excluded (dtrain: timing.csv's wall_s; PyTorch: a clock around "
                  "each step, the batch's gather included)")
            check_params(summaries["baby"], peer)
            # bf16: one seed (the first), against dtrain's fp32 run of the same seed.
            half = None  # (validation loss, tokens/s) of dtrain's bf16 run
            if bf16:
                run = dtrain("baby-bf16-s1", m, a.corpus, 1, m["batch"], train, bf16=True)
                if run:
                    half = (float(run["accuracy"][-1]["test_loss"]),
                            tokens_per_s(run["timing"], m["batch"], m["block"]))
                    for row in run["accuracy"]:
                        curves.setdefault(int(row["iteration"]), ([], [], []))[2].append(
                            float(row["test_loss"]))
            if len(curves) > 1:
                print(f"validation loss curve (mean of the seeds; bf16: seed 1):\n"
                      f"{'iteration':>9} {'dtrain':>8} {'torch':>8}"
                      + (f" {'dtrain bf16':>11}" if bf16 else ""))
                for it in sorted(curves):
                    d, t, h = curves[it]
                    print(f"{it:9d} {fmt(sum(d) / len(d) if d else None, '.4f', 8)} "
                          f"{fmt(sum(t) / len(t) if t else None, '.4f', 8)}"
                          + (f" {fmt(h[0] if h else None, '.4f', 11)}" if bf16 else ""))
            torch_loss = sum(t[0] for t in theirs) / len(theirs)
            torch_speed = max(t[1] for t in theirs)
            done = all(ours)
            our_loss = sum(o[0] for o in ours) / len(ours) if done else None
            our_speed = max(o[1] for o in ours) if done else None
            speeds["baby"] = ("baby", our_speed, torch_speed)
            gap = abs(our_loss - torch_loss) if done else None
            print(f"validation loss (mean of {seeds}): dtrain {fmt(our_loss, '.4f', 0)}, torch "
                  f"{torch_loss:.4f}, difference {fmt(gap, '.4f', 0)}; goal <= {LOSS_GOAL}: "
                  f"{judge('baby loss', done and gap <= LOSS_GOAL)}")
            r = ratio(our_speed, torch_speed)
            print(f"tokens/s (best seed): dtrain {fmt(our_speed, '.0f', 0)}, torch "
                  f"{torch_speed:.0f}, {fmt(r, '.2f', 0)}x; goal >= {BABY_SPEED_GOAL}x: "
                  f"{judge('baby speed', r is not None and r >= BABY_SPEED_GOAL)}", flush=True)
            if bf16:
                full = ours[0][0] if ours[0] else None  # dtrain fp32, seed 1
                gap = abs(half[0] - full) if half and full is not None else None
                print(f"bf16 validation loss (seed 1): dtrain bf16 "
                      f"{fmt(half and half[0], '.4f', 0)}, dtrain fp32 {fmt(full, '.4f', 0)}, "
                      f"difference {fmt(gap, '.4f', 0)}; goal <= {BF16_LOSS_GOAL}: "
                      f"{judge('baby bf16 loss', gap is not None and gap <= BF16_LOSS_GOAL)}")
                r = ratio(half and half[1], ours[0] and ours[0][1])
                print(f"bf16 tokens/s (seed 1): dtrain bf16 {fmt(half and half[1], '.0f', 0)}, "
                      f"{fmt(r, '.2f', 0)}x dtrain fp32's (no goal)", flush=True)
            else:
                print(f"bf16 validation loss: goal <= {BF16_LOSS_GOAL}: "
                      f"{judge('baby bf16 loss', None)}", flush=True)

        if "wide" in names:
            m = models["wide"]
            # 2. Speed: an epoch of `warmup` iterations, the first untimed.
            epochs = 1 + m["timed"] // m["warmup"]
            corpus = short_corpus(tmp, text, m["warmup"] * m["batch"], m["block"])
            print(f"\n2. wide GPT: {m['n_layer']} layers, {m['n_head']} heads, n_embd "
                  f"{m['n_embd']}, block {m['block']}, batch {m['batch']}: tokens/s of "
                  f"{(epochs - 1) * m['warmup']} timed iterations after {m['warmup']} warm-up "
                  f"ones")
            run = dtrain("wide-speed", m, corpus, 1, m["batch"],
                         {"epochs": epochs, "eval_every_epochs": epochs})
            ours = tokens_per_s(run["timing"], m["batch"], m["block"], 1) if run else None
            peer, _ = torch_run("wide speed", corpus=corpus, model=m, seed=1, batch=m["batch"],
                                iterations=m["warmup"] * epochs, untimed=m["warmup"],
                                eval_at=[])
            speeds["wide"] = ("wide", ours, peer["tokens_per_s"])
            r = ratio(ours, peer["tokens_per_s"])
            met = judge("wide speed", r is not None and r >= WIDE_SPEED_GOAL)
            print(f"tokens/s: dtrain {fmt(ours, '.0f', 0)}, torch {peer['tokens_per_s']:.0f} "
                  f"({peer['params']:,} parameters), {fmt(r, '.2f', 0)}x; goal >= "
                  f"{WIDE_SPEED_GOAL}x: {met}", flush=True)
            check_params(summaries["wide"], peer)
            # The same runs in bf16 mixed precision: dtrain's cluster.precision: bf16, PyTorch's
            # autocast (the forward pass and the loss; backward, clipping and AdamW as in fp32).
            if bf16:
                run = dtrain("wide-speed-bf16", m, corpus, 1, m["batch"],
                             {"epochs": epochs, "eval_every_epochs": epochs}, bf16=True)
                half = tokens_per_s(run["timing"], m["batch"], m["block"], 1) if run else None
                mixed = torch_run("wide speed autocast", corpus=corpus, model=m, seed=1,
                                  batch=m["batch"], iterations=m["warmup"] * epochs,
                                  untimed=m["warmup"], eval_at=[], autocast=True)[0]
                speeds["wide bf16"] = ("wide", half, mixed["tokens_per_s"])
                print(f"bf16 tokens/s: dtrain {fmt(half, '.0f', 0)}, torch autocast "
                      f"{mixed['tokens_per_s']:.0f} "
                      f"({mixed['tokens_per_s'] / peer['tokens_per_s']:.2f}x torch fp32)")
                r = ratio(half, ours)
                print(f"dtrain bf16 / dtrain fp32: {fmt(r, '.2f', 0)}x; goal >= "
                      f"{BF16_SPEED_GOAL}x: "
                      f"{judge('wide bf16 speed', r is not None and r >= BF16_SPEED_GOAL)}")
                r = ratio(half, mixed["tokens_per_s"])
                print(f"dtrain bf16 / torch autocast: {fmt(r, '.2f', 0)}x; goal >= "
                      f"{BF16_PEER_GOAL}x: "
                      f"{judge('wide bf16 vs autocast', r is not None and r >= BF16_PEER_GOAL)}",
                      flush=True)
            else:
                print(f"bf16: dtrain bf16 / fp32 goal >= {BF16_SPEED_GOAL}x: "
                      f"{judge('wide bf16 speed', None)}; dtrain bf16 / torch autocast goal >= "
                      f"{BF16_PEER_GOAL}x: {judge('wide bf16 vs autocast', None)}", flush=True)

            # 3. Memory: peak RSS at two batches, the slope per token of batch.
            print(f"\n3. wide GPT, peak RSS, MB (whole process; {MEMORY_ITERATIONS} iterations and "
                  "the validation)")
            print(f"{'side':14} " + " ".join(f"{'batch ' + str(b):>9}" for b in memory_batches)
                  + f" {'MB/token':>9}")
            slopes = {}
            tokens = (memory_batches[-1] - memory_batches[0]) * m["block"]
            # One corpus for both batches (so its share of the peak cancels), of 40 windows or
            # more, so that its validation holds whole windows.
            corpus = short_corpus(tmp, text, max(40, 2 * memory_batches[-1]), m["block"])
            sides = ("dtrain", "torch") + (("dtrain bf16", "torch autocast") if bf16 else ())
            for side in sides:
                peaks, mixed = [], side in ("dtrain bf16", "torch autocast")
                for b in memory_batches:
                    if side.startswith("dtrain"):
                        run = dtrain(f"wide-rss-b{b}" + ("-bf16" if mixed else ""), m, corpus, 1,
                                     b, {"epochs": 1000, "max_iterations": MEMORY_ITERATIONS},
                                     bf16=mixed)
                        peaks.append(run["rss"] if run else None)
                    else:
                        peaks.append(torch_run(f"wide memory at batch {b}", corpus=corpus,
                                               model=m, seed=1, batch=b,
                                               iterations=MEMORY_ITERATIONS, untimed=0,
                                               eval_at=[MEMORY_ITERATIONS], autocast=mixed)[1])
                slopes[side] = ((peaks[-1] - peaks[0]) / tokens if None not in peaks else None)
                print(f"{side:14} " + " ".join(fmt(r, '.0f', 9) for r in peaks)
                      + f" {fmt(slopes[side], '.3f', 9)}", flush=True)
            r = ratio(slopes["dtrain"], slopes["torch"]) if slopes["torch"] > 0 else None
            print(f"MB per token of batch: dtrain {fmt(slopes['dtrain'], '.3f', 0)}, torch "
                  f"{slopes['torch']:.3f}, {fmt(r, '.2f', 0)}x; goal <= {MEMORY_GOAL}x: "
                  f"{judge('wide memory', r is not None and r <= MEMORY_GOAL)}")
            if bf16:
                r = ratio(slopes["dtrain bf16"], slopes["dtrain"])
                half, mixed = slopes["dtrain bf16"], slopes["torch autocast"]
                print(f"bf16 MB per token of batch: dtrain bf16 {fmt(half, '.3f', 0)}, torch "
                      f"autocast {mixed:.3f} ({fmt(ratio(mixed, slopes['torch']), '.2f', 0)}x "
                      f"torch fp32); dtrain bf16 / dtrain fp32 {fmt(r, '.2f', 0)}x; goal <= "
                      f"{BF16_MEMORY_GOAL}x: "
                      f"{judge('wide bf16 memory', r is not None and r <= BF16_MEMORY_GOAL)}",
                      flush=True)
            else:
                print(f"bf16 MB per token: dtrain bf16 / fp32 goal <= {BF16_MEMORY_GOAL}x: "
                      f"{judge('wide bf16 memory', None)}", flush=True)

        # 4. GFLOP/s.
        print("\n4. Training GFLOP/s: model FLOPs per token 6·N + 12·n_layer·n_embd·T (nanoGPT's"
              " estimate_mfu, after PaLM; N = parameters without the position table) × tokens/s"
              + (f", against the core's peak {peak:.1f} GFLOP/s" if peak else ""))
        if "wide bf16" in speeds:
            print("(wide bf16: dtrain in bf16, torch under autocast; the same model FLOPs, against "
                  "the same fp32 peak)")
        print(f"{'model':9} {'N':>11} {'MFLOP/token':>11} {'dtrain GF/s':>11} {'% peak':>7} "
              f"{'torch GF/s':>10} {'% peak':>7}")
        for label, (n, *sides) in speeds.items():
            m = models[n]
            per_token = flops_per_token(m, vocab)
            ours, theirs = (s * per_token / 1e9 if s is not None else None for s in sides)
            share = [(g / peak if g is not None and peak else None) for g in (ours, theirs)]
            print(f"{label:9} {gpt_params(m, vocab)[1]:11,d} {per_token / 1e6:11.2f} "
                  f"{fmt(ours, '.1f', 11)} {fmt(share[0], '.1%', 7)} {theirs:10.1f} "
                  f"{fmt(share[1], '.1%', 7)}")
        if "wide" in speeds:
            share = (speeds["wide"][1] * flops_per_token(models["wide"], vocab) / 1e9 / peak
                     if speeds["wide"][1] is not None and peak else None)
            print(f"wide: dtrain at {fmt(share, '.1%', 0)} of the core's peak; goal >= "
                  f"{WIDE_PEAK_GOAL:.0%}: "
                  f"{judge('wide share of peak', share is not None and share >= WIDE_PEAK_GOAL)}")
    failed = [what for what, ok in goals if ok is False]
    unmeasured = [what for what, ok in goals if ok is None]
    print(f"\ngoals: {len(goals) - len(failed) - len(unmeasured)} of {len(goals)} PASS"
          + (f"; FAIL: {', '.join(failed)}" if failed else "")
          + (f"; not measured (bf16 skipped, see above): {', '.join(unmeasured)}"
             if unmeasured else "")
          + ("\ndtrain did not run (see `dtrain side: FAILED` above): its goals FAIL"
             if dtrain_error else ""))
    return 2 if dtrain_error else 0


if __name__ == "__main__":
    sys.exit(main())
