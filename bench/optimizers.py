#!/usr/bin/python3
"""dtrain's optimizers against their peers: Lion's validation loss against AdamW's on the baby GPT,
each against PyTorch's, and every optimizer's step against PyTorch's on the same parameters.

 1. Quality (Lion's goal): dtrain trains configs/gpt_kjv.yaml (AdamW, lr 1e-3 -> 1e-4, weight
    decay 0.1) and configs/gpt_kjv_lion.yaml (Lion, weight decay 1.0) for 2000 iterations each,
    same seed, model, data and schedule otherwise; the validation loss at the end
    (accuracy.csv's last test_loss). Goal: Lion within 0.05 of AdamW at lr 1e-4 -> 1e-5 (10x
    smaller than AdamW's, the far end of the paper's advice of a 3-10x smaller lr); Lion runs
    there and, where it differs, at the config's lr (3e-4 -> 3e-5, the near end), each with its
    verdict. The peer: PyTorch trains bench/torch_gpt.py's GPT with the same settings
    (lm_vs_pytorch.py's worker, one thread: torch.optim.AdamW, and torch_gpt.Lion written from
    the paper's code, as PyTorch has no Lion), so that a gap is seen to be the optimizer's
    setting and not dtrain's. Also printed: each optimizer's state in bytes (what the
    checkpoint holds under optimizer.*): Lion's one moment is half AdamW's two.
 2. Step speed: the optimizer's update per iteration, one thread each side, on the baby GPT's
    parameters. dtrain: timing.csv's update_s over its iterations, a run of 300 iterations on one
    rank (the update phase is the gradient clip and the optimizer's pass). PyTorch, as a user
    writes it: torch.nn.utils.clip_grad_norm_ then optimizer.step() on bench/torch_gpt.py's GPT
    of the same shapes: torch.optim.SGD (momentum 0.9), torch.optim.AdamW (its default, foreach
    implementation) and torch_gpt.Lion (foreach ops). Ratio = dtrain / PyTorch seconds per step.

    /usr/bin/python3 bench/optimizers.py [--build build] [--quick] [--parts quality,speed]
        [--no-peer]   (no PyTorch quality runs)
        [--lion-lr LR]   (one more Lion run at this peak lr, its minimum a tenth of it)
"""
import argparse, csv, os, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtrain_runs import ENV, ROOT, binary, sets, verdict  # noqa: E402
import lm_vs_pytorch as lm  # noqa: E402  the baby GPT's PyTorch worker (torch_run), its models
import openblas_core  # noqa: E402

CORPUS = os.path.join(ROOT, "datasets", "kjv", "kjv.txt")
ADAMW = os.path.join(ROOT, "configs", "gpt_kjv.yaml")
LION = os.path.join(ROOT, "configs", "gpt_kjv_lion.yaml")
# Lion's peak lr of the goal (a tenth of AdamW's: the paper's advice of a 3-10x smaller lr).
GOAL_LION_LR = 1e-4
# The optimizer settings of the speed part (the steps' cost does not depend on the lr).
SPEED = {"sgd": ["optimizer={name: sgd, lr: 1.0e-3, momentum: 0.9, clip_grad_norm: 1.0}"],
         "adamw": [], "lion": []}


def dtrain_run(build, config, out, overrides):
    subprocess.run([binary(build), "--config", config, "--out", out, "--progress", "none"] +
                   sets(overrides), check=True, env=ENV, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def final_loss(out):
    rows = list(csv.DictReader(open(os.path.join(out, "accuracy.csv"))))
    return float(rows[-1]["test_loss"]), int(rows[-1]["iteration"])


def state_bytes(build, config, out):
    """Bytes of the optimizer's state in a checkpoint (its optimizer.* entries), after two
    iterations with a checkpoint after each."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "app"))
    import checkpoint_tool  # the checkpoint reader the tests use
    dtrain_run(build, config, out, ["train.max_iterations=2", "train.eval_every_iterations=0",
                                    "checkpoint={every_iterations: 1}"])
    newest = checkpoint_tool.checkpoints(out)[-1]
    total = 0
    for f in os.listdir(newest):
        if f.startswith("rank-") and f.endswith(".bin"):
            for name, _, _, payload in checkpoint_tool.entries(os.path.join(newest, f)):
                if name.startswith("optimizer."):
                    total += len(payload)
    return total


def dtrain_step_seconds(build, name, iterations, tmp):
    """Seconds of the update phase per iteration, one thread, the last epoch part of a run."""
    config = LION if name == "lion" else ADAMW
    out = os.path.join(tmp, f"speed-{name}")
    dtrain_run(build, config, out, SPEED[name] + [
        f"train.max_iterations={iterations}", "train.eval_every_iterations=0",
        "cluster.threads_per_rank=1", "cluster.device=cpu"])
    rows = list(csv.DictReader(open(os.path.join(out, "timing.csv"))))
    return sum(float(r["update_s"]) for r in rows) / sum(int(r["iterations"]) for r in rows)


def torch_step_seconds(name, iterations):
    """Seconds per clip + optimizer.step() in PyTorch on the baby GPT's parameters."""
    import torch
    import torch_gpt
    torch.set_num_threads(1)
    torch.manual_seed(1)
    vocab = len(sorted(set(open(CORPUS, encoding="utf-8").read())))
    model = torch_gpt.GPT(vocab=vocab, block=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
                          bias=True)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-2
    if name == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
        step = opt.step
    elif name == "adamw":
        opt = torch_gpt.adamw(model, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
        step = opt.step
    else:
        opt = torch_gpt.lion(model, lr=1e-4, betas=(0.9, 0.99), weight_decay=1.0)
        step = opt.step
    times = []
    for i in range(iterations + 10):
        start = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        step()
        if i >= 10:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def optimizer_of(config):
    """The `optimizer:` map of a config file, and the baby GPT's model for the PyTorch peer with
    its lr schedule (lm_vs_pytorch.MODELS["baby"] with the config's lr, min_lr and warm-up)."""
    import yaml
    with open(config) as f:
        opt = yaml.safe_load(f)["optimizer"]
    m = dict(lm.MODELS["baby"], lr=opt["lr"], min_lr=opt["schedule"]["min_lr"],
             warmup_lr=opt["schedule"]["warmup_iterations"])
    return opt, m


def quality(args, tmp):
    """Validation loss at the end, dtrain and PyTorch: AdamW, Lion at the goal's lr and at the
    config's (where it differs); the goal; the optimizers' state."""
    lion_config_lr = optimizer_of(LION)[0]["lr"]
    runs = [("adamw", ADAMW, None), ("lion", LION, GOAL_LION_LR)]
    for lr in (lion_config_lr, args.lion_lr):
        if lr and all(lr != r[2] for r in runs[1:]):
            runs.append(("lion", LION, lr))
    results = []
    for name, config, lr in runs:
        opt, m = optimizer_of(config)
        sets_ = []
        if lr:  # the minimum a tenth of the peak, as in the config
            m.update(lr=lr, min_lr=lr / 10)
            sets_ = [f"optimizer.lr={lr}", f"optimizer.schedule.min_lr={lr / 10}"]
        out = os.path.join(tmp, f"quality-{name}-{m['lr']:g}")
        start = time.time()
        dtrain_run(args.build, config, out, [f"train.max_iterations={args.iterations}"] + sets_)
        ours, it = final_loss(out)
        ours_s = time.time() - start
        theirs = None
        if not args.no_peer:
            spec = dict(corpus=CORPUS, model=m, seed=1, batch=m["batch"],
                        iterations=args.iterations, untimed=0, eval_at=[args.iterations])
            if name == "lion":  # AdamW's betas, eps and decay: lm_vs_pytorch.ADAMW, as gpt_kjv's
                spec["lion"] = dict(betas=opt["betas"], weight_decay=opt["weight_decay"])
            theirs = lm.torch_run(f"{name} quality", **spec)[0]["evals"][-1][1]
        results.append((name, m["lr"], ours, theirs))
        peer = f", PyTorch {theirs:.4f} (dtrain - PyTorch {ours - theirs:+.4f})" if theirs else ""
        print(f"{name:6} lr {m['lr']:g} -> {m['min_lr']:g}: validation loss at iteration {it}: "
              f"dtrain {ours:.4f} ({ours_s:.0f} s){peer}", flush=True)
    _, _, adamw, adamw_peer = results[0]
    for _, lr, ours, theirs in results[1:]:
        gap = ours - adamw
        what = ("the goal's lr" if lr == GOAL_LION_LR else "") + \
               (" and " if lr == GOAL_LION_LR and lr == lion_config_lr else "") + \
               ("the config's lr" if lr == lion_config_lr else "") or "--lion-lr"
        goal = "" if args.quick else f": {verdict(gap <= 0.05)}"
        peer = f"; PyTorch {theirs - adamw_peer:+.4f}" if theirs else ""
        print(f"Lion (lr {lr:g}, {what}) - AdamW validation loss: dtrain {gap:+.4f} "
              f"(goal <= 0.05{goal}){peer}")
    state = {name: state_bytes(args.build, config, os.path.join(tmp, f"state-{name}"))
             for name, config in (("adamw", ADAMW), ("lion", LION))}
    ratio = state["lion"] / max(state["adamw"], 1)  # AdamW also counts its steps (8 bytes)
    print(f"optimizer state: AdamW {state['adamw']} bytes, Lion {state['lion']} bytes "
          f"(Lion / AdamW = {ratio:.3f}; goal 0.5, one moment of two: {verdict(ratio < 0.501)})")


def speed(args, tmp):
    """The step's seconds, dtrain and PyTorch (its OpenBLAS set as a user would: openblas_core)."""
    env = dict(os.environ)
    setting = openblas_core.peer_env(env, 1)
    print(f"step (clip + update), one thread, baby GPT parameters: dtrain / PyTorch ({setting})")
    for name in SPEED:
        ours = dtrain_step_seconds(args.build, name, 300, tmp)
        theirs = float(subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--torch-step", name], env=env,
            check=True, capture_output=True, text=True).stdout.strip())
        print(f"  {name:6} dtrain {ours * 1e3:.3f} ms, PyTorch {theirs * 1e3:.3f} ms, "
              f"ratio {ours / theirs:.2f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--parts", default="quality,speed")
    p.add_argument("--iterations", type=int, default=2000, help="of the quality runs")
    p.add_argument("--quick", action="store_true", help="200 quality iterations (no verdict)")
    p.add_argument("--no-peer", action="store_true", help="no PyTorch quality runs")
    p.add_argument("--lion-lr", type=float, help="one more Lion run at this peak lr")
    p.add_argument("--torch-step", metavar="NAME", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_step:  # a process of its own: its OpenBLAS environment is set before torch loads
        print(torch_step_seconds(args.torch_step, 200))
        return 0
    if args.quick:
        args.iterations = 200
    parts = args.parts.split(",")
    tmp = tempfile.mkdtemp(prefix="optimizers-")
    print(f"# bench/optimizers.py: {os.uname().machine}, build {args.build}, out {tmp}; load "
          f"average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if "quality" in parts:
        quality(args, tmp)
    if "speed" in parts:
        speed(args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
