#!/usr/bin/python3
"""The communication core against its peers, each ratio measured in one run.

1. Ring all-reduce (no codec) vs MPI_Allreduce: busbw at 16 MiB on 2 and 4 ranks (goal >= 0.9x).
2. Fashion-MNIST MLP, global batch 100, 2 ranks x 1 thread, same optimizer and cosine schedule:
   dtrain `sync` vs PyTorch DDP (gloo), samples/s (goal >= 3x) and test accuracy after the same
   epochs.
3. Same MLP under an emulated 1 Gbit/s link: `sync` + quantize8 vs `sync` + none (goal >= 2.5x).
PyTorch's OpenBLAS runs as a user of this CPU would run it (bench/openblas_core.py: the core type
for the CPU's vector extension, one thread per rank as torchrun gives each worker, unless set
already); the output's `Core:` is what OpenBLAS reports on rank 0.

    /usr/bin/python3 bench/comm_vs_peers.py [--build build] [--iterations 300] [--epochs 2]
Needs scripts/setup.sh --bench and a release build.
"""
import argparse, csv, json, os, subprocess, sys, tempfile, time

import openblas_core  # PyTorch's BLAS as a user would run it (beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPIRUN = ["mpirun", "--oversubscribe", "-np"]


def busbw_ratio(dtrain, ranks):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.csv")
        subprocess.run(MPIRUN + [str(ranks), dtrain, "bench", "comm", "--min-bytes", "16M",
                                 "--max-bytes", "16M", "--codecs", "none", "--csv", out],
                       check=True, env=ENV, stdout=subprocess.DEVNULL)
        rows = {r["impl"]: float(r["busbw_GBps"]) for r in csv.DictReader(open(out))}
    return rows["ring"], rows["mpi"]


def dtrain_rate(dtrain, iterations, *sets):
    """samples/s of rank 0 and the final test accuracy; iterations = 0 trains whole epochs."""
    with tempfile.TemporaryDirectory() as d:
        cmd = MPIRUN + ["2", dtrain, "--config", os.path.join(ROOT, "configs", "fashion_mlp_sync.yaml"),
                        "--out", d, "--set", f"train.max_iterations={iterations}",
                        "--set", "cluster.device=cpu"]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
        rows = [r for r in csv.DictReader(open(os.path.join(d, "timing.csv"))) if r["rank"] == "0"]
        acc = list(csv.DictReader(open(os.path.join(d, "accuracy.csv"))))[-1]["test_acc"]
    samples = sum(int(r["iterations"]) for r in rows) * 100
    return samples / sum(float(r["wall_s"]) for r in rows), float(acc)


DDP = r'''
import os, sys, time, gzip, struct, json, numpy as np, torch, torch.nn as nn, torch.distributed as dist
rank, epochs = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(sys.argv[1])
sys.path.insert(0, sys.argv[2])  # bench/: openblas_core
import openblas_core
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank, world_size=2)
raw = gzip.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").read()
x = (torch.from_numpy(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 784).astype(np.float32)) / 255 - 0.286) / 0.353
y = torch.from_numpy(np.frombuffer(gzip.open("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz").read(), np.uint8, offset=8).astype(np.int64))
torch.manual_seed(1)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 500), nn.ReLU(), nn.Linear(500, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
loss_fn = nn.CrossEntropyLoss()
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * 600)  # as the dtrain config
start = time.perf_counter()
for epoch in range(epochs):
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
    for i in range(600):
        idx = perm[i * 100:(i + 1) * 100][rank * 50:(rank + 1) * 50]
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
        sched.step()
rate = epochs * 60000 / (time.perf_counter() - start)
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
tx = (torch.from_numpy(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 784).astype(np.float32)) / 255 - 0.286) / 0.353
ty = torch.from_numpy(np.frombuffer(gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8).astype(np.int64))
with torch.no_grad():
    acc = (model(tx).argmax(1) == ty).float().mean().item()
if rank == 0: print(rate, acc, json.dumps(openblas_core.loaded()))
'''


def ddp_rate_and_accuracy(epochs, env):
    """samples/s, test accuracy and rank 0's OpenBLAS (openblas_core.loaded) of the DDP run."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(DDP)
    try:
        exports = [a for v in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS") if v in env
                   for a in ("-x", v)]
        out = subprocess.run(MPIRUN + ["2"] + exports + ["/usr/bin/python3", f.name, str(epochs),
                                                         os.path.dirname(os.path.abspath(__file__))],
                             check=True, env=env, capture_output=True, text=True).stdout
        rate, acc, blas = out.strip().splitlines()[-1].split(maxsplit=2)
        return float(rate), float(acc), json.loads(blas)
    finally:
        os.unlink(f.name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iterations", type=int, default=300, help="iterations of the link runs x3")
    p.add_argument("--epochs", type=int, default=2, help="epochs of the DDP comparison")
    a = p.parse_args()
    dtrain = os.path.join(a.build, "apps", "dtrain", "dtrain")
    for ranks in (2, 4):
        ring, mpi = busbw_ratio(dtrain, ranks)
        print(f"busbw 16 MiB, {ranks} ranks: ring {ring:.3f} GB/s, MPI_Allreduce {mpi:.3f} GB/s, "
              f"ratio {ring / mpi:.2f} (goal >= 0.9: {'met' if ring / mpi >= 0.9 else 'NOT met'})")
    ours, our_acc = dtrain_rate(dtrain, 0, f"train.epochs={a.epochs}", "train.eval_every_epochs=100")
    peer_env = dict(ENV)
    setting = openblas_core.peer_env(peer_env, 1)
    ddp, ddp_acc, blas = ddp_rate_and_accuracy(a.epochs, peer_env)
    print(f"PyTorch DDP's OpenBLAS {openblas_core.describe(blas)}; {setting}")
    print(f"MLP 2 ranks x 1 thread, {a.epochs} epochs: dtrain sync {ours:.0f} samples/s (test acc "
          f"{our_acc:.4f}), PyTorch DDP (gloo) {ddp:.0f} samples/s (test acc {ddp_acc:.4f}), ratio "
          f"{ours / ddp:.2f} (goal >= 3: {'met' if ours / ddp >= 3 else 'NOT met'}; accuracy "
          f"difference {abs(our_acc - ddp_acc) * 100:.2f} pp)")
    link = ["cluster.link.bandwidth=1Gbps", "cluster.link.latency=50us"]
    n = max(50, a.iterations // 3)
    plain, _ = dtrain_rate(dtrain, n, *link, "compression.name=none")
    q8, _ = dtrain_rate(dtrain, n, *link, "compression.name=quantize8")
    print(f"MLP 2 ranks, 1 Gbit/s link: sync+quantize8 {q8:.0f} samples/s, sync+none {plain:.0f}, "
          f"ratio {q8 / plain:.2f} (goal >= 2.5: {'met' if q8 / plain >= 2.5 else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
