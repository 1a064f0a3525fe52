"""Helpers the goal scripts share: running dtrain under mpirun and `dtrain plan`, YAML values."""
import csv, os, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def binary(build):
    """The dtrain binary of a build folder (or the folder holding it)."""
    direct = os.path.join(build, "dtrain")
    return direct if os.path.exists(direct) else os.path.join(build, "apps", "dtrain", "dtrain")


def sets(pairs):
    """--set arguments for KEY=VALUE items."""
    out = []
    for p in pairs:
        out += ["--set", p]
    return out


def plan(dtrain, config, overrides, ranks=2):
    """`dtrain plan`'s predicted iteration seconds by (algorithm, compression)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "plan.csv")
        subprocess.run([dtrain, "plan", "--config", config, "--ranks", str(ranks), "--csv", out] +
                       sets(overrides), check=True, env=ENV, stdout=subprocess.DEVNULL)
        return {(r["algorithm"], r["compression"]): float(r["predicted_iteration_s"])
                for r in csv.DictReader(open(out))}


def epoch_iteration_seconds(run_dir, epoch):
    """Seconds per iteration of one epoch of a run: the slowest rank's wall time (timing.csv)
    over the epoch's iterations."""
    rows = [r for r in csv.DictReader(open(os.path.join(run_dir, "timing.csv")))
            if int(r["epoch"]) == epoch]
    return max(float(r["wall_s"]) for r in rows) / int(rows[0]["iterations"])


def verdict(ok):
    """How a goal line ends."""
    return "met" if ok else "NOT met"


def flow(value):
    """A value in YAML flow style: {name: resnet18, small_input: true}, [500, 500]."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
