#!/usr/bin/python3
"""Run a grid of dtrain experiments and tabulate them: how users compare algorithms.

Usage:
  scripts/sweep.py --config configs/fashion_mlp_sync.yaml --ranks 1,2,4 \\
      --grid algorithm.name=sync,pipe_sgd --grid compression.name=none,quantize8 \\
      [--set KEY=VALUE]... [--repeat 3] [--target 0.85] [--target-ppl 10] [--plan] \\
      [--dry-run] [--dtrain PATH] --out runs/sweep1

Every combination of the --grid values and of the --ranks list (a grid over ranks 1,2,4 gives
the scaling table) is trained --repeat times, under mpirun when it has more than one rank.
--set values apply to every run. A grid value may itself hold commas inside brackets:
--grid 'model.hidden=[256,256],[500,500]'. Repeats run the same experiment (same seed) to
average out timing noise; grid over `seed` to vary the data order and initial weights.

What lands in OUT:
  NAME/             one folder per run, named after the settings that vary
                    (e.g. algorithm=pipe_sgd,compression=quantize8,ranks=2): dtrain's outputs,
                    log.txt (dtrain's stdout and stderr) and sweep_status.json (this script's
                    record of the run: status, exit code, seconds, command line, attempts)
  summary.csv       one row per run (rewritten after every run): the grid values, ranks, repeat,
                    status, exit_code, seconds, final_test_acc, best_test_acc, time_to_target_s,
                    epochs, iterations, samples_per_s, iteration_s, comm_s_per_iter,
                    wait_s_per_iter, [predicted_iteration_s], no_effect (the settings dtrain
                    warned had no effect on the run, e.g. compression.name on one rank, from
                    run.yaml's notes; ';'-separated: such runs are not different experiments),
                    final_test_ppl, best_test_ppl, tokens_per_s (language models only, see
                    below; empty for other runs), dir (relative to OUT)
  sweep.json        the sweep's definition (and earlier ones, when OUT was reused)
  plan.csv, plans/  with --plan: `dtrain plan` once per ranks (and per non-algorithm grid
                    values), its rows with a leading ranks column and a trailing settings column

Language models: a run trained a language model when its resolved config.yaml has a dataset
of name text or tokens, or any dataset with a block_size (its samples are windows of that many
tokens, a time axis; image datasets have none). Its accuracy.csv keeps the columns: test_loss is
the mean per-token cross-entropy in nats, test_acc the next-token accuracy, so final_test_acc
and best_test_acc are next-token accuracies. Its row also has final_test_ppl and best_test_ppl
(exp of accuracy.csv's last and lowest test_loss: validation perplexity) and tokens_per_s
(training tokens/s: iterations × dataset.batch_size × dataset.block_size over timing.csv's
wall_s, evaluation excluded; samples_per_s × block_size, the number dtrain prints as "tokens/s",
which on several ranks takes rank 0's wall time where this takes the slowest rank's).
--target A is a test accuracy for every run (a language model's next-token accuracy);
--target-ppl P makes a language model's time_to_target_s the training time of its first
evaluation with validation perplexity ≤ P instead (other runs keep --target's meaning).

Re-running the same command resumes: completed runs (dtrain exited 0) are skipped; an
interrupted run that left a checkpoint (its config has `checkpoint:`) continues from it with
`dtrain --resume`; other unfinished or failed runs are trained again from scratch. Another grid into the same OUT adds its runs
beside the existing ones; a run folder whose recorded settings differ from the planned run of
the same name is an error (exit 2), never overwritten. scripts/plot.py OUT draws the figures.

Exit codes: 0 every run succeeded (or --dry-run); 1 a run (or a plan) failed, listed at the end;
2 bad arguments; 130 / 143 stopped by SIGINT / SIGTERM (the run in progress is redone next time).
"""

import argparse
import csv
import datetime
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import dtrain_results as results

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN_CANDIDATES = ["build/apps/dtrain/dtrain", "build-cpu/apps/dtrain/dtrain"]
SWEEP_FILE = "sweep.json"
SUMMARY_FILE = "summary.csv"
LOG_FILE = "log.txt"
PLANS_DIR = "plans"
LOG_TAIL_LINES = 6
# dtrain plan predicts every algorithm × compression itself, so these grid keys are not
# passed to it (unless the run also sets keys of its own algorithm, which need the name).
PLANNED_KEYS = {"algorithm.name": "algorithm.", "compression.name": "compression."}
MAX_NAME_LENGTH = 150  # file names stay well under the usual 255-byte limit
METRIC_COLUMNS = ["final_test_acc", "best_test_acc", "time_to_target_s", "epochs", "iterations",
                  "samples_per_s", "iteration_s", "comm_s_per_iter", "wait_s_per_iter"]


class UsageError(Exception):
    """Bad sweep arguments (exit 2)."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; carries the signal number."""


def on_signal(signum, _frame):
    raise Interrupted(signum)


# ---------------------------------------------------------------- arguments and definition

def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="sweep.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the base experiment YAML")
    parser.add_argument("--ranks", default="1", help="rank counts, e.g. 2 or 1,2,4 (default 1)")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="a grid dimension (repeatable); the runs are the cartesian product")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                        help="an override for every run (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each combination")
    parser.add_argument("--target", type=float,
                        help="test accuracy (language models: next-token accuracy) for "
                             "time_to_target_s")
    parser.add_argument("--target-ppl", type=float, metavar="P",
                        help="language models: time_to_target_s is the time to validation "
                             "perplexity <= P")
    parser.add_argument("--plan", action="store_true", help="also run `dtrain plan`: plan.csv")
    parser.add_argument("--dry-run", action="store_true", help="list the runs, run nothing")
    parser.add_argument("--dtrain", help="the dtrain binary (default: the repository's build)")
    parser.add_argument("--out", required=True, help="the sweep's folder")
    return parser.parse_args(argv)


def split_top_level(text):
    """Split at the commas outside brackets, braces and quotes, so that YAML values keep theirs."""
    parts, current, depth, quote = [], [], 0, None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        if char == "," and depth == 0 and not quote:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def parse_assignment(text, option):
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key or re.search(r"\s", key):
        raise UsageError(f"{option} {text!r}: expected KEY=VALUE with a dotted key, "
                         f"e.g. {option} algorithm.name=sync")
    return key, value.strip()


def parse_grid(specs):
    grid = []
    for spec in specs:
        key, value_text = parse_assignment(spec, "--grid")
        values = split_top_level(value_text)
        if any(v == "" for v in values):
            raise UsageError(f"--grid {spec!r}: empty value in the comma-separated list")
        if len(set(values)) != len(values):
            raise UsageError(f"--grid {spec!r}: a value is listed twice")
        if key == "ranks":
            raise UsageError("--grid ranks=...: give rank counts with --ranks 1,2,4")
        if key in [k for k, _ in grid]:
            raise UsageError(f"--grid {key}: given twice; list all its values in one --grid")
        grid.append((key, values))
    return grid


def parse_sets(specs, grid):
    sets = [parse_assignment(spec, "--set") for spec in specs]
    keys = [k for k, _ in sets]
    for key in keys:
        if keys.count(key) > 1:
            raise UsageError(f"--set {key}: given twice")
        if key in [k for k, _ in grid]:
            raise UsageError(f"{key}: both in --set and in --grid; keep one")
    return sets


def parse_ranks(text):
    try:
        ranks = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--ranks {text!r}: expected positive integers like 1,2,4") from None
    if any(r < 1 for r in ranks) or len(set(ranks)) != len(ranks):
        raise UsageError(f"--ranks {text!r}: expected distinct positive integers like 1,2,4")
    return ranks


def find_dtrain(explicit):
    """--dtrain, else the repository's build (GPU build first), else dtrain on PATH."""
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise UsageError(f"--dtrain {explicit}: not an executable file")
        return explicit
    for relative in DTRAIN_CANDIDATES:
        candidate = os.path.join(REPO_ROOT, relative)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("dtrain")
    if on_path:
        return on_path
    raise UsageError("no dtrain binary: give --dtrain PATH, build the repository "
                     f"({', '.join(DTRAIN_CANDIDATES)}) or put dtrain on PATH")


def build_definition(args):
    """The sweep as data (what sweep.json stores); UsageError for bad arguments."""
    if not os.path.isfile(args.config):
        raise UsageError(f"--config {args.config}: no such file")
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: must be at least 1")
    if args.target is not None and not 0 < args.target <= 1:
        raise UsageError(f"--target {args.target}: a test accuracy in (0, 1]")
    if args.target_ppl is not None and not 1 <= args.target_ppl < float("inf"):
        raise UsageError(f"--target-ppl {args.target_ppl}: a perplexity, at least 1")
    grid = parse_grid(args.grid)
    definition = {
        "config": os.path.abspath(args.config),
        "ranks": parse_ranks(args.ranks),
        "grid": [[key, values] for key, values in grid],
        "sets": [[key, value] for key, value in parse_sets(args.sets, grid)],
        "repeat": args.repeat,
        "target": args.target,
        "plan": args.plan,
    }
    if args.target_ppl is not None:  # absent otherwise: older sweep.json files stay equal
        definition["target_ppl"] = args.target_ppl
    return definition


# ---------------------------------------------------------------- the runs

def short_key(key):
    """algorithm.name -> algorithm: the `.name` of a section says which one it is."""
    return key[:-len(".name")] if key.endswith(".name") else key


def slug(value):
    """A file-name-safe spelling of a value: [{rank: 1, slowdown: 3}] -> rank_1_slowdown_3."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", value).strip("_") or "empty"


def short_hash(text):
    return hashlib.sha1(text.encode()).hexdigest()[:8]


class RunSpec:
    """One planned training run: its grid values, rank count and repeat number."""

    def __init__(self, definition, grid_values, ranks, repeat):
        self.grid_values = grid_values  # [(key, value)] in --grid order
        self.ranks = ranks
        self.repeat = repeat
        self.overrides = [tuple(kv) for kv in definition["sets"]] + grid_values
        self.config = definition["config"]
        self.name = None

    def identity(self):
        """What makes two runs the same experiment; a folder's record must match it to be reused."""
        return {"config": self.config, "overrides": sorted([list(kv) for kv in self.overrides]),
                "ranks": self.ranks, "repeat": self.repeat}

    def plan_settings(self):
        """The overrides `dtrain plan` needs for this run: all but the enumerated keys."""
        keys = [k for k, _ in self.overrides]
        kept = [(k, v) for k, v in self.overrides
                if k not in PLANNED_KEYS
                or any(other.startswith(PLANNED_KEYS[k]) and other != k for other in keys)]
        return ";".join(f"{k}={v}" for k, v in sorted(kept))


def expand_runs(definition):
    """The cartesian product of the grids, the ranks and the repeats, each named readably."""
    grid = definition["grid"]
    specs = []
    for combination in itertools.product(*[values for _, values in grid]):
        grid_values = [(key, value) for (key, _), value in zip(grid, combination)]
        for ranks in definition["ranks"]:
            for repeat in range(1, definition["repeat"] + 1):
                specs.append(RunSpec(definition, grid_values, ranks, repeat))
    name_runs(specs, definition)
    return specs


def name_runs(specs, definition):
    """Name each run after the values that vary in this sweep; a hash settles the rare clash
    of two values with the same file-name spelling (and keeps long names short)."""
    varying = [key for key, values in definition["grid"] if len(values) > 1]
    for spec in specs:
        values = dict(spec.grid_values)
        parts = [f"{short_key(key)}={slug(values[key])}" for key in varying]
        if len(definition["ranks"]) > 1:
            parts.append(f"ranks={spec.ranks}")
        if definition["repeat"] > 1:
            parts.append(f"rep={spec.repeat}")
        if not parts:  # nothing varies: name the one run after all its grid values
            parts = [f"{short_key(key)}={slug(value)}" for key, value in spec.grid_values]
        spec.name = ",".join(parts) or "run"
    fingerprints = {}
    for spec in specs:
        fingerprints.setdefault(spec.name, set()).add(json.dumps(spec.identity(), sort_keys=True))
    for spec in specs:
        clash = len(fingerprints[spec.name]) > 1
        if clash or len(spec.name) > MAX_NAME_LENGTH:
            spec.name = (spec.name[:MAX_NAME_LENGTH] + "~"
                         + short_hash(json.dumps(spec.identity(), sort_keys=True)))


def available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def mpirun_prefix(ranks):
    prefix = ["mpirun", "-np", str(ranks)]
    if ranks > available_cores():
        prefix.append("--oversubscribe")
    return prefix


def supports_progress_log(dtrain):
    """Whether this dtrain has `--progress log` (plain log lines instead of a live status line
    full of terminal escape codes, which is what log.txt wants)."""
    try:
        help_text = subprocess.run([dtrain, "--help"], capture_output=True, text=True,
                                   timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--progress" in help_text


def train_command(dtrain, spec, run_dir, progress_log, resume=False):
    command = [dtrain, "--config", spec.config, "--resume" if resume else "--out", run_dir]
    for key, value in spec.overrides:
        command += ["--set", f"{key}={value}"]
    if progress_log:
        command += ["--progress", "log"]
    return mpirun_prefix(spec.ranks) + command if spec.ranks > 1 else command


def child_environment():
    """Open MPI refuses to start as root unless told that it is meant."""
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


# ---------------------------------------------------------------- run folders and their records

def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def write_json_atomically(path, data):
    """Write to a temporary name, flush to disk, rename: a reader sees the old or the new file."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def folder_state(out_dir, spec):
    """new | done | redo | foreign (not made by sweep.py) | conflict (another experiment)."""
    run_dir = os.path.join(out_dir, spec.name)
    if not os.path.exists(run_dir):
        return "new"
    status = results.read_status(run_dir)
    if status is None:
        return "foreign"
    if status.get("identity") != spec.identity():
        return "conflict"
    return "done" if status.get("status") == "ok" and status.get("exit_code") == 0 else "redo"


def check_folders(out_dir, specs):
    """Refuse, before running anything, to touch a folder that is not this sweep's run."""
    problems = []
    for spec in specs:
        state = folder_state(out_dir, spec)
        run_dir = os.path.join(out_dir, spec.name)
        if state == "foreign":
            problems.append(f"{run_dir}: exists but was not made by sweep.py "
                            f"(no {results.STATUS_FILE}); move it away")
        elif state == "conflict":
            recorded = results.read_status(run_dir).get("identity") or {}
            problems.append(f"{run_dir}: holds a run with other settings "
                            f"({describe_difference(recorded, spec.identity())}); "
                            "use another --out or move it away")
    if problems:
        shown = problems[:5] + ([f"... and {len(problems) - 5} more"] if len(problems) > 5 else [])
        raise UsageError("\n".join(shown))


def describe_difference(recorded, planned):
    """`recorded X, planned Y` for the first setting that differs between two run identities."""
    for field in ("config", "ranks", "repeat"):
        if recorded.get(field) != planned.get(field):
            return f"{field}: recorded {recorded.get(field)}, planned {planned.get(field)}"
    recorded_overrides = {k: v for k, v in recorded.get("overrides", [])}
    planned_overrides = {k: v for k, v in planned.get("overrides", [])}
    for key in sorted(set(recorded_overrides) | set(planned_overrides)):
        if recorded_overrides.get(key) != planned_overrides.get(key):
            return (f"{key}: recorded {recorded_overrides.get(key, '(unset)')}, "
                    f"planned {planned_overrides.get(key, '(unset)')}")
    return "unreadable record"


def resumable(run_dir):
    """An interrupted run of this sweep that left a finished checkpoint: dtrain --resume
    continues it (a failed one would fail again: it is redone)."""
    status = results.read_status(run_dir) if os.path.isdir(run_dir) else None
    root = os.path.join(run_dir, "checkpoints")
    return (status is not None and status.get("status") in ("interrupted", "running")
            and os.path.isdir(root)
            and any(os.path.exists(os.path.join(root, c, "manifest.yaml")) for c in os.listdir(root)))


def start_run_folder(out_dir, spec, command, resume=False):
    """Replace an unfinished attempt (or keep it, to resume it) and create the folder with its
    record in one rename, so that a folder of this sweep always carries its sweep_status.json."""
    run_dir = os.path.join(out_dir, spec.name)
    attempt = 1
    old_status = results.read_status(run_dir) if os.path.isdir(run_dir) else None
    if old_status is not None:  # ours, unfinished or failed (check_folders vetted it)
        attempt = int(old_status.get("attempt", 0)) + 1
        if not resume:
            shutil.rmtree(run_dir)
    staging = os.path.join(out_dir, f".{spec.name}.starting")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    status = {
        "status": "running", "exit_code": None, "seconds": None, "attempt": attempt,
        "started": now_iso(), "finished": None,
        "command": command, "command_line": shlex.join(command),
        "grid": dict(spec.grid_values), "ranks": spec.ranks, "repeat": spec.repeat,
        "plan_settings": spec.plan_settings(), "identity": spec.identity(),
    }
    if resume:  # the folder stays: its checkpoints and CSVs are the run's so far
        shutil.rmtree(staging)
        write_json_atomically(os.path.join(run_dir, results.STATUS_FILE), status)
        return run_dir, status
    write_json_atomically(os.path.join(staging, results.STATUS_FILE), status)
    os.rename(staging, run_dir)
    return run_dir, status


def stop_child(process):
    """Ask mpirun/dtrain to stop (dtrain ends its iteration and writes its CSVs), then insist."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def execute(command, log_path, header):
    """Run command with its stdout and stderr in log_path; (exit code, seconds, interruption)."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(f"# {header}: {shlex.join(command)}\n")
        log.flush()
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=child_environment())
        except OSError as error:
            log.write(f"cannot start: {error}\n")
            return 127, time.monotonic() - start, None
        try:
            exit_code = process.wait()
        except Interrupted as interruption:
            return stop_child(process), time.monotonic() - start, interruption
    return exit_code, time.monotonic() - start, None


def log_tail(path, lines=LOG_TAIL_LINES):
    try:
        with open(path, errors="replace") as handle:
            text = handle.read().replace("\r", "\n")
    except OSError:
        return []
    # A live status line's escape codes would garble the report.
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return [line for line in text.splitlines()
            if line.strip() and not line.startswith("# sweep.py")][-lines:]


# ---------------------------------------------------------------- plan

def plan_contexts(specs):
    """(ranks, settings) -> the overrides of one `dtrain plan` call."""
    contexts = {}
    for spec in specs:
        settings = spec.plan_settings()
        overrides = [kv.split("=", 1) for kv in settings.split(";")] if settings else []
        contexts[(spec.ranks, settings)] = overrides
    return contexts


def plan_file_stem(ranks, settings):
    return f"ranks={ranks}" + (f"~{short_hash(settings)}" if settings else "")


def plan_command(dtrain, config, ranks, overrides, csv_path):
    command = [dtrain, "plan", "--config", config, "--ranks", str(ranks), "--csv", csv_path]
    for key, value in overrides:
        command += ["--set", f"{key}={value}"]
    return command


def run_plans(out_dir, dtrain, config, contexts, failures):
    """One `dtrain plan` per context, kept in OUT/plans/ (a finished one is not redone)."""
    plans_dir = os.path.join(out_dir, PLANS_DIR)
    os.makedirs(plans_dir, exist_ok=True)
    for (ranks, settings), overrides in sorted(contexts.items()):
        stem = os.path.join(plans_dir, plan_file_stem(ranks, settings))
        label = f"ranks={ranks}" + (f" ({settings})" if settings else "")
        if os.path.isfile(stem + ".json"):
            print(f"[plan] {label} ... skip (planned earlier)", flush=True)
            continue
        command = plan_command(dtrain, config, ranks, overrides, stem + ".csv.tmp")
        print(f"[plan] {label} ... ", end="", flush=True)
        exit_code, seconds, interruption = execute(command, stem + ".log", "sweep.py ran")
        if interruption:
            raise interruption
        if exit_code != 0 or not os.path.isfile(stem + ".csv.tmp"):
            print(f"FAILED (exit {exit_code})", flush=True)
            failures.append((label, exit_code, stem + ".log"))
            continue
        os.replace(stem + ".csv.tmp", stem + ".csv")
        write_json_atomically(stem + ".json", {"ranks": ranks, "settings": settings,
                                               "command_line": shlex.join(command)})
        print(f"done in {seconds:.1f} s", flush=True)
    write_plan_table(out_dir)


def write_plan_table(out_dir):
    """OUT/plan.csv: every finished plan's rows, with its ranks first and settings last."""
    plans_dir = os.path.join(out_dir, PLANS_DIR)
    rows, columns = [], []
    for entry in sorted(os.listdir(plans_dir)):
        if not entry.endswith(".json"):
            continue
        with open(os.path.join(plans_dir, entry)) as handle:
            context = json.load(handle)
        with open(os.path.join(plans_dir, entry[:-len(".json")] + ".csv"), newline="") as handle:
            reader = csv.DictReader(handle)
            columns += [c for c in reader.fieldnames or [] if c not in columns]
            rows += [dict(row, ranks=context["ranks"], settings=context["settings"])
                     for row in reader]
    write_csv_atomically(os.path.join(out_dir, results.PLAN_FILE),
                         ["ranks"] + columns + ["settings"], rows)


# ---------------------------------------------------------------- summary

def write_csv_atomically(path, columns, rows):
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: format_cell(row.get(c, "")) for c in columns})
    os.replace(temporary, path)


def format_cell(value):
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"  # NaN: no data
    return "" if value is None else value


def sweep_run_folders(out_dir, planned_names):
    """This sweep's run folders: the planned ones first, then those of earlier grids."""
    recorded = sorted(entry for entry in os.listdir(out_dir)
                      if not entry.startswith(".")
                      and os.path.isfile(os.path.join(out_dir, entry, results.STATUS_FILE)))
    return [n for n in planned_names if n in recorded] + [n for n in recorded
                                                          if n not in planned_names]


def summary_row(run_dir, status, definition, plan_rows):
    row = dict(status.get("grid", {}))
    row.update(ranks=status.get("ranks"), repeat=status.get("repeat"),
               status=status.get("status"), exit_code=status.get("exit_code"),
               seconds=status.get("seconds"), dir=os.path.basename(run_dir))
    if status.get("status") == "ok":
        try:
            run = results.load_run(run_dir)
        except results.ResultsError as error:
            print(f"warning: {error}", file=sys.stderr)
            return row
        row.update(results.run_metrics(run, definition["target"],
                                       definition.get("target_ppl")))
        row.update(results.language_model_metrics(run))
        row["predicted_iteration_s"] = results.predicted_iteration_s(plan_rows, run)
        row["no_effect"] = ";".join(results.no_effect_settings(run))
    return row


def write_summary(out_dir, definition, planned_names):
    plan_rows = results.read_plan(out_dir)
    rows, grid_columns = [], [key for key, _ in definition["grid"]]
    for name in sweep_run_folders(out_dir, planned_names):
        run_dir = os.path.join(out_dir, name)
        status = results.read_status(run_dir)
        grid_columns += [k for k in status.get("grid", {}) if k not in grid_columns]
        rows.append(summary_row(run_dir, status, definition, plan_rows))
    columns = (grid_columns + ["ranks", "repeat", "status", "exit_code", "seconds"]
               + METRIC_COLUMNS + (["predicted_iteration_s"] if plan_rows else [])
               + ["no_effect"] + results.LANGUAGE_MODEL_COLUMNS + ["dir"])
    write_csv_atomically(os.path.join(out_dir, SUMMARY_FILE), columns, rows)


def record_definition(out_dir, definition, argv):
    """sweep.json: this definition, and the earlier ones that wrote into the same folder."""
    path = os.path.join(out_dir, SWEEP_FILE)
    history = []
    if os.path.isfile(path):
        with open(path) as handle:
            previous = json.load(handle)
        history = previous.get("history", [])
        if previous.get("definition") != definition:
            history.append({k: previous.get(k) for k in ("definition", "argv", "updated")})
    write_json_atomically(path, {"definition": definition, "argv": argv, "updated": now_iso(),
                                 "history": history})


# ---------------------------------------------------------------- the sweep

def format_duration(seconds):
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def final_result(run_dir):
    """What the progress line says of a finished run: "test acc A", and for a language model
    ", perplexity P" (of its last evaluation); None without an accuracy.csv row."""
    try:
        rows = results.read_numeric_csv(os.path.join(run_dir, results.ACCURACY_FILE),
                                        results.ACCURACY_COLUMNS)
        config_path = os.path.join(run_dir, results.CONFIG_FILE)
        config = results.read_yaml(config_path) if os.path.isfile(config_path) else {}
    except results.ResultsError:
        return None
    if not rows:
        return None
    text = f"test acc {rows[-1]['test_acc']:.4f}"
    if results.is_language_model(results.Run(run_dir, config, {}, rows, [], None)):
        text += f", perplexity {results.perplexity(rows[-1]['test_loss']):.4g}"
    return text


def accuracy_note(run_dir):
    result = final_result(run_dir)
    return f" ({result})" if result is not None else ""


def dry_run(out_dir, specs, dtrain, progress_log, definition):
    print(f"dry run: {len(specs)} run(s) into {out_dir}; nothing is run")
    if definition["plan"]:
        for (ranks, settings), overrides in sorted(plan_contexts(specs).items()):
            csv_path = os.path.join(out_dir, PLANS_DIR, plan_file_stem(ranks, settings) + ".csv")
            command = plan_command(dtrain, definition["config"], ranks, overrides, csv_path)
            print(f"[plan] ranks={ranks}" + (f" ({settings})" if settings else "")
                  + f"\n    {shlex.join(command)}")
    for index, spec in enumerate(specs, start=1):
        state = folder_state(out_dir, spec)
        note = {"done": "  (complete: would be skipped)", "redo": "  (unfinished: would be redone)"}
        print(f"[{index}/{len(specs)}] {spec.name}{note.get(state, '')}\n    "
              + shlex.join(train_command(dtrain, spec, os.path.join(out_dir, spec.name),
                                         progress_log)))


def run_all(out_dir, specs, dtrain, progress_log, definition, failures):
    """Train every run not completed earlier, reporting progress, ETA and failures as it goes."""
    planned_names = [spec.name for spec in specs]
    to_run = sum(folder_state(out_dir, spec) != "done" for spec in specs)
    durations = []
    for index, spec in enumerate(specs, start=1):
        run_dir = os.path.join(out_dir, spec.name)
        print(f"[{index}/{len(specs)}] {spec.name} ... ", end="", flush=True)
        if folder_state(out_dir, spec) == "done":
            result = final_result(run_dir)
            note = f", {result}" if result is not None else ""
            print(f"skip (completed earlier{note})", flush=True)
            continue
        resume = resumable(run_dir)
        command = train_command(dtrain, spec, run_dir, progress_log, resume)
        run_dir, status = start_run_folder(out_dir, spec, command, resume)
        if resume:
            print("resuming from its checkpoint ... ", end="", flush=True)
        exit_code, seconds, interruption = execute(command, os.path.join(run_dir, LOG_FILE),
                                                   "sweep.py ran")
        status.update(exit_code=exit_code, seconds=round(seconds, 3), finished=now_iso(),
                      status="interrupted" if interruption else
                      "ok" if exit_code == 0 else "failed")
        write_json_atomically(os.path.join(run_dir, results.STATUS_FILE), status)
        write_summary(out_dir, definition, planned_names)
        if interruption:
            print(f"interrupted after {seconds:.1f} s", flush=True)
            raise interruption
        durations.append(seconds)
        eta = format_duration(sum(durations) / len(durations) * (to_run - len(durations)))
        if exit_code == 0:
            print(f"done in {seconds:.1f} s{accuracy_note(run_dir)} | ETA {eta}", flush=True)
        else:
            print(f"FAILED (exit {exit_code}) in {seconds:.1f} s | ETA {eta}", flush=True)
            failures.append((spec.name, exit_code, os.path.join(run_dir, LOG_FILE)))


def report_failures(failures):
    print(f"\n{len(failures)} failed:", file=sys.stderr)
    for name, exit_code, log_path in failures:
        print(f"  {name}: exit {exit_code}; log {log_path}", file=sys.stderr)
        for line in log_tail(log_path):
            print(f"    | {line}", file=sys.stderr)


def main(argv):
    try:
        args = parse_arguments(argv)
        definition = build_definition(args)
        dtrain = find_dtrain(args.dtrain)
        specs = expand_runs(definition)
        if (not args.dry_run and any(spec.ranks > 1 for spec in specs)
                and not shutil.which("mpirun")):
            raise UsageError("runs with more than one rank need mpirun on PATH")
        out_dir = args.out
        if os.path.exists(out_dir) and not os.path.isdir(out_dir):
            raise UsageError(f"--out {out_dir}: exists and is not a folder")
        if os.path.isdir(out_dir):
            check_folders(out_dir, specs)
    except UsageError as error:
        print(f"sweep.py: error: {error}", file=sys.stderr)
        return 2

    progress_log = supports_progress_log(dtrain)
    if not progress_log:
        print(f"note: {dtrain} has no --progress option; log.txt gets its live status line",
              file=sys.stderr)
    if args.dry_run:
        dry_run(out_dir, specs, dtrain, progress_log, definition)
        return 0

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    os.makedirs(out_dir, exist_ok=True)
    record_definition(out_dir, definition, argv)
    failures = []
    try:
        if definition["plan"]:
            run_plans(out_dir, dtrain, definition["config"], plan_contexts(specs), failures)
        run_all(out_dir, specs, dtrain, progress_log, definition, failures)
    except Interrupted as interruption:
        signum = interruption.args[0]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        write_summary(out_dir, definition, [spec.name for spec in specs])
        print(f"\nstopped by {signal.Signals(signum).name}; re-run the same command to resume",
              file=sys.stderr)
        return 128 + signum
    write_summary(out_dir, definition, [spec.name for spec in specs])
    print(f"summary: {os.path.join(out_dir, SUMMARY_FILE)}")
    if failures:
        report_failures(failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
