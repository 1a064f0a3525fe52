#!/usr/bin/python3
"""dtrain's CPU engine against PyTorch, in one run, on Fashion-MNIST, single thread.

For MNIST-MLP (batch 100) and LeNet (batch 64) it trains the same architecture with the same
optimizer and batch in dtrain and in PyTorch (Debian python3-torch; BLAS = OpenBLAS) and prints
samples/s and the ratio. PyTorch is measured two ways: a lean loop over pre-loaded tensors
(the fastest idiomatic peer: no DataLoader) and the usual DataLoader loop. It also prints the
MLP's samples/s as a fraction of the GEMM-only bound (bench/gemm_bound.cpp).

    /usr/bin/python3 bench/engine_vs_pytorch.py   (Debian's python, which has python3-torch) [--build build] [--epochs 2] [--threads 1]
Needs: scripts/setup.sh --bench, and a release build.
"""
import argparse, csv, gzip, os, struct, subprocess, sys, tempfile, time

import numpy as np
import torch
import torch.nn as nn

import torch_models as torch_models_lib  # dtrain's zoo models in PyTorch (beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # dtrain's Fashion-MNIST normalisation


def load_idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, 1, rows, cols)
    return np.frombuffer(raw, np.uint8, offset=8)


def torch_models():
    # dtrain's zoo mlp and lenet (bench/torch_models.py), with out-of-place ReLUs.
    return {"mlp": lambda: torch_models_lib.mlp(inplace=False),
            "lenet": lambda: torch_models_lib.lenet(inplace=False)}


def torch_samples_per_s(make_model, x, y, batch, epochs, lr, use_loader):
    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    n = (len(x) // batch) * batch
    best = 0.0
    for epoch in range(epochs):
        if use_loader:
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                                 batch_size=batch, shuffle=True, drop_last=True)
            batches = iter(loader)
        else:
            perm = torch.randperm(len(x))[:n].view(-1, batch)
            batches = ((x[idx], y[idx]) for idx in perm)
        start = time.perf_counter()
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
        best = max(best, n / (time.perf_counter() - start))
    return best


def dtrain_samples_per_s(build, config, batch, epochs, threads):
    dtrain = os.path.join(build, "apps", "dtrain", "dtrain")
    with tempfile.TemporaryDirectory() as out:
        cmd = [dtrain, "--config", os.path.join(ROOT, "configs", config), "--out", out,
               "--set", f"train.epochs={epochs}", "--set", f"train.eval_every_epochs={epochs}",
               "--set", f"dataset.batch_size={batch}",
               "--set", f"cluster.threads_per_rank={threads}", "--set", "cluster.device=cpu"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "timing.csv")) as f:
            rows = list(csv.DictReader(f))
    # Best epoch, as for PyTorch: the machines are shared and noisy.
    return max(int(r["iterations"]) * batch / float(r["wall_s"]) for r in rows)


def gemm_bound(build, threads):
    exe = os.path.join(build, "bench", "dtrain_gemm_bound")
    out = subprocess.run([exe, "--batch", "100", "--layers", "784,500,500,10", "--threads",
                          str(threads), "--seconds", "3"], check=True, capture_output=True,
                         text=True).stdout
    print("  " + out.strip())
    return float(out.split("samples_per_s=")[1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x = (torch.from_numpy(load_idx("train-images-idx3-ubyte.gz").astype(np.float32)) / 255 - MEAN) / STD
    y = torch.from_numpy(load_idx("train-labels-idx1-ubyte.gz").astype(np.int64))
    models = torch_models()
    goals = {"mlp": 1.5, "lenet": 2.0}
    print(f"torch {torch.__version__}, {a.threads} thread(s), Fashion-MNIST, best of {a.epochs} epochs")
    print(f"{'model':6} {'batch':>5} {'dtrain/s':>10} {'torch/s':>10} {'ratio':>6} "
          f"{'torch+DL/s':>10} {'ratio':>6}  goal")
    results, peers = {}, {}
    for name, config, batch in (("mlp", "fashion_mlp_sync.yaml", 100),
                                ("lenet", "fashion_lenet_sync.yaml", 64)):
        ours = dtrain_samples_per_s(a.build, config, batch, a.epochs, a.threads)
        lean = torch_samples_per_s(models[name], x, y, batch, a.epochs, 0.05, False)
        dl = torch_samples_per_s(models[name], x, y, batch, a.epochs, 0.05, True)
        results[name] = ours
        peers[name] = lean
        verdict = "met" if ours / lean >= goals[name] else "NOT met"
        print(f"{name:6} {batch:5d} {ours:10.0f} {lean:10.0f} {ours / lean:6.2f} {dl:10.0f} "
              f"{ours / dl:6.2f}  >= {goals[name]}x lean torch: {verdict}")
    bound = gemm_bound(a.build, a.threads)
    frac = results["mlp"] / bound
    print(f"mlp at {frac:.0%} of the GEMM-only bound ({results['mlp']:.0f} / {bound:.0f} samples/s); "
          f"goal >= 75%: {'met' if frac >= 0.75 else 'NOT met'}")
    # The ceiling any fp32 engine built on these GEMMs has against this peer.
    print(f"the GEMM-only bound itself is {bound / peers['mlp']:.2f}x lean torch on the mlp")


if __name__ == "__main__":
    sys.exit(main())
