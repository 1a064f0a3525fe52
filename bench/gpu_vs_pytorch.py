#!/usr/bin/python3
"""dtrain's CUDA backend against PyTorch eager on one GPU, in one run: training throughput.

ResNet-18 and AlexNet (with the paper's LRN) on synthetic 3x224x224 images of 1000 classes at
batch 128, and MNIST-MLP (784-500-500-10) on synthetic 1x28x28 images of 10 classes at batch
100: the same model (bench/torch_models.py mirrors dtrain's zoo layer for layer), the same SGD
(lr, momentum and weight decay of configs/paper/<model>_dsync.yaml), batch and precision (fp32;
TF32 off for both unless --tf32, which turns it on for both). Both sides take every batch from
pinned host memory and copy it to the GPU, as dtrain's loader does.

GPT-2 124M (zoo `gpt2`; bench/torch_gpt.py on the PyTorch side: nanoGPT's layout, GPT-2's
initialisation, F.scaled_dot_product_attention where torch has it) at block 1024, batch 8, on
random token ids (dtrain: `tokens` files of llm.c's format written to a temporary folder;
PyTorch: int64 ids in pinned memory), with nanoGPT's AdamW (lr 6e-4, betas (0.9, 0.95), weight
decay 0.1 on the matrices and embeddings, gradients clipped to norm 1.0). PyTorch's AdamW is its
default implementation (foreach on CUDA, not fused=True), as a user who does not ask for more
runs it. Its throughput is in tokens/s; its runs are 10 iterations (an iteration is 8192
tokens, ~7 TFLOP), and PyTorch's loss.item() variant is left out (at a tenth of a second or
more an iteration, one sync is noise).

dtrain runs 1 + R epochs of N iterations (dataset.train_size = N·batch) and its samples/s come
from timing.csv (iterations · batch / wall_s of an epoch); the first epoch is the warm-up.
PyTorch (cudnn.benchmark on) runs N warm-up iterations, then R timed runs of N iterations
between torch.cuda.synchronize() calls, "lean" (no host sync inside) and, for information,
with loss.item() every iteration (dtrain reads every iteration's loss). Best run on each side.
The goal is dtrain ≥ 1.0x lean PyTorch per model (gpt2: in tokens/s).

--precision bf16 (mixed precision): dtrain trains with cluster.precision=bf16 and PyTorch runs its
forward and loss under torch.autocast("cuda", dtype=torch.bfloat16) (what a PyTorch user writes;
backward and the optimizer step outside it, fp32 master weights on both sides). A CNN's PyTorch
side runs in both memory formats, NCHW and channels_last (model and batches), and the faster
counts, as a user tuning bf16 on tensor cores would; the table names it. The goal is the same,
≥ 1.0x lean PyTorch.

    /usr/bin/python3 bench/gpu_vs_pytorch.py [--dtrain build/apps/dtrain/dtrain]
        [--models resnet18,alexnet,mlp,gpt2] [--iterations N] [--repeats 3] [--tf32]
        [--precision fp32|bf16]
    /usr/bin/python3 bench/gpu_vs_pytorch.py --check-models    # no GPU needed

--check-models builds each PyTorch twin on the CPU and checks it against `dtrain --dry-run`: the
same parameter count (`parameters: N`), the same sequence of convolution, linear, batch-norm,
layer-norm, LRN, pooling and dropout layers with the same output shapes, and the SGD settings of
the paper configs; exit 77 when PyTorch is missing (the CTest app_bench_models skips then).
The benchmark (not --check-models, a test) loads PyTorch with OpenBLAS as a user of this CPU
would set it (bench/openblas_core.py; the host side of PyTorch on a GPU barely uses it) and
prints the `Core:` OpenBLAS reports.
Needs: a GPU, a CUDA build of dtrain (cmake --preset release), PyTorch with CUDA.
"""
import argparse
import array
import csv
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

import openblas_core  # PyTorch's BLAS as a user would run it (beside this script)
from dtrain_runs import flow  # YAML flow values (beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Model → dtrain's `model:` map, data and optimizer (configs/paper/<paper>.yaml's SGD settings).
MODELS = {
    "resnet18": dict(zoo={"name": "resnet18"}, shape=(3, 224, 224), classes=1000, batch=128,
                     lr=0.1, momentum=0.9, weight_decay=1e-4, paper="resnet18_dsync"),
    "alexnet": dict(zoo={"name": "alexnet", "lrn": True}, shape=(3, 224, 224), classes=1000,
                    batch=128, lr=0.01, momentum=0.9, weight_decay=5e-4, paper="alexnet_dsync"),
    # torchvision's AlexNet (no LRN): not in the default set.
    "alexnet_nolrn": dict(zoo={"name": "alexnet"}, shape=(3, 224, 224), classes=1000, batch=128,
                          lr=0.01, momentum=0.9, weight_decay=5e-4, paper="alexnet_dsync"),
    "mlp": dict(zoo={"name": "mlp", "hidden": [500, 500]}, shape=(1, 28, 28), classes=10,
                batch=100, lr=0.2, momentum=0.0, weight_decay=1e-4, paper="mnist_mlp_dsync"),
    # A language model (`block`: a sample is `block` token ids): GPT-2 small, nanoGPT's AdamW.
    "gpt2": dict(zoo={"name": "gpt2"}, gpt=dict(n_layer=12, n_head=12, n_embd=768),
                 block=1024, shape=(1024,), classes=50257, batch=8, iterations=10,
                 lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                 clip_grad_norm=1.0),
}
DEFAULT_MODELS = "resnet18,alexnet,mlp,gpt2"
DEFAULT_ITERATIONS = 100  # per timed run, unless the model says (gpt2) or --iterations


def iterations_of(args, m):
    return args.iterations or m.get("iterations", DEFAULT_ITERATIONS)


def per_sample(m):
    """Units of work per sample: tokens for a language model, else 1 (an image)."""
    return m.get("block", 1)


def write_token_files(folder, train_windows, test_windows, block, vocab):
    """train.bin and val.bin of llm.c's format (256 little-endian int32: magic 20240520,
    version 1, the token count; then uint16 ids) holding random ids, each split exactly
    `windows` windows of `block` + 1 tokens (a window's targets reach one token past it)."""
    os.makedirs(folder, exist_ok=True)
    draw = random.Random(1)
    for name, windows in (("train.bin", train_windows), ("val.bin", test_windows)):
        count = windows * block + 1
        ids = array.array("H", draw.choices(range(vocab), k=count))
        if sys.byteorder == "big":
            ids.byteswap()
        with open(os.path.join(folder, name), "wb") as f:
            f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
            f.write(ids.tobytes())


def dtrain_config(name, m, batch, iterations, epochs, device, out, data):
    """`data`: the folder of a language model's token files (write_token_files)."""
    if "block" in m:
        # One test window: the evaluation at the end is not what is measured.
        dataset = (f"{{name: tokens, path: {data}, block_size: {m['block']}, "
                   f"vocab_size: {m['classes']}, batch_size: {batch}, workers: 4, prefetch: 4}}")
        b1, b2 = m["betas"]
        optimizer = (f"{{name: adamw, lr: {m['lr']}, betas: [{b1}, {b2}], eps: {m['eps']:.1e}, "
                     f"weight_decay: {m['weight_decay']}, clip_grad_norm: {m['clip_grad_norm']}, "
                     "schedule: {name: constant}}")
    else:
        c, h, w = m["shape"]
        dataset = (f"{{name: synthetic, shape: [{c}, {h}, {w}], classes: {m['classes']}, "
                   f"train_size: {batch * iterations}, test_size: {batch}, batch_size: {batch}, "
                   "workers: 4, prefetch: 4}")
        optimizer = (f"{{name: sgd, lr: {m['lr']}, momentum: {m['momentum']}, "
                     f"weight_decay: {m['weight_decay']}, schedule: {{name: constant}}}}")
    return f"""name: gpu_bench_{name}
seed: 1
model:       {flow(m["zoo"])}
dataset:     {dataset}
cluster:     {{device: {device}, threads_per_rank: 1}}
algorithm:   {{name: sync}}
compression: {{name: none}}
optimizer:   {optimizer}
train:       {{epochs: {epochs}, eval_every_epochs: {epochs}}}
output:      {{dir: {out}}}
"""


def run_dtrain(args, tmp, name, m, batch, iterations, epochs, device, extra=()):
    """Runs dtrain on a config written for `name`; returns (completed process, output dir)."""
    out = os.path.join(tmp, f"{name}-{device}-out")
    cfg = os.path.join(tmp, f"{name}-{device}.yaml")
    data = os.path.join(tmp, f"{name}-{device}-tokens")
    if "block" in m:  # an epoch of exactly `iterations` batches
        write_token_files(data, batch * iterations, 1, m["block"], m["classes"])
    with open(cfg, "w") as f:
        f.write(dtrain_config(name, m, batch, iterations, epochs, device, out, data))
    cmd = [args.dtrain, "--config", cfg, *extra]
    if args.tf32:
        cmd += ["--set", "cluster.tf32=true"]
    if args.precision != "fp32":
        cmd += ["--set", f"cluster.precision={args.precision}"]
    return subprocess.run(cmd, capture_output=True, text=True), out


def fail(message, code=1):
    print(f"gpu_vs_pytorch: {message}", file=sys.stderr)
    sys.exit(code)


def dtrain_failure(what, p):
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-5:])
    return f"dtrain {what}: exit code {p.returncode}\n{tail}"


# ---- --check-models: no GPU needed ------------------------------------------------------------

# dtrain's layer types (the dry run's summary) and PyTorch's modules that do the same work; ReLU,
# GELU, flatten and add are left out (PyTorch's blocks reuse one ReLU module), and so are the
# GPT's embeddings (PyTorch's position table sees ids without the batch axis) and attention
# (torch_gpt's attention module wraps c_attn and c_proj, so its hook fires after theirs).
DTRAIN_TYPES = {"conv2d": "conv", "linear": "linear", "batchnorm2d": "bn", "lrn": "lrn",
                "maxpool2d": "maxpool", "avgpool2d": "avgpool", "global_avgpool": "avgpool",
                "dropout": "dropout", "layer_norm": "ln"}


def dtrain_layers(summary):
    """[(kind, output shape)] from the dry run's layer table."""
    layers = []
    for line in summary.splitlines():
        f = re.match(r"^\S+\s+(\S+)(?: \(fused\))?\s+\[([\d, ]*)\]", line)
        if f and f.group(1) in DTRAIN_TYPES:
            layers.append((DTRAIN_TYPES[f.group(1)], [int(v) for v in f.group(2).split(",")]))
    return layers


def torch_layers(torch, model, m, batch):
    """[(kind, output shape without the batch)] of `model`'s modules, in forward order, and the
    output's shape for a batch of `batch` (token ids of 0 for a language model)."""
    import torch_gpt
    kinds = {torch.nn.Conv2d: "conv", torch.nn.Linear: "linear", torch.nn.BatchNorm2d: "bn",
             torch.nn.LocalResponseNorm: "lrn", torch.nn.MaxPool2d: "maxpool",
             torch.nn.AvgPool2d: "avgpool", torch.nn.AdaptiveAvgPool2d: "avgpool",
             torch.nn.Dropout: "dropout", torch.nn.LayerNorm: "ln", torch_gpt.LayerNorm: "ln"}
    layers, hooks = [], []
    for module in model.modules():
        # A dropout of p = 0 does nothing; dtrain's GPT leaves those layers out.
        if type(module) in kinds and not (isinstance(module, torch.nn.Dropout) and module.p == 0):
            kind = kinds[type(module)]
            hooks.append(module.register_forward_hook(
                lambda mod, inp, out, kind=kind: layers.append((kind, list(out.shape[1:])))))
    with torch.no_grad():
        dtype = torch.long if "block" in m else torch.float32
        out = model(torch.zeros(batch, *m["shape"], dtype=dtype))
    for h in hooks:
        h.remove()
    return layers, list(out.shape)


def torch_model(m):
    """The PyTorch twin of model `m` (on the CPU)."""
    if "block" in m:
        import torch_gpt
        return torch_gpt.GPT(vocab=m["classes"], block=m["block"], **m["gpt"])
    import torch_models
    return torch_models.build(m["zoo"], m["shape"], m["classes"])


def check_models(args, names):
    try:
        import torch
        import torch_models
    except ImportError as e:
        print(f"gpu_vs_pytorch --check-models: PyTorch is not installed ({e}); skipped")
        return 77
    if not os.access(args.dtrain, os.X_OK):
        fail(f"no dtrain binary at {args.dtrain} (build it, or pass --dtrain PATH)", 2)
    print(f"{'model':14} {'torch params':>14} {'dtrain params':>14}  layers and shapes")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            m = MODELS[name]
            model = torch_model(m).eval()
            ours = torch_models.parameter_count(model)
            # A sequence of GPT-2's 1024 tokens is batch enough (its forward on the CPU is slow).
            batch = 1 if "block" in m else 2
            mine, out = torch_layers(torch, model, m, batch)
            del model
            p, _ = run_dtrain(args, tmp, name, m, 2, 1, 1, "cpu", ["--dry-run"])
            found = re.findall(r"^parameters: (\d+)$", p.stdout, re.M)
            if p.returncode != 0 or not found:
                print(dtrain_failure(f"--dry-run of {name}", p))
                bad += 1
                continue
            theirs, layers = int(found[-1]), dtrain_layers(p.stdout)
            expected = [batch, m["block"], m["classes"]] if "block" in m else [batch, m["classes"]]
            same = mine == layers and out == expected
            verdict = f"{len(layers)} same" if same else "DIFFER"
            print(f"{name:14} {ours:14,d} {theirs:14,d}  {verdict}"
                  f"{'' if ours == theirs else '  (parameter counts DIFFER)'}")
            if not same:
                for k in range(max(len(mine), len(layers))):
                    a = mine[k] if k < len(mine) else None
                    b = layers[k] if k < len(layers) else None
                    if a != b:
                        print(f"  first difference at layer {k}: PyTorch {a}, dtrain {b}")
                        break
            bad += not same or ours != theirs
    bad += check_paper_optimizers(names)
    return 1 if bad else 0


def check_paper_optimizers(names):
    """The SGD settings above are those of configs/paper/<paper>.yaml (when PyYAML is here);
    gpt2 has no paper config (its AdamW settings are nanoGPT's)."""
    try:
        import yaml
    except ImportError:
        print("(PyYAML missing: the optimizer settings were not compared with configs/paper/)")
        return 0
    bad = 0
    for name in (n for n in names if "paper" in MODELS[n]):
        m = MODELS[name]
        with open(os.path.join(ROOT, "configs", "paper", m["paper"] + ".yaml")) as f:
            opt = yaml.safe_load(f)["optimizer"]
        for key in ("lr", "momentum", "weight_decay"):
            if float(opt.get(key, 0.0)) != m[key]:
                print(f"{name}: {key} {m[key]} here, {opt.get(key)} in configs/paper/{m['paper']}.yaml")
                bad += 1
    return bad


# ---- the benchmark -----------------------------------------------------------------------------

def dtrain_rate(args, tmp, name, m):
    """Best measured epoch (the first is the warm-up): samples/s (gpt2: tokens/s), its data-wait
    fraction, the rate without that wait, and the backend dtrain names."""
    p, out = run_dtrain(args, tmp, name, m, m["batch"], iterations_of(args, m),
                        1 + args.repeats, "cuda")
    if p.returncode != 0:
        raise RuntimeError(dtrain_failure(f"training {name} on the GPU", p))
    backend = re.search(r"^backend\s+(.*)$", p.stdout, re.M)
    with open(os.path.join(out, "timing.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["rank"] == "0"]
    measured = rows[1:] or rows
    best = max(measured, key=lambda r: int(r["iterations"]) / float(r["wall_s"]))
    units = int(best["iterations"]) * m["batch"] * per_sample(m)
    wall, data = float(best["wall_s"]), float(best["data_s"])
    return units / wall, data / wall, units / (wall - data), backend.group(1) if backend else "?"


def torch_rate(args, name, m):
    """(lean, with loss.item() every iteration or None for a language model, memory format):
    samples/s (gpt2: tokens/s), best of args.repeats timed runs each. In bf16 a CNN runs in both
    memory formats and the one with the faster lean loop is returned."""
    cnn = "block" not in m and len(m["shape"]) == 3 and name != "mlp"
    if args.precision != "bf16" or not cnn:
        return (*torch_rate_in(args, m, channels_last=False), "nchw")
    runs = {fmt: torch_rate_in(args, m, channels_last=(fmt == "channels_last"))
            for fmt in ("nchw", "channels_last")}
    fmt = max(runs, key=lambda f: runs[f][0])
    return (*runs[fmt], fmt)


def torch_rate_in(args, m, channels_last):
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")
    torch.manual_seed(1)
    model = torch_model(m).to(device).train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if channels_last:
        model = model.to(memory_format=fmt)
    autocast = args.precision == "bf16"
    batch, iterations, lm = m["batch"], iterations_of(args, m), "block" in m
    # A few pinned host batches, copied to the GPU every iteration as dtrain's loader's are.
    if lm:
        import torch_gpt
        opt = torch_gpt.adamw(model, lr=m["lr"], betas=m["betas"], eps=m["eps"],
                              weight_decay=m["weight_decay"])
        xs = [torch.randint(m["classes"], (batch, m["block"])).pin_memory() for _ in range(4)]
        ys = [torch.randint(m["classes"], (batch, m["block"])).pin_memory() for _ in range(4)]
    else:
        opt = torch.optim.SGD(model.parameters(), lr=m["lr"], momentum=m["momentum"],
                              weight_decay=m["weight_decay"])
        xs = [torch.randn(batch, *m["shape"]).contiguous(memory_format=fmt).pin_memory()
              for _ in range(4)]
        ys = [torch.randint(m["classes"], (batch,)).pin_memory() for _ in range(4)]

    def step(i):
        x = xs[i % 4].to(device, non_blocking=True)
        y = ys[i % 4].to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
            loss = F.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
        loss.backward()
        if lm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), m["clip_grad_norm"])
        opt.step()
        return loss

    def timed(read_loss):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(iterations):
            loss = step(i)
            if read_loss:
                loss.item()
        torch.cuda.synchronize()
        return iterations * batch * per_sample(m) / (time.perf_counter() - start)

    for i in range(iterations):  # warm-up: cudnn.benchmark's search, the allocator
        step(i)
    lean = max(timed(False) for _ in range(args.repeats))
    synced = None if lm else max(timed(True) for _ in range(args.repeats))
    del model, opt, xs, ys
    torch.cuda.empty_cache()
    return lean, synced


def benchmark(args, names):
    # Before torch loads OpenBLAS: it reads the variables once, as it loads.
    blas_setting = openblas_core.peer_env(os.environ)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        fail(f"PyTorch is not installed ({e})")
    print(f"PyTorch's OpenBLAS {openblas_core.describe(openblas_core.loaded())}; {blas_setting}")
    if not torch.cuda.is_available():
        fail(f"PyTorch sees no CUDA GPU (torch {torch.__version__}, built for CUDA "
             f"{torch.version.cuda or 'none'}): this benchmark needs one "
             "(--check-models runs without)")
    if not os.access(args.dtrain, os.X_OK):
        fail(f"no dtrain binary at {args.dtrain} (build it, or pass --dtrain PATH)", 2)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.set_float32_matmul_precision("high" if args.tf32 else "highest")

    with tempfile.TemporaryDirectory() as tmp:
        # dtrain first on a tiny model: a build without CUDA or an unusable GPU stops here.
        p, _ = run_dtrain(args, tmp, "probe", MODELS["mlp"], 100, 1, 1, "cuda", ["--dry-run"])
        if p.returncode != 0:
            fail(dtrain_failure("on cluster.device=cuda", p))
        precision = "TF32" if args.tf32 else "fp32, TF32 off"
        if args.precision == "bf16":
            precision = (f"bf16 mixed precision (dtrain cluster.precision=bf16, PyTorch autocast; "
                         f"fp32 layers with {precision})")
        print(f"GPU: {torch.cuda.get_device_name(0)}; {precision} on both sides")
        print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
              f"{torch.backends.cudnn.version()}), eager, cudnn.benchmark")
        print(f"best of {args.repeats} runs of N iterations after N warm-up iterations (N in the "
              "table); batches copied from pinned host memory")
        header = (f"{'model':14} {'batch':>5} {'N':>4} {'unit':>7} {'dtrain/s':>10} "
                  f"{'data wait':>9} {'w/o wait/s':>10} {'torch/s':>10} {'fmt':>13} "
                  f"{'ratio':>6} {'torch+item/s':>12}  goal")
        lines, backend, failed = [], None, []
        for name in names:
            m = MODELS[name]
            # A model that fails on either side is reported and the others still run (the
            # first GPU runs of a new model are where that happens).
            try:
                ours, data_wait, no_wait, backend = dtrain_rate(args, tmp, name, m)
                lean, synced, fmt = torch_rate(args, name, m)
            except Exception as e:  # dtrain's exit, PyTorch's out-of-memory or CUDA error
                print(f"gpu_vs_pytorch: {name}: {e}", file=sys.stderr, flush=True)
                torch.cuda.empty_cache()
                lines.append(f"{name:14} {m['batch']:5d} FAILED (see above)")
                failed.append(name)
                continue
            ratio = ours / lean
            verdict = "met" if ratio >= 1.0 else "NOT met"
            unit = "tokens" if "block" in m else "samples"
            item = f"{synced:12.1f}" if synced is not None else f"{'-':>12}"
            lines.append(f"{name:14} {m['batch']:5d} {iterations_of(args, m):4d} {unit:>7} "
                         f"{ours:10.1f} {data_wait:9.0%} {no_wait:10.1f} {lean:10.1f} "
                         f"{fmt:>13} {ratio:5.2f}x {item}  >= 1.0x lean torch: {verdict}")
            print(f"  done: {lines[-1]}", file=sys.stderr, flush=True)
        print(f"dtrain: {backend}")
        print(header)
        print("\n".join(lines))
        print("data wait: share of dtrain's epoch spent waiting for its loader (timing.csv data_s; "
              "the synthetic images are made by 4 loader threads, gpt2's ids read from token "
              "files); w/o wait: the rate without it")
        if any("block" in MODELS[n] for n in names):
            print("gpt2: PyTorch's attention is "
                  + ("F.scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention")
                     else "explicit (this torch has no scaled_dot_product_attention)")
                  + "; its AdamW torch's default (not fused=True)")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtrain", default=os.path.join(ROOT, "build", "apps", "dtrain", "dtrain"),
                   help="the dtrain binary (a CUDA build)")
    p.add_argument("--models",
                   help=f"comma-separated, from {', '.join(MODELS)} (default {DEFAULT_MODELS}; "
                   "with --check-models all)")
    p.add_argument("--iterations", type=int,
                   help=f"iterations per timed run and of the warm-up (default "
                   f"{DEFAULT_ITERATIONS}; gpt2 {MODELS['gpt2']['iterations']})")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per side; the best counts")
    p.add_argument("--tf32", action="store_true", help="TF32 on for both sides")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: dtrain's cluster.precision=bf16 against PyTorch's bf16 autocast")
    p.add_argument("--check-models", action="store_true",
                   help="compare the PyTorch twins with dtrain --dry-run on the CPU, then exit")
    args = p.parse_args()
    chosen = args.models or (",".join(MODELS) if args.check_models else DEFAULT_MODELS)
    names = [n.strip() for n in chosen.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        p.error(f"--models: unknown {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(MODELS)}")
    if (args.iterations is not None and args.iterations < 1) or args.repeats < 1:
        p.error("--iterations and --repeats must be at least 1")
    args.dtrain = os.path.abspath(args.dtrain)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # torch_models, torch_gpt
    return check_models(args, names) if args.check_models else benchmark(args, names)


if __name__ == "__main__":
    sys.exit(main())
