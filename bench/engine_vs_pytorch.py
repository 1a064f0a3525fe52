#!/usr/bin/python3
"""dtrain's CPU engine against PyTorch, in one run, single thread: speed, memory, FLOP/s.

Every model is trained with the same architecture (bench/torch_models.py mirrors dtrain's zoo
layer for layer; the parameter counts are checked against `dtrain --dry-run`), the same batch and
the same SGD (momentum 0.9, the lr and weight decay of the model's config in configs/, a constant
schedule) in dtrain and in PyTorch (Debian python3-torch; BLAS = OpenBLAS). PyTorch runs in a
separate python process per measurement (this script with --torch-worker), so that its peak RSS
is its own.

 1. Speed, samples/s and the dtrain / PyTorch ratio:
    - MNIST-MLP (784-500-500-10, batch 100) and LeNet-5 (batch 64) on Fashion-MNIST: dtrain runs
      --epochs epochs (best epoch, timing.csv); PyTorch the same epochs as a lean loop over
      pre-loaded tensors (no DataLoader; the fastest idiomatic peer) and, for information, as the
      usual DataLoader loop. The MLP is also put against its GEMM-only bound (bench/gemm_bound.cpp,
      best of 3 runs of 1 s, right after the MLP's runs) and, for information, against the same
      GEMMs plus the momentum-SGD step of the weights (gemm_bound --sgd).
    - on synthetic data, batch 64: ResNet-20 (CIFAR, option-A shortcuts, 0.27M parameters),
      the Pipe-SGD paper's CIFAR CNN (cifar_cnn, 100 classes, 0.15M), VGG-16 at 32x32 with the
      zoo's 4096-4096 head (10 classes, 33.6M), ResNet-18 with its small-input stem at 3x64x64
      (200 classes, as Tiny ImageNet; 11.3M). dtrain runs 1 + --repeats epochs of N iterations
      (dataset.train_size = N x batch) and counts the best epoch after the first (the warm-up:
      creating the primitives); PyTorch runs N warm-up iterations, then --repeats timed runs of N
      iterations on two pre-made batches, best run.
    PyTorch runs every CNN in both memory formats, NCHW and channels_last (model and batches), and
    counts the faster, as a user tuning it would (the `fmt` column says which).
    Goals: ResNet-20 >= 2x, CIFAR CNN >= 2x, VGG-16 >= 1.5x, ResNet-18@64 >= 1.5x, LeNet >= 2x
    lean PyTorch; the MLP at >= 90 % of the GEMM-only bound.
 2. Memory: peak RSS (GNU time's %M: ru_maxrss of the run) of a dtrain run and of a PyTorch
    run of ResNet-20 and VGG-16 at batch 64 and at batch 128 (each 1 + 1 epochs of 2 iterations,
    the highest of 2 runs; the PyTorch process imports torch and holds two batches, as dtrain's
    loader prefetches two); the memory one more sample of batch costs, (RSS128 - RSS64) / 64, for
    both. Goal: dtrain <= 1.0x PyTorch. And the peak RSS of the dtrain LeNet run of part 1 (a tiny
    model on the whole of Fashion-MNIST). Goal: <= 150 MB.
 3. Compute efficiency: training FLOPs per sample (3x the forward FLOPs that dtrain's model
    summary prints, `--dry-run`'s `total` row) x samples/s, in GFLOP/s and as a share of the
    core's peak fp32 FMA throughput measured by bench/cpu_peak.cpp (AVX-512 where the CPU has it;
    with --threads N, of N times it).
With --threads 1 dtrain's loader thread (synthetic images, prefetch 2) may use a second core;
PyTorch's batches are made before the clock starts.
PyTorch runs as a user of this CPU would run it (bench/openblas_core.py): OPENBLAS_CORETYPE for
the CPU's vector extension (Debian's OpenBLAS falls back to SSE3 kernels on CPUs it does not
know) and OPENBLAS_NUM_THREADS = --threads, unless set already; the output's `Core:` is what
OpenBLAS itself reports in the PyTorch processes.

bf16 mixed precision, measured in the same run wherever dtrain trains in bf16 on this CPU (the
probe: `dtrain --dry-run --set cluster.precision=bf16` of a tiny MLP; its exit code 2 means the
CPU lacks native bf16: one line says so and the bf16 goals are "not measured"):
 1b. every model of part 1 again, right after its fp32 runs and measured the same way, in dtrain
    with cluster.precision: bf16 and in lean PyTorch with forward and loss under
    torch.autocast("cpu", dtype=torch.bfloat16) (what a PyTorch user writes; backward and the
    optimizer step outside it), in the faster of NCHW and channels_last as in part 1. Printed:
    both bf16 speeds, each side's bf16 / fp32 ratio and dtrain bf16 / PyTorch bf16.
    Goals: dtrain bf16 >= 3x dtrain fp32 for ResNet-20 and VGG-16; dtrain bf16 >= 1.5x PyTorch
    bf16 for ResNet-20 and VGG-16.
 2. a third side, "dtrain bf16", for ResNet-20 and VGG-16, measured as dtrain fp32 is. Goal: its
    MB per sample of batch <= 0.6x dtrain fp32's (activations and their gradients are stored in
    bf16; weights, gradients and optimizer state stay fp32).
 3. dtrain bf16's GFLOP/s, for information (the fp32 FMA peak is not its ceiling).
The header names the oneDNN ISA dtrain dispatches to (its `backend` line) and whether the CPU has
AVX512-BF16 and AMX-BF16. Without AMX, oneDNN runs bf16 convolutions and matrix products on
AVX512-BF16 dot products, not expected to beat fp32 (dtrain bf16 ran at 0.5-0.6x its fp32 on such
a CPU): the 3x goals expect AMX. With --bf16,
PyTorch's autocast runs also where dtrain cannot train in bf16 (for information); --no-bf16
skips every bf16 measurement.

    /usr/bin/python3 bench/engine_vs_pytorch.py   (Debian's python, which has python3-torch)
        [--build build] [--threads 1] [--epochs 2] [--repeats 2]
        [--models mlp,lenet,resnet20,cifar_cnn,vgg16,resnet18_64]   (default: all)
        [--quick]   (a few iterations of everything: a smoke test, not a measurement)
        [--bf16 | --no-bf16]
Needs: scripts/setup.sh --bench, and a release build (dtrain, dtrain_gemm_bound, dtrain_cpu_peak).
About 10 minutes on one core of a 2-core machine with --no-bf16; the bf16 measurements add about
as much again (ResNet-20 and VGG-16 alone, --epochs 1 --repeats 1: 7.5 minutes with them).
"""
import argparse, csv, gzip, importlib.metadata, importlib.util, json, os, re, struct, subprocess
import sys, tempfile, time

import openblas_core  # PyTorch's BLAS as a user would run it (beside this script)
from dtrain_runs import flow  # YAML flow values (beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # dtrain's Fashion-MNIST normalisation

# Model → dtrain's `model:` map, data, batch, SGD (lr and weight decay of the config named) and
# goal. `iterations`: per timed epoch on synthetic data (the Fashion-MNIST ones run whole epochs).
MODELS = {
    "mlp": dict(zoo={"name": "mlp", "hidden": [500, 500]}, data="fashion", shape=(1, 28, 28),
                classes=10, batch=100, lr=0.05, weight_decay=1e-4,  # fashion_mlp_sync.yaml
                goal=None),  # its goal is the share of the GEMM-only bound
    "lenet": dict(zoo={"name": "lenet"}, data="fashion", shape=(1, 28, 28), classes=10, batch=64,
                  lr=0.05, weight_decay=5e-4, goal=2.0),  # fashion_lenet_sync.yaml
    "resnet20": dict(zoo={"name": "resnet20"}, data="synthetic", shape=(3, 32, 32), classes=10,
                     batch=64, iterations=20, lr=0.1, weight_decay=1e-4,  # cifar10_resnet20_sync
                     goal=2.0),
    "cifar_cnn": dict(zoo={"name": "cifar_cnn"}, data="synthetic", shape=(3, 32, 32), classes=100,
                      batch=64, iterations=50, lr=0.05, weight_decay=5e-4,
                      goal=2.0),  # paper/cifar100_cnn_dsync
    "vgg16": dict(zoo={"name": "vgg16"}, data="synthetic", shape=(3, 32, 32), classes=10, batch=64,
                  iterations=5, lr=0.01, weight_decay=5e-4,  # paper/pipedream/small/*vgg16*
                  goal=1.5),
    "resnet18_64": dict(zoo={"name": "resnet18", "small_input": True}, data="synthetic",
                        shape=(3, 64, 64), classes=200, batch=64, iterations=2, lr=0.1,
                        weight_decay=1e-4, goal=1.5),  # paper/resnet18_dsync
}
MEMORY_MODELS = ("resnet20", "vgg16")  # part 2: RSS at batch 64 and 128
MEMORY_BATCHES = (64, 128)
MEMORY_GOAL = 1.0  # dtrain's MB per sample of batch <= this x PyTorch's
# Runs per point, the highest peak counts: the kernel may drop clean file-backed pages (PyTorch
# maps a few hundred MB of libraries) during a run, which only ever lowers a peak.
MEMORY_RUNS = 2
TINY_MODEL, TINY_RSS_GOAL_MB = "lenet", 150
GEMM_GOAL = 0.90   # the MLP's share of its GEMM-only bound
# bf16 mixed precision (cluster.precision: bf16): goals of dtrain bf16 by model, samples/s against
# dtrain's own fp32 and against lean PyTorch under bf16 autocast; the other models print the ratios.
BF16_SPEEDUP_GOALS = {"resnet20": 3.0, "vgg16": 3.0}
BF16_TORCH_GOALS = {"resnet20": 1.5, "vgg16": 1.5}
BF16_MEMORY_GOAL = 0.6  # dtrain bf16's MB per sample of batch <= this x dtrain fp32's
TIME = "/usr/bin/time"  # GNU time: the peak RSS of a run


def verdict(ok):
    """PASS, FAIL, or (None) not measured."""
    return "not measured" if ok is None else "PASS" if ok else "FAIL"


# ---- measuring a child process -----------------------------------------------------------------

def run_measured(cmd, what, env=None):
    """Runs `cmd`; returns (its output, its peak RSS in MB). Exits with the output's tail when it
    fails. The peak comes from GNU time (%M: ru_maxrss of its child): os.wait4 on a child of this
    process could report this process's own peak instead, because Linux carries the RSS high-water
    mark of the address space a child leaves at exec — this one's, when python forks with vfork —
    into the child's ru_maxrss. Without /usr/bin/time, that is the fallback (this process never
    imports torch or numpy, so its own peak stays far below any measured one)."""
    with tempfile.TemporaryFile("w+") as log, tempfile.NamedTemporaryFile("r") as peak:
        timed = os.access(TIME, os.X_OK)
        argv = [TIME, "-f", "%M", "-o", peak.name, *cmd] if timed else cmd
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        log.seek(0)
        out = log.read()
        kib = int(peak.read().split()[-1]) if timed and p.returncode == 0 else usage.ru_maxrss
    if p.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-8:])
        sys.exit(f"engine_vs_pytorch: {what} failed (exit code {p.returncode}):\n{tail}")
    return out, kib / 1024.0


# ---- dtrain ------------------------------------------------------------------------------------

def dtrain_config(name, m, batch, threads, epochs, train_size, out, precision):
    if m["data"] == "fashion":
        size = f", train_size: {train_size}" if train_size else ""
        dataset = f"{{name: fashion_mnist, path: {DATA}, batch_size: {batch}{size}}}"
    else:
        c, h, w = m["shape"]
        dataset = (f"{{name: synthetic, shape: [{c}, {h}, {w}], classes: {m['classes']}, "
                   f"train_size: {train_size}, test_size: {batch}, batch_size: {batch}}}")
    # fp32 configs stay as they were before bf16 existed (fp32 is the default).
    bf16 = ", precision: bf16" if precision == "bf16" else ""
    return f"""name: engine_vs_pytorch_{name}
seed: 1
model:       {flow(m["zoo"])}
dataset:     {dataset}
cluster:     {{device: cpu, threads_per_rank: {threads}{bf16}}}
algorithm:   {{name: sync}}
optimizer:   {{name: sgd, lr: {m["lr"]}, momentum: 0.9, weight_decay: {m["weight_decay"]}, schedule: {{name: constant}}}}
train:       {{epochs: {epochs}, eval_every_epochs: {epochs}}}
output:      {{dir: {out}}}
"""


def dtrain_binary(build):
    return os.path.join(build, "apps", "dtrain", "dtrain")


def write_config(tmp, name, m, batch, threads, epochs, train_size, precision="fp32"):
    """A fresh output folder and the config that writes into it."""
    out = tempfile.mkdtemp(prefix=f"{name}-{precision}-b{batch}-", dir=tmp)
    cfg = os.path.join(out, "config.in.yaml")
    with open(cfg, "w") as f:
        f.write(dtrain_config(name, m, batch, threads, epochs, train_size,
                              os.path.join(out, "run"), precision))
    return cfg, os.path.join(out, "run")


def dtrain_summary(build, tmp, name, m, threads):
    """(parameters, forward FLOPs per sample, backend line) from `dtrain --dry-run`'s summary:
    the `total` row of the layer table ends with the parameter and FLOP counts."""
    cfg, _ = write_config(tmp, name, m, m["batch"], threads, 1, m["batch"])
    out, _ = run_measured([dtrain_binary(build), "--config", cfg, "--dry-run"],
                          f"dtrain --dry-run of {name}")
    total = re.search(r"^total\s+.*?(\d+)\s+(\d+)\s*$", out, re.M)
    params = re.findall(r"^parameters: (\d+)$", out, re.M)
    backend = re.search(r"^backend\s+(.*)$", out, re.M)
    if not total or not params:
        sys.exit(f"engine_vs_pytorch: no `total` row or `parameters:` line in the dry run of "
                 f"{name}")
    return int(params[-1]), int(total.group(2)), backend.group(1) if backend else "?"


def bf16_probe(build, tmp, threads):
    """Whether dtrain trains in bf16 on this CPU: `dtrain --dry-run --set cluster.precision=bf16`
    of a tiny MLP. Returns (True, its `backend` line) or (False, the reason: dtrain's message).
    Exit code 2 is dtrain's answer where the CPU lacks native bf16; any other failure stops the
    benchmark."""
    tiny = dict(zoo={"name": "mlp", "hidden": [8]}, data="synthetic", shape=(1, 4, 4), classes=2,
                lr=0.1, weight_decay=0)
    cfg, _ = write_config(tmp, "bf16_probe", tiny, 4, threads, 1, 4)
    p = subprocess.run([dtrain_binary(build), "--config", cfg, "--dry-run", "--set",
                        "cluster.precision=bf16"], capture_output=True, text=True)
    if p.returncode == 2:
        said = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        said = said[said.find("cluster.precision"):] if "cluster.precision" in said else said
        return False, f"dtrain --dry-run --set cluster.precision=bf16: exit code 2, {said}"
    if p.returncode != 0:
        sys.exit(f"engine_vs_pytorch: the bf16 probe (dtrain --dry-run) failed (exit code "
                 f"{p.returncode}):\n{p.stderr.strip()}")
    backend = re.search(r"^backend\s+(.*)$", p.stdout, re.M)
    return True, backend.group(1) if backend else "?"


def onednn_isa(backend):
    """The ISA in dtrain's backend name `cpu (oneDNN 2.6.3, AVX-512 with bfloat16, 1 thread)`."""
    found = re.search(r"\(oneDNN [^,]*, ([^,]*),", backend)
    return found.group(1) if found else backend


def bf16_cpu_flags():
    """The CPU's native bf16 extensions, for the header: AVX512-BF16 and AMX-BF16, yes or no."""
    flags = openblas_core.cpu_flags()
    return ", ".join(f"{name} {'yes' if flag in flags else 'no'}"
                     for name, flag in (("AVX512-BF16", "avx512_bf16"), ("AMX-BF16", "amx_bf16")))


def dtrain_run(build, tmp, name, m, batch, threads, epochs, train_size, skip_first,
               precision="fp32"):
    """Trains in `precision` (cluster.precision); returns (best samples/s over the epochs, the
    first skipped when `skip_first`, and the process's peak RSS in MB)."""
    cfg, out = write_config(tmp, name, m, batch, threads, epochs, train_size, precision)
    _, rss = run_measured([dtrain_binary(build), "--config", cfg],
                          f"dtrain training {name} in {precision} at batch {batch}")
    with open(os.path.join(out, "timing.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["rank"] == "0"]
    measured = rows[1:] if skip_first and len(rows) > 1 else rows
    return max(int(r["iterations"]) * batch / float(r["wall_s"]) for r in measured), rss


# ---- PyTorch (in a child process: this script with --torch-worker) ------------------------------

def load_idx(name):
    import numpy as np
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, 1, rows, cols)
    return np.frombuffer(raw, np.uint8, offset=8)


def torch_worker(spec):
    """Runs one PyTorch measurement described by `spec` (a dict, see torch_run) and prints
    `RESULT {json}`: lean samples/s and, for Fashion-MNIST, the DataLoader loop's; `blas`: the
    core and threads OpenBLAS reports. spec `probe`: only `blas`. spec `autocast`: the lean loop
    only, its forward and loss under bfloat16 autocast."""
    import numpy as np
    import torch
    import torch.nn as nn
    import torch_models  # beside this script

    torch.set_num_threads(spec["threads"])
    if spec.get("probe"):
        print("RESULT " + json.dumps({"blas": openblas_core.loaded()}), flush=True)
        return
    m, batch = MODELS[spec["model"]], spec["batch"]
    torch.manual_seed(1)
    if spec["model"] in ("mlp", "lenet"):  # 784-500-500-10 and 1x28x28, out-of-place ReLUs
        model = getattr(torch_models, spec["model"])(inplace=False)
    else:
        model = torch_models.build(m["zoo"], m["shape"], m["classes"])
    model.train()
    # channels_last: the memory format a CNN user tries next to NCHW (main keeps the faster).
    channels_last = spec.get("channels_last", False)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)

    def formatted(t):
        return t.contiguous(memory_format=torch.channels_last) if channels_last else t

    opt = torch.optim.SGD(model.parameters(), lr=m["lr"], momentum=0.9,
                          weight_decay=m["weight_decay"])
    loss_fn = nn.CrossEntropyLoss()
    autocast = spec.get("autocast", False)

    def step(xb, yb):
        xb = formatted(xb)  # a no-op for batches already in the format
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()

    result = {"params": sum(p.numel() for p in model.parameters())}
    if m["data"] == "fashion":
        x = (torch.from_numpy(load_idx("train-images-idx3-ubyte.gz").astype(np.float32)) / 255
             - MEAN) / STD
        y = torch.from_numpy(load_idx("train-labels-idx1-ubyte.gz").astype(np.int64))
        if spec["train_size"]:
            x, y = x[:spec["train_size"]], y[:spec["train_size"]]
        n = (len(x) // batch) * batch

        def epochs(use_loader):
            best = 0.0
            for _ in range(spec["epochs"]):
                if use_loader:
                    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                                         batch_size=batch, shuffle=True,
                                                         drop_last=True)
                    batches = iter(loader)
                else:
                    perm = torch.randperm(len(x))[:n].view(-1, batch)
                    batches = ((x[idx], y[idx]) for idx in perm)
                start = time.perf_counter()
                for xb, yb in batches:
                    step(xb, yb)
                best = max(best, n / (time.perf_counter() - start))
            return best

        result["lean"] = epochs(False)
        if not autocast:
            result["loader"] = epochs(True)
    else:
        # Two pre-made batches (dtrain's loader holds two prefetched ones).
        xs = [formatted(torch.randn(batch, *m["shape"])) for _ in range(2)]
        ys = [torch.randint(m["classes"], (batch,)) for _ in range(2)]
        iterations = spec["iterations"]
        for i in range(iterations):  # warm-up
            step(xs[i % 2], ys[i % 2])
        best = 0.0
        for _ in range(spec["repeats"]):
            start = time.perf_counter()
            for i in range(iterations):
                step(xs[i % 2], ys[i % 2])
            best = max(best, iterations * batch / (time.perf_counter() - start))
        result["lean"] = best
    result["blas"] = openblas_core.loaded()
    print("RESULT " + json.dumps(result), flush=True)


# The PyTorch workers' environment: OpenBLAS as a user would set it (main fills it).
PEER_ENV = dict(os.environ)


def torch_run(name, batch, threads, **spec):
    """One PyTorch measurement in a fresh python process: (its result dict, its peak RSS in MB)."""
    spec = dict(spec, model=name, batch=batch, threads=threads)
    out, rss = run_measured([sys.executable, os.path.abspath(__file__), "--torch-worker",
                             json.dumps(spec)], f"PyTorch training {name} at batch {batch}",
                            env=PEER_ENV)
    found = re.findall(r"^RESULT (.*)$", out, re.M)
    if not found:
        sys.exit(f"engine_vs_pytorch: the PyTorch worker for {name} printed no result:\n"
                 f"{out[-2000:]}")
    return json.loads(found[-1]), rss


def torch_fastest(name, batch, threads, **spec):
    """The faster of NCHW and channels_last for a CNN (by the lean loop), as a user tuning
    PyTorch would pick; the MLP runs NCHW only. Returns (result dict with its `format`, peak RSS
    in MB)."""
    runs = []
    for channels_last in ((False, True) if name != "mlp" else (False,)):
        result, rss = torch_run(name, batch, threads, channels_last=channels_last, **spec)
        result["format"] = "cl" if channels_last else "nchw"
        runs.append((result, rss))
    return max(runs, key=lambda r: r[0]["lean"])


def check_core(expected, result, what):
    """Every PyTorch process must run the OpenBLAS core the header printed."""
    if result.get("blas") != expected:
        sys.exit(f"engine_vs_pytorch: the PyTorch run of {what} had OpenBLAS "
                 f"{openblas_core.describe(result.get('blas'))}, the first one "
                 f"{openblas_core.describe(expected)}")


# ---- the C++ helpers ---------------------------------------------------------------------------

def gemm_bound(build, threads, seconds, runs, sgd=False):
    """The MLP's GEMM-only bound in samples/s: the best of `runs` runs (as the best epoch counts
    on both sides), and that run's line. With `sgd`: the bound with the momentum-SGD step of every
    layer's weights after its gradient GEMM (for information: the goal is the GEMM-only one)."""
    exe = os.path.join(build, "bench", "dtrain_gemm_bound")
    best = (0.0, "")
    for _ in range(runs):
        out = subprocess.run([exe, "--batch", "100", "--layers", "784,500,500,10", "--threads",
                              str(threads), "--seconds", str(seconds)] + (["--sgd"] if sgd else []),
                             check=True, capture_output=True, text=True).stdout
        best = max(best, (float(out.split("samples_per_s=")[1]), out.strip()))
    return best


def cpu_peak(build, seconds):
    """(peak GFLOP/s of one core, the ISA lines)."""
    exe = os.path.join(build, "bench", "dtrain_cpu_peak")
    out = subprocess.run([exe, "--seconds", str(seconds)], check=True, capture_output=True,
                         text=True).stdout
    isas = dict(re.findall(r"isa=(\w+) lanes=\d+ accumulators=\d+ gflops=([\d.]+)", out))
    peak = re.search(r"isa=(\w+) peak_gflops=([\d.]+)", out)
    return float(peak.group(2)), peak.group(1), isas


# ---- the benchmark -----------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2, help="Fashion-MNIST epochs (best counts)")
    p.add_argument("--repeats", type=int, default=2,
                   help="timed epochs / runs per side on synthetic data (best counts)")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument("--quick", action="store_true",
                   help="a few iterations of everything: a smoke test, not a measurement")
    bf16_choice = p.add_mutually_exclusive_group()
    bf16_choice.add_argument("--bf16", action="store_true",
                             help="PyTorch under bfloat16 autocast (information) also where dtrain "
                             "cannot train in bf16 on this CPU")
    bf16_choice.add_argument("--no-bf16", action="store_true",
                             help="no bf16 measurement (by default: wherever dtrain trains "
                             "in bf16)")
    p.add_argument("--torch-worker", metavar="JSON", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.torch_worker:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # torch_models
        return torch_worker(json.loads(a.torch_worker))
    names = [n.strip() for n in a.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        p.error(f"--models: unknown {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(MODELS)}")
    if min(a.threads, a.epochs, a.repeats) < 1:
        p.error("--threads, --epochs and --repeats must be at least 1")
    a.build = os.path.abspath(a.build)
    for exe in (dtrain_binary(a.build), os.path.join(a.build, "bench", "dtrain_cpu_peak")):
        if not os.access(exe, os.X_OK):
            p.error(f"no {exe}: build it first (scripts/build.sh), or pass --build DIR")
    if importlib.util.find_spec("torch") is None:
        p.error(f"{sys.executable} has no torch: run this with Debian's /usr/bin/python3 "
                "(python3-torch; scripts/setup.sh --bench)")
    # Only the workers import torch: this process stays small (see run_measured).
    torch_version = importlib.metadata.version("torch")
    blas_setting = openblas_core.peer_env(PEER_ENV, a.threads)
    repeats = 1 if a.quick else a.repeats
    fashion_epochs = 1 if a.quick else a.epochs
    memory_runs = 1 if a.quick else MEMORY_RUNS

    def iterations(m):
        return 1 if a.quick else m["iterations"]

    goals = []  # (what, met: True, False, or None = not measured)

    def judge(what, ok):
        goals.append((what, ok))
        return verdict(ok)

    with tempfile.TemporaryDirectory(prefix="engine_vs_pytorch-") as tmp:
        peak, peak_isa, isas = cpu_peak(a.build, 0.2 if a.quick else 1.0)
        summaries = {n: dtrain_summary(a.build, tmp, n, MODELS[n], a.threads) for n in names}
        backend = next(iter(summaries.values()))[2]
        blas = torch_run("probe", 0, a.threads, probe=True)[0]["blas"]
        # bf16: dtrain where it trains in bf16 on this CPU; PyTorch's autocast alongside (or
        # alone, for information, with --bf16).
        if a.no_bf16:
            bf16_dtrain, bf16_said = False, "skipped: --no-bf16"
        else:
            bf16_dtrain, bf16_said = bf16_probe(a.build, tmp, a.threads)
        bf16_torch = bf16_dtrain or a.bf16
        load = os.getloadavg()[0]
        print(f"dtrain: {backend}; PyTorch {torch_version} (OpenBLAS), {a.threads} "
              f"thread(s); load average {load:.2f} on {os.cpu_count()} cores at the start"
              + ("; --quick: NOT a measurement" if a.quick else ""))
        print(f"PyTorch's OpenBLAS {openblas_core.describe(blas)}; {blas_setting}")
        if bf16_dtrain:
            print(f"bf16: dtrain trains in bf16 here, oneDNN ISA {onednn_isa(bf16_said)} (its "
                  f"backend line in bf16); CPU: {bf16_cpu_flags()}"
                  + ("" if openblas_core.has_amx_bf16() else
                     " (no AMX: oneDNN's bf16 convolutions and GEMMs are not expected to beat "
                     "fp32 here)"))
        else:
            print(f"bf16: NOT measured ({bf16_said}); CPU: {bf16_cpu_flags()}"
                  + ("; PyTorch's autocast for information (--bf16)" if bf16_torch else ""))
        print("core peak fp32 (bench/cpu_peak.cpp): "
              + ", ".join(f"{isa} {float(g):.1f}" for isa, g in isas.items())
              + f" GFLOP/s; peak = {peak:.1f} ({peak_isa})")
        if a.quick:
            print("Fashion-MNIST: 1 epoch of 20 batches; synthetic: 1 warm-up + 1 timed epoch of 1 "
                  "iteration")
        else:
            print(f"Fashion-MNIST: best of {fashion_epochs} epochs; synthetic: best of {repeats} "
                  "timed epochs / runs after a warm-up one (iterations per epoch below)")

        # 1. Speed.
        speed, rss = {}, {}
        print("\n1. Training throughput, samples/s (ratio = dtrain / lean PyTorch; input: "
              "Fashion-MNIST or synthetic CxHxW; iters: per epoch / timed run)")
        print(f"{'model':12} {'input':10} {'batch':>5} {'iters':>5} {'parameters':>11} "
              f"{'dtrain/s':>9} {'torch/s':>9} {'fmt':>4} {'ratio':>6} {'torch+DL/s':>10} "
              f"{'ratio':>6}  goal")
        bf16_speed = {}  # model: (dtrain bf16 samples/s or None, PyTorch autocast result or None)
        for n in names:
            m = MODELS[n]
            params = summaries[n][0]
            fashion = m["data"] == "fashion"
            if fashion:
                train_size = 20 * m["batch"] if a.quick else 0
                its = (train_size or 60000) // m["batch"]
                ours_run = dict(epochs=fashion_epochs, train_size=train_size, skip_first=False)
                peer = dict(epochs=fashion_epochs, train_size=train_size)
            else:
                its = iterations(m)
                ours_run = dict(epochs=1 + repeats, train_size=its * m["batch"], skip_first=True)
                peer = dict(iterations=its, repeats=repeats)
            ours, rss[n] = dtrain_run(a.build, tmp, n, m, m["batch"], a.threads, **ours_run)
            theirs, _ = torch_fastest(n, m["batch"], a.threads, **peer)
            check_core(blas, theirs, n)
            # bf16 right after fp32, under the same conditions, measured the same way.
            ours16 = (dtrain_run(a.build, tmp, n, m, m["batch"], a.threads, precision="bf16",
                                 **ours_run)[0] if bf16_dtrain else None)
            half = None
            if bf16_torch:
                half, _ = torch_fastest(n, m["batch"], a.threads, autocast=True, **peer)
                check_core(blas, half, n + " (bf16)")
            bf16_speed[n] = (ours16, half)
            speed[n] = (ours, theirs["lean"])
            if n == "mlp":  # right after the MLP's runs, under the same conditions
                bound, bound_line = gemm_bound(a.build, a.threads, 0.5 if a.quick else 1,
                                               1 if a.quick else 3)
                sgd_bound, sgd_line = gemm_bound(a.build, a.threads, 0.5 if a.quick else 1,
                                                 1 if a.quick else 3, sgd=True)
            data = "fmnist" if fashion else "x".join(map(str, m["shape"]))
            loader = theirs.get("loader")
            dl = f"{loader:10.0f} {ours / loader:6.2f}" if loader else f"{'-':>10} {'-':>6}"
            ratio = ours / theirs["lean"]
            goal = (f">= {m['goal']}x: {judge(n + ' speed', ratio >= m['goal'])}" if m["goal"]
                    else "(its goal: the GEMM bound below)")
            warn = ("" if theirs["params"] == params else
                    f"  PARAMETERS DIFFER: torch {theirs['params']}")
            print(f"{n:12} {data:10} {m['batch']:5d} {its:5d} {params:11,d} {ours:9.1f} "
                  f"{theirs['lean']:9.1f} {theirs['format']:>4} {ratio:6.2f} {dl}  "
                  f"{goal}{warn}", flush=True)
        print("torch/s: lean PyTorch in the faster of its memory formats (fmt: nchw, or cl = "
              "channels_last, for the CNNs; torch+DL: the DataLoader loop in the same format)")
        if "mlp" in names:
            frac = speed["mlp"][0] / bound
            print(f"  {bound_line} (best of {1 if a.quick else 3})")
            met = judge("mlp GEMM bound", frac >= GEMM_GOAL)
            print(f"mlp at {frac:.1%} of the GEMM-only bound ({speed['mlp'][0]:.0f} / {bound:.0f} "
                  f"samples/s); goal >= {GEMM_GOAL:.0%}: {met}")
            # For information (the goal stays the GEMM-only bound): the same GEMMs plus the
            # momentum-SGD step of the weights, a pass any unfused optimizer makes.
            print(f"  {sgd_line} (best of {1 if a.quick else 3})")
            print(f"mlp at {speed['mlp'][0] / sgd_bound:.1%} of the GEMM + SGD-step bound "
                  f"({speed['mlp'][0]:.0f} / {sgd_bound:.0f} samples/s), which is itself "
                  f"{sgd_bound / bound:.1%} of the GEMM-only bound (for information)")
            # The ceiling any fp32 engine built on these GEMMs has against this peer.
            print(f"the GEMM-only bound itself is {bound / speed['mlp'][1]:.2f}x lean torch on the "
                  "mlp")

        # 1b. bf16 mixed precision (measured in the loop above, right after each model's fp32).
        if bf16_torch:
            print("\n1b. bf16 mixed precision, samples/s (dtrain: cluster.precision: bf16; torch: "
                  "the lean loop with forward and loss under torch.autocast(\"cpu\", bfloat16))")
            print(f"{'model':12} {'dtrain/s':>9} {'bf16/s':>9} {'x fp32':>6} {'torch/s':>9} "
                  f"{'bf16/s':>9} {'fmt':>4} {'x fp32':>6} {'ratio':>6}  goal")
        else:
            print("\n1b. bf16 mixed precision: not measured (dtrain does not train in bf16 here: "
                  "see the header's bf16 line)")
        for n in names:
            ours16, half = bf16_speed[n]
            # The goals (ResNet-20 and VGG-16 only), "not measured" where dtrain has no bf16 here.
            verdicts = []
            if n in BF16_SPEEDUP_GOALS:
                goal = BF16_SPEEDUP_GOALS[n]
                met = None if ours16 is None else ours16 / speed[n][0] >= goal
                verdicts.append(f"x fp32 >= {goal}x: {judge(n + ' bf16 vs fp32', met)}")
            if n in BF16_TORCH_GOALS:
                goal = BF16_TORCH_GOALS[n]
                met = None if ours16 is None or half is None else ours16 / half["lean"] >= goal
                verdicts.append(f"ratio >= {goal}x: {judge(n + ' bf16 vs torch bf16', met)}")
            if not bf16_torch:
                continue
            ours_cols = (f"{ours16:9.1f} {ours16 / speed[n][0]:6.2f}" if ours16 is not None
                         else f"{'-':>9} {'-':>6}")
            ratio = f"{ours16 / half['lean']:6.2f}" if ours16 is not None else f"{'-':>6}"
            print(f"{n:12} {speed[n][0]:9.1f} {ours_cols} {speed[n][1]:9.1f} {half['lean']:9.1f} "
                  f"{half['format']:>4} {half['lean'] / speed[n][1]:6.2f} {ratio}  "
                  + ("; ".join(verdicts) or "(no goal)"), flush=True)
        if bf16_torch:
            print("dtrain/s, torch/s: fp32 (part 1); bf16/s: in bf16, torch in the faster of its "
                  "memory formats (fmt); x fp32: bf16/s over the same side's fp32; ratio: dtrain "
                  "bf16 / torch bf16")

        # 2. Memory.
        mem_names = [n for n in MEMORY_MODELS if n in names]
        if mem_names or TINY_MODEL in names:
            print(f"\n2. Peak RSS, MB (whole process; each run 1 warm-up + 1 epoch of 2 iterations; "
                  f"highest of {memory_runs} runs)")
        if mem_names:
            batches = " ".join(f"{'batch ' + str(b):>9}" for b in MEMORY_BATCHES)
            print(f"{'model':12} {'side':11} {batches} {'MB/sample':>10}")
        for n in mem_names:
            m = MODELS[n]
            per_sample = {}
            for side in ("dtrain", "dtrain bf16", "torch"):
                if side == "dtrain bf16" and not bf16_dtrain:
                    continue
                peaks = []
                for b in MEMORY_BATCHES:
                    runs = []
                    for _ in range(memory_runs):
                        if side == "torch":
                            _, r = torch_run(n, b, a.threads, iterations=2, repeats=1)
                        else:
                            _, r = dtrain_run(a.build, tmp, n, m, b, a.threads, 2, 2 * b, True,
                                              precision="bf16" if side == "dtrain bf16" else "fp32")
                        runs.append(r)
                    peaks.append(max(runs))
                per_sample[side] = (peaks[-1] - peaks[0]) / (MEMORY_BATCHES[-1] - MEMORY_BATCHES[0])
                print(f"{n:12} {side:11} " + " ".join(f"{r:9.0f}" for r in peaks)
                      + f" {per_sample[side]:10.2f}", flush=True)

            def share(ours, theirs):
                return per_sample[ours] / per_sample[theirs] if per_sample[theirs] > 0 else \
                    float("inf")

            ratio = share("dtrain", "torch")
            print(f"{n:12} MB per sample of batch: dtrain {per_sample['dtrain']:.2f}, torch "
                  f"{per_sample['torch']:.2f}, {ratio:.2f}x; goal <= {MEMORY_GOAL}x: "
                  f"{judge(n + ' memory', ratio <= MEMORY_GOAL)}")
            what = n + " bf16 memory"
            if bf16_dtrain:
                ratio = share("dtrain bf16", "dtrain")
                print(f"{n:12} MB per sample of batch: dtrain bf16 "
                      f"{per_sample['dtrain bf16']:.2f}, dtrain fp32 {per_sample['dtrain']:.2f}, "
                      f"{ratio:.2f}x; goal <= "
                      f"{BF16_MEMORY_GOAL}x: {judge(what, ratio <= BF16_MEMORY_GOAL)}")
            else:
                print(f"{n:12} MB per sample of batch in bf16: goal <= {BF16_MEMORY_GOAL}x dtrain "
                      f"fp32: {judge(what, None)}")
        if TINY_MODEL in names:
            r = rss[TINY_MODEL]
            met = judge(TINY_MODEL + " RSS", r <= TINY_RSS_GOAL_MB)
            print(f"{TINY_MODEL} (dtrain, the Fashion-MNIST run of part 1): peak RSS {r:.0f} MB; "
                  f"goal <= {TINY_RSS_GOAL_MB} MB: {met}")

        # 3. GFLOP/s.
        cores = f"{a.threads} x " if a.threads > 1 else ""
        print(f"\n3. Training GFLOP/s (3 x dtrain's forward FLOPs per sample x samples/s) against "
              f"{cores}the core's peak {peak:.1f} GFLOP/s")
        peak *= a.threads
        print(f"{'model':12} {'fwd MFLOP':>10} {'train MFLOP':>11} {'dtrain GF/s':>11} "
              f"{'% peak':>7} {'torch GF/s':>10} {'% peak':>7}"
              + (f" {'dtrain bf16 GF/s':>16}" if bf16_dtrain else ""))
        for n in names:
            flops = 3 * summaries[n][1]
            ours, theirs = (flops * s / 1e9 for s in speed[n])
            half = (f" {flops * bf16_speed[n][0] / 1e9:16.1f}" if bf16_dtrain else "")
            print(f"{n:12} {summaries[n][1] / 1e6:10.2f} {flops / 1e6:11.2f} {ours:11.1f} "
                  f"{ours / peak:7.1%} {theirs:10.1f} {theirs / peak:7.1%}{half}")
        if bf16_dtrain:
            print("dtrain bf16 GF/s: for information (the fp32 FMA peak is not its ceiling)")
    failed = [what for what, ok in goals if ok is False]
    unmeasured = [what for what, ok in goals if ok is None]
    measured = len(goals) - len(unmeasured)
    print(f"\ngoals: {measured - len(failed)} of {measured} PASS"
          + (f"; FAIL: {', '.join(failed)}" if failed else "")
          + (f"; not measured: {', '.join(unmeasured)}" if unmeasured else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
