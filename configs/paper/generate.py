#!/usr/bin/env python3
"""Writes the Pipe-SGD paper's experiments (Li et al., NeurIPS 2018, §4 and Fig. 4) as dtrain
configs: every benchmark × every variant, the scaled-down runs in small/ and the headline
configs/alexnet_pipesgd.yaml. The YAML files are committed; edit this script, not them.

    python3 configs/paper/generate.py           # rewrite the files
    python3 configs/paper/generate.py --check   # exit 1 if a file is stale, missing or extra

Standard library only: the YAML is written as text in the flow style of configs/*.yaml.
"""
import pathlib
import sys
import textwrap

PAPER_DIR = pathlib.Path(__file__).resolve().parent
CONFIGS_DIR = PAPER_DIR.parent
ROOT = CONFIGS_DIR.parent
DTRAIN = "build/apps/dtrain/dtrain"
ROOT_ENV = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
# Folders of configs/paper/ that reproduce the other papers, not written by this script.
OTHER_PAPERS = {"local_sgd", "sapipe", "pipedream", "adpsgd", "hpsgd"}

# variant → (label in the paper, algorithm family, compression)
VARIANTS = {
    "dsync": ("D-Sync", "sync", "none"),
    "dsync_t": ("D-Sync+T", "sync", "truncate16"),
    "dsync_q": ("D-Sync+Q", "sync", "quantize8"),
    "ps_sync": ("PS-Sync", "ps_sync", "none"),
    "pipesgd": ("Pipe-SGD", "pipe_sgd", "none"),
    "pipesgd_t": ("PipeSGD+T", "pipe_sgd", "truncate16"),
    "pipesgd_q": ("PipeSGD+Q", "pipe_sgd", "quantize8"),
}
CODEC_TEXT = {
    "none": "uncompressed gradients",
    "truncate16": "16-bit truncation (T) of the gradients inside the ring all-reduce",
    "quantize8": "8-bit quantisation (Q) of the gradients inside the ring all-reduce",
}


def algorithm(family, warmup_epochs):
    if family == "pipe_sgd":
        # K = 2: one iteration of staleness, the paper's setting (§3.3).
        return {"name": "pipe_sgd", "K": 2, "warmup_epochs": warmup_epochs, "segments": 1}
    return {"name": family}


def describe_algorithm(family, codec, warmup_epochs):
    if family == "sync":
        what = "D-Sync (synchronous SGD, gradients summed by a ring all-reduce)"
    elif family == "ps_sync":
        what = ("PS-Sync (synchronous SGD through a parameter server; the paper used a fifth "
                "node as the server, dtrain's rank 0 serves and also computes)")
    else:
        warm = (f"D-Sync for the first {warmup_epochs} epochs as the paper's warm-up"
                if warmup_epochs else "no warm-up")
        what = f"Pipe-SGD (K = 2, one iteration of staleness; {warm})"
    return textwrap.fill(f"{what}, {CODEC_TEXT[codec]}.", width=96)


# ---- the full-size benchmarks: the paper's 4-node, 10 GbE cluster ------------------------------

IMAGENET = {"name": "imagefolder", "path": "datasets/imagenet", "batch_size": 256,
            "image_size": 224, "resize": 256, "augment": True}
CIFAR100 = {"name": "cifar100", "path": "datasets/cifar-100-binary", "batch_size": 128}

# The MLP rows use SGD without momentum, as Algorithm 1 writes the update (w <- w - lr * g[t-K]).
# Heavy-ball momentum and a one-iteration delay do not mix well: on a quadratic the largest
# stable lr * curvature falls from 3.8 (momentum 0.9, no delay) to 0.1 (momentum 0.9, delay 1),
# while without momentum it only halves (2 -> 1). With lr 0.05 and momentum 0.9
# (configs/fashion_mlp_sync.yaml) Pipe-SGD ends 5 epochs 1.4 points below D-Sync; with plain
# SGD at lr 0.2 both reach about 88.5 % and stay within 0.5 points.
PLAIN_SGD_MLP = {"name": "sgd", "lr": 0.2, "momentum": 0.0, "weight_decay": 0.0001,
                 "schedule": {"name": "cosine"}}

BENCHMARKS = {
    "mnist_mlp": dict(
        title="MNIST-MLP",
        about=("The 3-layer perceptron 784-500-500-10 on MNIST, global batch 100 (25 per rank).\n"
               "Data: MNIST is not packaged by Debian; put the four idx files in datasets/mnist\n"
               "(datasets/README.md). configs/paper/small/fashion_mlp_*.yaml run the same model\n"
               "on Fashion-MNIST."),
        model={"name": "mlp", "hidden": [500, 500]},
        dataset={"name": "mnist", "path": "datasets/mnist", "batch_size": 100},
        threads=1,
        optimizer=PLAIN_SGD_MLP,
        train={"epochs": 20, "eval_every_epochs": 1},
        warmup=0,
    ),
    "cifar100_cnn": dict(
        title="CIFAR100-CNN",
        about=("The AlexNet-style CIFAR network (3 conv + 2 FC, cuda-convnet / Caffe cifar10_quick)\n"
               "on CIFAR-100, global batch 128 (32 per rank; the paper does not give it); the recipe\n"
               "of configs/cifar100_cnn_sync.yaml.\n"
               "Data: the CIFAR-100 binary version in datasets/cifar-100-binary (datasets/README.md)."),
        model={"name": "cifar_cnn"},
        dataset=dict(CIFAR100, augment=True),
        threads=2,
        optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0005,
                   "schedule": {"name": "step", "every_epochs": 30, "gamma": 0.1}},
        train={"epochs": 90, "eval_every_epochs": 5},
        warmup=0,
    ),
    "cifar100_convex": dict(
        title="CIFAR100-Convex",
        about=("The CIFAR100-CNN made convex: conv1-3 and ip1 stay at their initial values\n"
               "(optimizer.freeze_layers: 4) and only the last fully connected layer ip2 (64 -> 100)\n"
               "trains, a multinomial logistic regression on fixed random features. PyTorch\n"
               "initialisation (model.init: pytorch) keeps those features at a usable scale; with\n"
               "Caffe's Gaussians (sigma 1e-4 on conv1) they would be ~1e-4 and ip2 would barely\n"
               "move. No augmentation, so the objective is one fixed convex function. Global\n"
               "batch 128 (the paper does not give it; cuda-convnet's 128).\n"
               "Data: the CIFAR-100 binary version in datasets/cifar-100-binary (datasets/README.md)."),
        model={"name": "cifar_cnn", "init": "pytorch"},
        dataset=dict(CIFAR100, augment=False),
        threads=2,
        optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0005,
                   "freeze_layers": 4,
                   "schedule": {"name": "step", "every_epochs": 10, "gamma": 0.1}},
        train={"epochs": 30, "eval_every_epochs": 1},
        warmup=0,
    ),
    "alexnet": dict(
        title="AlexNet",
        about=("AlexNet (Krizhevsky et al. 2012, with its local response normalisation) on ImageNet,\n"
               "global batch 256 (64 per rank), 224x224 crops of images resized to 256; the\n"
               "classic recipe: lr 0.01, momentum 0.9, weight decay 5e-4, /10 every 30 epochs, 90 epochs.\n"
               "Data: ILSVRC-2012 in the imagefolder layout at datasets/imagenet (datasets/README.md)."),
        model={"name": "alexnet", "lrn": True},
        dataset=IMAGENET,
        threads=8,
        optimizer={"name": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 0.0005,
                   "schedule": {"name": "step", "every_epochs": 30, "gamma": 0.1}},
        train={"epochs": 90, "eval_every_epochs": 1},
        warmup=4,
    ),
    "resnet18": dict(
        title="ResNet18",
        about=("ResNet-18 (He et al. 2016) on ImageNet, global batch 256 (64 per rank), 224x224\n"
               "crops of images resized to 256; the standard recipe: lr 0.1, momentum 0.9, weight\n"
               "decay 1e-4, /10 at epochs 30, 60 and 80, 90 epochs.\n"
               "Data: ILSVRC-2012 in the imagefolder layout at datasets/imagenet (datasets/README.md)."),
        model={"name": "resnet18"},
        dataset=IMAGENET,
        threads=8,
        optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0001,
                   "schedule": {"name": "multistep", "milestones": [30, 60, 80], "gamma": 0.1}},
        train={"epochs": 90, "eval_every_epochs": 1},
        warmup=4,
    ),
}

# ---- the scaled-down runs: 2 ranks on one 2-core machine, emulated 1 Gbit/s link ---------------

LINK_1G = {"bandwidth": "1Gbps", "latency": "50us"}
SMALL_CLUSTER = {"threads_per_rank": 1, "link": LINK_1G}
SMALL_CLUSTER_NO_LINK = {"threads_per_rank": 1}
SMALL_FASHION_MLP = dict(
    model={"name": "mlp", "hidden": [500, 500]},
    dataset={"name": "fashion_mnist", "path": "/usr/share/datasets/fashion-mnist",
             "batch_size": 100},
    optimizer=PLAIN_SGD_MLP,
    train={"epochs": 5, "eval_every_epochs": 1},
)
# The CIFAR100-CNN itself (100 classes: 151,428 parameters) on configs/synthetic_cifar_cnn_sync.yaml's
# data, twice the samples and PyTorch initialisation so that it learns within the run (Caffe's
# Gaussians stay at chance for many epochs on this data). lr 0.01: with momentum 0.9, Pipe-SGD's
# stale gradients make the loss diverge at 0.05 and oscillate at 0.02 on this data; D-Sync's do not.
SMALL_SYNTHETIC_CNN = dict(
    model={"name": "cifar_cnn", "init": "pytorch"},
    dataset={"name": "synthetic", "shape": [3, 32, 32], "classes": 100, "train_size": 5120,
             "test_size": 512, "batch_size": 128},
    optimizer={"name": "sgd", "lr": 0.01, "momentum": 0.9},
    train={"epochs": 10, "eval_every_epochs": 1},
)
SMALL_LENET = dict(
    model={"name": "lenet"},
    dataset={"name": "fashion_mnist", "path": "/usr/share/datasets/fashion-mnist",
             "batch_size": 100},
    optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0005,
               "schedule": {"name": "cosine"}},
    train={"epochs": 5, "eval_every_epochs": 1},
)


# ---- YAML text -----------------------------------------------------------------------------------

def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    assert isinstance(v, str) and v and not any(c in v for c in ",:{}[]#"), v
    return v


def flow(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


def section(key, value, width=100):
    """`key: {flow map}` aligned as in configs/*.yaml, wrapped after a comma when too long."""
    head = f"{key}:".ljust(13)
    text = flow(value)
    lines, line = [], head
    for piece in split_top_commas(text):
        if len(line) + len(piece) > width and line.strip() != f"{key}:":
            lines.append(line.rstrip())
            line = " " * (len(head) + 1) + piece.lstrip()  # under the text after "{"
        else:
            line += piece
    lines.append(line)
    return "\n".join(lines)


def split_top_commas(text):
    """Splits a flow map after each comma of its outermost level, keeping the commas."""
    pieces, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "{[" and 1 or c in "}]" and -1 or 0
        if c == "," and depth == 1:
            pieces.append(text[start:i + 1])
            start = i + 1
    pieces.append(text[start:])
    return pieces


def config_text(header, name, model, dataset, cluster, algo, codec, optimizer, train):
    body = [
        f"name: {name}",
        "seed: 1",
        section("model", model),
        section("dataset", dataset),
        section("cluster", cluster),
        section("algorithm", algo),
        section("compression", {"name": codec}),
        section("optimizer", optimizer),
        section("train", train),
        section("output", {"dir": f"runs/{name}"}),
    ]
    comments = "\n".join(("# " + line).rstrip() for line in header.strip("\n").split("\n"))
    return comments + "\n" + "\n".join(body) + "\n"


GENERATED = "Generated by configs/paper/generate.py: edit that script, not this file."


def full_size(bench_key, variant, name=None, path=None):
    b = BENCHMARKS[bench_key]
    label, family, codec = VARIANTS[variant]
    name = name or f"paper_{bench_key}_{variant}"
    path = path or f"configs/paper/{bench_key}_{variant}.yaml"
    note = (" (uncompressed: the baseline of PipeSGD+T/Q; §4 quotes it against D-Sync for "
            "CIFAR100-Convex)" if variant == "pipesgd" else "")
    title = textwrap.fill(f"Pipe-SGD paper (Li et al., NeurIPS 2018) §4, Fig. 4, {b['title']} row: "
                          f"{label}{note}.", width=96)
    header = f"""
{title}
{describe_algorithm(family, codec, b['warmup'])}
{b['about']}
Paper's setup: 4 nodes (one rank each), 10 Gb Ethernet, same iterations for every variant.
Run it on a 4-node cluster:
  mpirun -np 4 {DTRAIN} --config {path}
No network emulation here: a real cluster runs at its own speed. To emulate the paper's
10 GbE on a faster network, or on one machine, add
  --set cluster.link.bandwidth=10Gbps --set cluster.link.latency=20us
{GENERATED}
"""
    cluster = {"device": "auto", "threads_per_rank": b["threads"]}
    text = config_text(header, name, b["model"], b["dataset"], cluster,
                       algorithm(family, b["warmup"]), codec, b["optimizer"], b["train"])
    return path, text


def small_run_line(path):
    return (f"  mpirun -np 2 --oversubscribe {DTRAIN} --config {path}\n"
            f"(as root prefix {ROOT_ENV})")


def small_fashion_mlp(variant):
    label, family, codec = VARIANTS[variant]
    name = f"paper_small_fashion_mlp_{variant}"
    path = f"configs/paper/small/fashion_mlp_{variant}.yaml"
    header = f"""
Scaled-down Pipe-SGD experiment (configs/paper/README.md): the MNIST-MLP row of Fig. 4,
{label}, on one 2-core machine.
{describe_algorithm(family, codec, 0)}
MLP 784-500-500-10 on Fashion-MNIST (Debian's dataset-fashion-mnist), global batch 100 (50 per
rank), 2 ranks with one thread each and every message paced to an emulated 1 Gbit/s, 50 us link,
so that communication dominates as on the paper's 10 GbE cluster with GPUs. A few minutes at most:
{small_run_line(path)}
{GENERATED}
"""
    s = SMALL_FASHION_MLP
    return path, config_text(header, name, s["model"], s["dataset"], SMALL_CLUSTER,
                             algorithm(family, 0), codec, s["optimizer"], s["train"])


def small_synthetic_cnn(variant):
    label, family, codec = VARIANTS[variant]
    name = f"paper_small_synthetic_cnn_{variant}"
    path = f"configs/paper/small/synthetic_cnn_{variant}.yaml"
    header = f"""
Scaled-down Pipe-SGD experiment (configs/paper/README.md): the CIFAR100-CNN of Fig. 4, {label},
on synthetic 3x32x32 data (100 classes, no files needed) on one 2-core machine.
{describe_algorithm(family, codec, 0)}
The CNN's 151k parameters are small next to its compute, so even at an emulated 1 Gbit/s,
50 us link this run is compute-bound: the regime where PipeSGD+Q hides what is left of the
communication (compare wait_s in timing.csv with synthetic_cnn_{"pipesgd_q" if variant == "dsync" else "dsync"}.yaml). PyTorch
initialisation and 5120 samples so that it learns within the 10 epochs. Global batch 128 (64
per rank), 2 ranks with one thread each. About half a minute:
{small_run_line(path)}
{GENERATED}
"""
    s = SMALL_SYNTHETIC_CNN
    return path, config_text(header, name, s["model"], s["dataset"], SMALL_CLUSTER,
                             algorithm(family, 0), codec, s["optimizer"], s["train"])


def small_lenet_warmup(warmup_epochs):
    name = f"paper_small_lenet_pipesgd_warmup{warmup_epochs}"
    path = f"configs/paper/small/lenet_pipesgd_warmup{warmup_epochs}.yaml"
    other = 1 - warmup_epochs
    header = f"""
Scaled-down Pipe-SGD experiment (configs/paper/README.md): the effect of the warm-up that §4
uses for AlexNet and ResNet ("we don't turn on the pipelined training until the 5-th epoch").
Pipe-SGD (K = 2) {"with 1 epoch of D-Sync first" if warmup_epochs else "from the first iteration"}; compare with
lenet_pipesgd_warmup{other}.yaml (test_acc in accuracy.csv after epoch 1 and at the end).
LeNet-5 on Fashion-MNIST, global batch 100 (50 per rank), 2 ranks with one thread each,
uncompressed gradients, no network emulation: accuracy, not time, is the point. Seconds:
{small_run_line(path)}
{GENERATED}
"""
    s = SMALL_LENET
    return path, config_text(header, name, s["model"], s["dataset"], SMALL_CLUSTER_NO_LINK,
                             algorithm("pipe_sgd", warmup_epochs), "none", s["optimizer"],
                             s["train"])


def headline():
    path, text = full_size("alexnet", "pipesgd_q", name="alexnet_pipesgd",
                           path="configs/alexnet_pipesgd.yaml")
    intro = ("# The headline experiment: AlexNet on ImageNet with Pipe-SGD and 8-bit quantisation,\n"
             "# the Pipe-SGD paper's best AlexNet setting (same as configs/paper/alexnet_pipesgd_q.yaml;\n"
             "# the other variants and the scaled-down runs are in configs/paper/).\n")
    return path, intro + text


def all_configs():
    out = [full_size(b, v) for b in BENCHMARKS for v in VARIANTS]
    out += [small_fashion_mlp(v) for v in VARIANTS]
    out += [small_synthetic_cnn(v) for v in ("dsync", "pipesgd_q")]
    out += [small_lenet_warmup(w) for w in (0, 1)]
    out.append(headline())
    return out


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__.strip())
        return 2
    configs = all_configs()
    names = [p for p, _ in configs]
    assert len(set(names)) == len(names)
    stale = []
    for rel, text in configs:
        path = ROOT / rel
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    owned = {ROOT / p for p in names}
    # configs/paper/<algorithm>/ of the other papers' algorithms are written by hand.
    extra = sorted(str(p.relative_to(ROOT)) for p in PAPER_DIR.rglob("*.yaml")
                   if p not in owned and p.relative_to(PAPER_DIR).parts[0] not in OTHER_PAPERS)
    if check:
        for rel in stale:
            print(f"stale or missing: {rel}")
        for rel in extra:
            print(f"not generated by configs/paper/generate.py: {rel}")
        if stale or extra:
            print("run: python3 configs/paper/generate.py")
            return 1
        print(f"{len(configs)} configs up to date")
        return 0
    for rel in extra:
        print(f"warning: {rel} is not generated by this script")
    print(f"wrote {len(configs)} configs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
