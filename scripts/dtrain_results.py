"""Reading dtrain's output folders: shared by scripts/sweep.py and scripts/plot.py.

A run folder (dtrain --out DIR) holds config.yaml (the resolved experiment), run.yaml,
accuracy.csv (one row per evaluation) and timing.csv (one row per rank per epoch); a run made
by sweep.py also holds sweep_status.json and log.txt. The columns are docs/outputs.md's
("Outputs") and docs/architecture.md's ("The contract").

    from dtrain_results import load_run, run_metrics
    run = load_run("runs/sweep1/algorithm=sync,ranks=2")
    print(run_metrics(run, target=0.85)["samples_per_s"])

Every problem with a file raises ResultsError, whose message names the file; the scripts turn
it into exit code 2.
"""

import csv
import json
import math
import os
import re

import yaml

STATUS_FILE = "sweep_status.json"
ACCURACY_FILE = "accuracy.csv"
TIMING_FILE = "timing.csv"
CONFIG_FILE = "config.yaml"
RUN_INFO_FILE = "run.yaml"
PLAN_FILE = "plan.csv"

ACCURACY_COLUMNS = ["epoch", "iteration", "wall_s", "train_loss", "train_acc", "test_loss",
                    "test_acc"]
TIMING_COLUMNS = ["rank", "epoch", "iterations", "wall_s", "data_s", "forward_s", "backward_s",
                  "update_s", "compress_s", "comm_s", "wait_s"]
# dataset.name of the datasets whose samples are token windows: runs on them train a language
# model (see is_language_model).
LANGUAGE_MODEL_DATASETS = ("text", "tokens")
# The summary columns of a language-model run, empty for other runs (see language_model_metrics).
LANGUAGE_MODEL_COLUMNS = ["final_test_ppl", "best_test_ppl", "tokens_per_s"]
# The parts of an iteration the compute thread spends its time in (timing.csv), in the order
# they happen; wait_s is the communication it could not hide.
COMPUTE_PARTS = ["data_s", "forward_s", "backward_s", "update_s", "compress_s", "wait_s"]


class ResultsError(Exception):
    """A run folder or one of its files is missing or malformed; the message names the file."""


def read_numeric_csv(path, required_columns):
    """Rows of a CSV as dicts of floats; the header must hold required_columns."""
    if not os.path.isfile(path):
        raise ResultsError(f"{path}: no such file")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required_columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ResultsError(f"{path}: header lacks column(s) {', '.join(missing)} "
                               f"(found: {','.join(reader.fieldnames or [])})")
        rows = []
        for line_number, row in enumerate(reader, start=2):
            try:
                rows.append({c: float(row[c]) for c in required_columns})
            except (TypeError, ValueError):
                raise ResultsError(f"{path}:{line_number}: not a number in {row}") from None
    return rows


def read_yaml(path):
    if not os.path.isfile(path):
        raise ResultsError(f"{path}: no such file")
    try:
        with open(path) as handle:
            return yaml.safe_load(handle) or {}
    except yaml.YAMLError as error:
        raise ResultsError(f"{path}: not valid YAML: {error}") from None


def read_status(run_dir):
    """The sweep's record of a run (sweep_status.json), or None for a folder sweep.py did not
    make. A half-written record cannot exist: sweep.py replaces it atomically."""
    path = os.path.join(run_dir, STATUS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise ResultsError(f"{path}: unreadable: {error}") from None


def is_run_folder(path):
    """A folder dtrain trained into (it holds the per-evaluation accuracy.csv)."""
    return os.path.isfile(os.path.join(path, ACCURACY_FILE))


def looks_like_run_folder(path):
    """A folder meant to hold a run, even an unfinished or broken one."""
    return any(os.path.exists(os.path.join(path, f))
               for f in (ACCURACY_FILE, TIMING_FILE, CONFIG_FILE, STATUS_FILE))


class Run:
    """One finished dtrain run: its resolved config and its two CSVs."""

    def __init__(self, path, config, run_info, accuracy, timing, status):
        self.path = path
        self.name = os.path.basename(os.path.normpath(path))
        self.config = config
        self.run_info = run_info  # run.yaml: what really ran (world_size, hosts, ...)
        self.accuracy = accuracy
        self.timing = timing
        self.status = status  # sweep_status.json, or None outside a sweep

    @property
    def ranks(self):
        """The world size: run.yaml says it; timing.csv's ranks are the fallback."""
        world_size = self.run_info.get("world_size")
        if isinstance(world_size, int) and world_size > 0:
            return world_size
        return len({int(row["rank"]) for row in self.timing}) or 1

    @property
    def algorithm(self):
        return str((self.config.get("algorithm") or {}).get("name", "?"))

    @property
    def compression(self):
        return str((self.config.get("compression") or {}).get("name", "none"))

    @property
    def stragglers(self):
        return (self.config.get("cluster") or {}).get("stragglers") or []


def load_run(path):
    """Read a run folder; ResultsError naming the file when one is missing or malformed."""
    if not os.path.isdir(path):
        raise ResultsError(f"{path}: no such folder")
    accuracy = read_numeric_csv(os.path.join(path, ACCURACY_FILE), ACCURACY_COLUMNS)
    timing = read_numeric_csv(os.path.join(path, TIMING_FILE), TIMING_COLUMNS)
    if not timing:
        raise ResultsError(f"{os.path.join(path, TIMING_FILE)}: no rows")
    config = read_yaml(os.path.join(path, CONFIG_FILE))
    run_yaml = os.path.join(path, RUN_INFO_FILE)
    run_info = read_yaml(run_yaml) if os.path.isfile(run_yaml) else {}
    return Run(path, config, run_info, accuracy, timing, read_status(path))


def no_effect_settings(run):
    """The keys dtrain warned had no effect on this run ("compression.name"), from run.yaml's
    notes, where each is "no effect: KEY: why" (lib/run/rank_checks.h)."""
    keys = []
    for note in run.run_info.get("notes") or []:
        match = re.match(r"no effect: ([\w.\[\]]+):", str(note))
        if match and match.group(1) not in keys:
            keys.append(match.group(1))
    return keys


def global_batch(run):
    try:
        return float(run.config["dataset"]["batch_size"])
    except (KeyError, TypeError):
        raise ResultsError(f"{os.path.join(run.path, CONFIG_FILE)}: "
                           "no dataset.batch_size") from None


def epoch_totals(run):
    """Per epoch: (iterations, wall seconds of the slowest rank). Ranks of a data-parallel run
    do the same iterations; the epoch lasts as long as its slowest rank."""
    totals = {}
    for row in run.timing:
        iterations, wall = totals.get(row["epoch"], (0.0, 0.0))
        totals[row["epoch"]] = (max(iterations, row["iterations"]), max(wall, row["wall_s"]))
    return [totals[epoch] for epoch in sorted(totals)]


def per_rank_sums(run):
    """rank -> {column: sum over epochs} of timing.csv."""
    sums = {}
    for row in run.timing:
        rank_sums = sums.setdefault(int(row["rank"]), {c: 0.0 for c in TIMING_COLUMNS[2:]})
        for column in TIMING_COLUMNS[2:]:
            rank_sums[column] += row[column]
    return sums


def per_iteration_mean(run, column):
    """Mean over ranks of Σ column / Σ iterations: seconds per iteration of one timing part."""
    values = [s[column] / s["iterations"] for s in per_rank_sums(run).values()
              if s["iterations"] > 0]
    return sum(values) / len(values) if values else float("nan")


def time_breakdown(run):
    """Seconds per iteration of each compute-thread part, averaged over ranks, plus `other`
    (the rest of the rank's wall time: bookkeeping, timers, gaps) and comm_s (all communication,
    also the part hidden behind compute)."""
    parts = {column: per_iteration_mean(run, column) for column in COMPUTE_PARTS}
    wall = per_iteration_mean(run, "wall_s")
    parts["other_s"] = max(0.0, wall - sum(parts.values()))
    parts["comm_s"] = per_iteration_mean(run, "comm_s")
    return parts


def mean_epoch_time_per_rank(run):
    """rank -> mean wall seconds of its epochs."""
    walls = {}
    for row in run.timing:
        walls.setdefault(int(row["rank"]), []).append(row["wall_s"])
    return {rank: sum(w) / len(w) for rank, w in sorted(walls.items())}


def run_metrics(run, target=None, target_ppl=None):
    """The measured columns of the sweep's summary.csv for one run. time_to_target_s: for a
    language model with target_ppl given, the first time its validation perplexity is at most
    target_ppl; else the first time its test accuracy (a language model's next-token accuracy)
    is at least target."""
    iterations = sum(i for i, _ in epoch_totals(run))
    wall = sum(w for _, w in epoch_totals(run))
    test_accuracies = [row["test_acc"] for row in run.accuracy]
    time_to_target = ""
    if target_ppl is not None and is_language_model(run):
        time_to_target = first_time_at_or_below_perplexity(run, target_ppl)
    elif target is not None:
        reached = [row["wall_s"] for row in run.accuracy if row["test_acc"] >= target]
        time_to_target = reached[0] if reached else ""
    return {
        "final_test_acc": test_accuracies[-1] if test_accuracies else "",
        "best_test_acc": max(test_accuracies) if test_accuracies else "",
        "time_to_target_s": time_to_target,
        "epochs": int(max(row["epoch"] for row in run.timing)),
        "iterations": int(iterations),
        "samples_per_s": global_batch(run) * iterations / wall if wall > 0 else "",
        "iteration_s": wall / iterations if iterations > 0 else "",
        "comm_s_per_iter": per_iteration_mean(run, "comm_s"),
        "wait_s_per_iter": per_iteration_mean(run, "wait_s"),
    }


def dataset_config(run):
    dataset = run.config.get("dataset")
    return dataset if isinstance(dataset, dict) else {}


def block_size(run):
    """The tokens of a language model's sample (dataset.block_size), else None."""
    value = dataset_config(run).get("block_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def is_language_model(run):
    """Whether the run trained a language model, from its resolved config.yaml: its dataset is
    one of LANGUAGE_MODEL_DATASETS, or it has a dataset.block_size (its samples are windows of
    that many tokens: a time axis, whatever the dataset's name). Image datasets have no
    block_size, and model.block_size is not looked at (the GPT's is 0 when the dataset sets it).
    Then accuracy.csv's losses are mean per-token cross-entropies in nats and test_acc is the
    next-token accuracy."""
    return (str(dataset_config(run).get("name")) in LANGUAGE_MODEL_DATASETS
            or block_size(run) is not None)


def perplexity(loss):
    """exp(loss) of a per-token cross-entropy in nats; a diverged loss is inf."""
    try:
        return math.exp(loss)
    except OverflowError:
        return float("inf")


def first_time_at_or_below_perplexity(run, target_ppl):
    """Training seconds (accuracy.csv's wall_s) of the first evaluation whose validation
    perplexity exp(test_loss) is at most target_ppl, else ""."""
    reached = [row["wall_s"] for row in run.accuracy if perplexity(row["test_loss"]) <= target_ppl]
    return reached[0] if reached else ""


def language_model_metrics(run):
    """The LANGUAGE_MODEL_COLUMNS of a run: for a language model final_test_ppl and
    best_test_ppl (exp of accuracy.csv's last and lowest test_loss) and tokens_per_s (training
    tokens/s: iterations × dataset.batch_size × dataset.block_size over the wall_s of
    timing.csv, evaluation excluded — samples_per_s × block_size, the arithmetic of dtrain's
    "N tokens/s", whose wall time is rank 0's where this takes the slowest rank's); all empty
    for other runs."""
    if not is_language_model(run):
        return {column: "" for column in LANGUAGE_MODEL_COLUMNS}
    losses = [row["test_loss"] for row in run.accuracy]
    iterations = sum(i for i, _ in epoch_totals(run))
    wall = sum(w for _, w in epoch_totals(run))
    tokens = block_size(run)
    return {
        "final_test_ppl": perplexity(losses[-1]) if losses else "",
        "best_test_ppl": perplexity(min(losses)) if losses else "",
        "tokens_per_s": (global_batch(run) * tokens * iterations / wall
                         if tokens and wall > 0 else ""),
    }


def read_plan(sweep_dir):
    """Rows of a sweep's plan.csv (ranks, dtrain plan's columns, settings), or [] without one."""
    path = os.path.join(sweep_dir, PLAN_FILE)
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for line_number, row in enumerate(rows, start=2):
        try:
            row["ranks"] = int(row["ranks"])
            row["predicted_iteration_s"] = float(row["predicted_iteration_s"])
        except (KeyError, TypeError, ValueError):
            raise ResultsError(f"{path}:{line_number}: needs integer ranks and a number "
                               f"predicted_iteration_s") from None
    return rows


def predicted_iteration_s(plan_rows, run):
    """dtrain plan's prediction for this run: the row of its ranks, algorithm and compression
    made with the same overrides (sweep_status.json's plan_settings). None when there is none:
    a run from outside the sweep, or one whose settings were not planned."""
    if not plan_rows or not run.status:
        return None
    settings = run.status.get("plan_settings", "")
    for row in plan_rows:
        if (row["ranks"] == run.ranks and row.get("settings", "") == settings
                and row["algorithm"] == run.algorithm and row["compression"] == run.compression):
            return row["predicted_iteration_s"]
    return None
