#!/usr/bin/python3
"""Figures that compare dtrain runs: where the time goes, how fast accuracy comes, how it scales.

Usage:
  scripts/plot.py runs/sweep1                      # a sweep folder (scripts/sweep.py --out)
  scripts/plot.py RUN_DIR [RUN_DIR ...] [--out DIR]
  scripts/plot.py --predicted-vs-measured CELLS.csv [--out DIR]   # bench/plan_vs_measured.py

A folder holding accuracy.csv is a run; a folder holding run folders (or summary.csv) is a
sweep, of which the runs that finished are plotted. Each figure is written as PNG and SVG into
--out, else into the sweep folder, the one run folder, or the runs' common parent folder:

  accuracy_vs_time        test accuracy against training wall-clock time (time to accuracy);
                          for language models (dataset.name text or tokens, or any dataset
                          with a block_size: dtrain_results.is_language_model) next-token
                          accuracy
  accuracy_vs_epoch       test accuracy against epoch (needs two evaluations in some run; not
                          for language models, which are measured in iterations)
  loss_vs_time            language models only: validation loss (mean per-token cross-entropy,
                          nats) against training wall-clock time, perplexity = exp(loss) on
                          the right-hand axis and each series' final perplexity in the legend;
                          a sweep's --target-ppl as a dotted line
  loss_vs_iteration       the same against iterations (optimizer steps; needs two evaluations
                          in some language-model run)
  time_breakdown          per run, seconds per iteration by part (data, forward, backward,
                          update, compress, exposed communication = wait_s), and all
                          communication (comm_s) as a hatched bar beside it: hidden
                          communication is the comm bar's excess over the wait part. A
                          pipedream rank's wait beyond its comm_s is pipeline idle time (the
                          bubble: waiting on neighbour stages), drawn in its own colour; for
                          language models each bar's text adds the run's training tokens/s
  scaling                 samples/s (language models: tokens/s), speedup and scaling efficiency
                          against ranks, with the ideal (needs a setup run at two or more rank
                          counts)
  stragglers              mean epoch time per rank of runs with cluster.stragglers, the slow
                          rank hatched, beside the same setup without stragglers when present
  predicted_vs_measured   dtrain plan's predicted against measured seconds per iteration (needs
                          a sweep made with --plan)

Figures the data cannot support are skipped, saying why; without a language-model run the loss
figures are not attempted. When language models and image models are plotted together, the
accuracy figures draw the image runs and the loss figures the language models (test accuracy
and next-token accuracy share no axis), which a printed note and the legends say. Runs with
identical settings (sweep repeats) are one series: the mean, with the single runs faint or as a
min-max bar. Colours are Okabe-Ito, fixed per algorithm across figures; the compression is the
line style and the marker shape (or the hatch of a bar), other differences the marker's fill.
In the curve figures (accuracy_*, loss_*) of runs that are all one algorithm, such as a sweep
over optimizer.lr, the settings that vary take the colours instead, in the order of their
values (the fill still differs too). A run evaluated once is a dot. Curves that lie on top of
each other are named in the legend ("sync and ps_sync coincide") and drawn nested, wide under
narrow. The points of predicted_vs_measured
are numbered, each number placed clear of the others and of the points.

--predicted-vs-measured CELLS.csv draws one figure, predicted_vs_measured_grid, from
bench/plan_vs_measured.py's cells.csv (into --out, else the CSV's folder): every cell's
predicted against measured seconds per iteration, log-log, coloured by algorithm, with the
y = x line and the 30 % band (the goal's worst error); cells without both numbers are left out.

Exit codes: 0 figures written; 2 a missing folder or file (named), or nothing to plot.
"""

import argparse
import csv
import json
import math
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # files only: no display needed, none opened
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

import dtrain_results as results  # noqa: E402

# Okabe & Ito's colour-blind-safe palette, one colour per algorithm in every figure.
ALGORITHM_COLOURS = {
    "sync": "#0072B2",       # blue
    "ps_sync": "#000000",    # black
    "pipe_sgd": "#D55E00",   # vermillion
    "sapipe": "#E69F00",     # orange
    "pipedream": "#009E73",  # bluish green
    "gossip": "#CC79A7",     # reddish purple
    "d_psgd": "#56B4E9",     # sky blue
    "hpsgd": "#F0E442",      # yellow
    "local_sgd": "#999999",  # grey (the palette has eight colours)
}
UNKNOWN_ALGORITHM_COLOUR = "#666666"
COMPRESSION_LINESTYLES = {"none": "-", "truncate16": "--", "quantize8": ":"}
COMPRESSION_HATCHES = {"none": "////", "truncate16": "\\\\\\\\", "quantize8": "xxxx"}
# Compression is drawn twice, as line style and as marker shape, so that it survives greyscale
# printing and needs no colour vision; what else tells series of one algorithm and compression
# apart (bandwidth, ranks, ...) is the marker's fill.
COMPRESSION_MARKERS = {"none": "o", "truncate16": "s", "quantize8": "^"}
UNKNOWN_COMPRESSION_MARKER = "D"
VARIANT_FILLSTYLES = ["full", "none", "left", "bottom", "right", "top"]
MARKER_SIZE = 5
SINGLE_POINT_MARKER_SIZE = 8  # a one-evaluation run is a dot, not an invisible line
# Two curves whose every point lies within this fraction of the axes of the other's are drawn on
# top of each other: the figure says so (see mark_coinciding).
COINCIDE_TOLERANCE = 0.01
# Paul Tol's muted palette (colour-blind safe too) for the parts of an iteration, so that they
# are not mistaken for algorithms.
PART_STYLES = [
    ("data_s", "data loading", "#DDDDDD"),
    ("forward_s", "forward", "#88CCEE"),
    ("backward_s", "backward", "#44AA99"),
    ("update_s", "update", "#117733"),
    ("compress_s", "compress", "#DDCC77"),
    ("wait_s", "exposed communication (wait)", "#CC6677"),
    ("idle_s", "pipeline idle (bubble: waiting on\nneighbour stages, beyond comm_s)", "#332288"),
    ("other_s", "other (rest of wall time)", "#FFFFFF"),
]
# Settings that name or place a run but do not change what it measures.
IGNORED_SETTINGS = {"name", "dataset.path", "train.log_every_iterations"}
IGNORED_SECTIONS = ("output", "checkpoint")
# The colours of the series of a curve figure whose runs are all one algorithm (an lr sweep),
# in turn: Okabe-Ito again, its yellow last (faint on white).
VARIANT_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000",
                   "#999999", "#F0E442"]
FIGURE_FORMATS = ("png", "svg")
LABEL_WIDTH = 44

plt.rcParams.update({
    "figure.dpi": 100, "savefig.dpi": 150, "font.size": 9, "axes.titlesize": 10,
    "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8, "legend.framealpha": 0.9,
    "svg.fonttype": "none",  # text stays text in the SVGs: smaller, searchable, editable
    "svg.hashsalt": "dtrain",  # the same figure gives the same SVG
})


class SkipFigure(Exception):
    """The data cannot support this figure; the message says why."""


# ---------------------------------------------------------------- finding the runs

def is_sweep_folder(path):
    if any(os.path.isfile(os.path.join(path, f)) for f in ("summary.csv", "sweep.json")):
        return True
    return any(results.looks_like_run_folder(os.path.join(path, entry))
               for entry in os.listdir(path) if os.path.isdir(os.path.join(path, entry)))


def sweep_runs(sweep_dir, notes):
    """The sweep's finished runs; those that failed or were interrupted are noted, not plotted."""
    runs = []
    for entry in sorted(os.listdir(sweep_dir)):
        run_dir = os.path.join(sweep_dir, entry)
        if entry.startswith(".") or not os.path.isdir(run_dir):
            continue
        if not results.looks_like_run_folder(run_dir):
            continue
        status = results.read_status(run_dir)
        if status is not None and status.get("status") != "ok":
            notes.append(f"not plotted: {run_dir} ({status.get('status')}, "
                         f"exit {status.get('exit_code')})")
            continue
        runs.append(results.load_run(run_dir))
    return runs


def collect_runs(paths, notes):
    """(runs, sweep folders) from the command line's paths; ResultsError naming what is wrong."""
    runs, sweeps = [], []
    for path in paths:
        if not os.path.exists(path):
            raise results.ResultsError(f"{path}: no such file or folder")
        if not os.path.isdir(path):
            raise results.ResultsError(f"{path}: not a folder (give a run or a sweep folder)")
        if results.looks_like_run_folder(path):
            runs.append(results.load_run(path))
        elif is_sweep_folder(path):
            sweeps.append(path)
            runs += sweep_runs(path, notes)
        else:
            raise results.ResultsError(
                f"{path}: neither a run folder (no {results.ACCURACY_FILE}) nor a sweep folder "
                "(no summary.csv, no run folders)")
    if not runs:
        raise results.ResultsError(f"{', '.join(paths)}: no finished run to plot")
    return runs, sweeps


def output_folder(args, sweeps, runs):
    if args.out:
        return args.out
    if len(args.paths) == 1:
        return args.paths[0]
    parent = os.path.commonpath([os.path.abspath(run.path) for run in runs]
                                + [os.path.abspath(s) for s in sweeps])
    if parent == os.path.dirname(parent):  # the file-system root: surely not meant
        raise results.ResultsError("the runs share no folder to write the figures into; "
                                   "give --out DIR")
    return parent


# ---------------------------------------------------------------- series and their labels

def flatten(mapping, prefix=""):
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values (as JSON, to be hashable)."""
    flat = {}
    for key, value in (mapping or {}).items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = json.dumps(value, sort_keys=True) if isinstance(value, list) else value
    return flat


def settings_of(run):
    """What a run measured under: its resolved config (less names and paths) and its ranks."""
    flat = {k: v for k, v in flatten(run.config).items()
            if k not in IGNORED_SETTINGS and k.split(".")[0] not in IGNORED_SECTIONS}
    flat["ranks"] = run.ranks
    return flat


def varying_settings(runs):
    """Keys whose values differ between runs. An algorithm's (compression's) own keys count
    only between runs of the same algorithm: sync's `segments: auto` is no difference from
    pipe_sgd's absent one."""
    all_settings = [settings_of(run) for run in runs]
    keys = sorted({k for s in all_settings for k in s})
    varying = []
    for key in keys:
        section = key.split(".")[0]
        if section in ("algorithm", "compression") and not key.endswith(".name"):
            by_name = {}
            for s in all_settings:
                if key in s:
                    by_name.setdefault(s.get(f"{section}.name"), set()).add(str(s[key]))
            if any(len(values) > 1 for values in by_name.values()):
                varying.append(key)
        elif len({str(s.get(key)) for s in all_settings}) > 1:
            varying.append(key)
    return varying


def format_stragglers(value):
    stragglers = json.loads(value) if isinstance(value, str) else value
    return "straggler " + " ".join(f"r{s.get('rank')}×{s.get('slowdown')}" for s in stragglers)


def label_part(key, value, short_names):
    """`bandwidth=1Gbps`; None for a setting at its empty default (no link, no stragglers)."""
    if value in (None, "[]", "", "~"):
        return None
    if key == "cluster.stragglers":
        return format_stragglers(value)
    if key == "ranks":
        return f"{value} rank" + ("s" if value != 1 else "")
    return f"{short_names[key]}={value}"


def short_names_for(keys):
    """Each key by its last part, unless two keys share it."""
    last = [k.split(".")[-1] for k in keys]
    return {k: (k.split(".")[-1] if last.count(k.split(".")[-1]) == 1 else k) for k in keys}


class Series:
    """Runs with identical settings (repeats), drawn as one line, bar or point."""

    def __init__(self, key, runs, label, variant):
        self.key = key
        self.runs = runs
        self.label = label
        self.variant = variant  # the label's parts besides algorithm and compression
        self.algorithm = runs[0].algorithm
        self.compression = runs[0].compression
        self.ranks = runs[0].ranks
        self.colour = ALGORITHM_COLOURS.get(self.algorithm, UNKNOWN_ALGORITHM_COLOUR)
        self.linestyle = COMPRESSION_LINESTYLES.get(self.compression, "-.")
        self.hatch = COMPRESSION_HATCHES.get(self.compression, "....")
        self.marker = COMPRESSION_MARKERS.get(self.compression, UNKNOWN_COMPRESSION_MARKER)
        self.fillstyle = "full"

    def mean(self, function):
        values = [function(run) for run in self.runs]
        return sum(values) / len(values), min(values), max(values)


def make_series(runs, exclude=()):
    """Group runs with the same settings (ignoring the `exclude` keys) and label the groups
    with what tells them apart: "pipe_sgd + quantize8, bandwidth=1Gbps, 2 ranks"."""
    varying = [k for k in varying_settings(runs) if k not in exclude]
    short_names = short_names_for(varying)
    any_compression = any(run.compression != "none" for run in runs)
    groups = {}
    for run in runs:
        settings = settings_of(run)
        key = tuple(sorted((k, str(v)) for k, v in settings.items() if k not in exclude))
        groups.setdefault(key, []).append(run)
    series = []
    for key, group in groups.items():
        settings = settings_of(group[0])
        head = group[0].algorithm + (f" + {group[0].compression}" if any_compression else "")
        others = [k for k in varying if k not in ("algorithm.name", "compression.name", "ranks")]
        parts = [label_part(k, settings.get(k), short_names) for k in others]
        if "ranks" in varying:
            parts.append(label_part("ranks", settings["ranks"], short_names))
        parts = [p for p in parts if p]
        series.append(Series(key, group, ", ".join([head] + parts), tuple(parts)))
    series.sort(key=lambda s: (list(ALGORITHM_COLOURS).index(s.algorithm)
                               if s.algorithm in ALGORITHM_COLOURS else 99,
                               s.compression, s.ranks, s.label))
    variants = sorted({s.variant for s in series})
    for s in series:
        s.fillstyle = VARIANT_FILLSTYLES[variants.index(s.variant) % len(VARIANT_FILLSTYLES)]
    return series


def wrap(label, width=LABEL_WIDTH):
    return "\n".join(textwrap.wrap(label, width)) or label


def legend_outside(ax, handles=None, title=None):
    kwargs = {"handles": handles} if handles else {}
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, title=title,
              **kwargs)


def time_unit(seconds_values):
    """(scale, unit) to show per-iteration times readably: ms below a second."""
    largest = max([v for v in seconds_values if v == v] or [0])
    return (1e3, "ms") if largest < 1 else (1.0, "s")


# ---------------------------------------------------------------- the figures

def mean_curve(runs, x_column, y_column="test_acc"):
    """The mean (x, y) over repeats, evaluation by evaluation."""
    length = min(len(run.accuracy) for run in runs)
    xs = [sum(run.accuracy[i][x_column] for run in runs) / len(runs) for i in range(length)]
    ys = [sum(run.accuracy[i][y_column] for run in runs) / len(runs) for i in range(length)]
    return xs, ys


def context_note(context):
    """What every run shares and no label says, e.g. " (2 ranks)"."""
    return f" ({context['common']})" if context.get("common") else ""


def line_style(s, points):
    """How series `s` is drawn as a line of `points` points: colour by algorithm, line style and
    marker by compression, marker fill by variant; a single point as a larger dot."""
    return dict(color=s.colour, linestyle=s.linestyle, marker=s.marker, fillstyle=s.fillstyle,
                markersize=SINGLE_POINT_MARKER_SIZE if points == 1 else MARKER_SIZE,
                markeredgewidth=1.2)


def name_list(names):
    """"a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def in_axes_fractions(ax, xs, ys):
    """Data points as fractions of the axes box (after autoscaling: get_xlim settles it)."""
    ax.get_xlim(), ax.get_ylim()
    to_axes = ax.transAxes.inverted()
    return [tuple(to_axes.transform(ax.transData.transform((x, y)))) for x, y in zip(xs, ys)]


def coincide(a, b, tolerance=COINCIDE_TOLERANCE):
    return len(a) == len(b) and all(abs(ax_ - bx) <= tolerance and abs(ay - by) <= tolerance
                                    for (ax_, ay), (bx, by) in zip(a, b))


def mark_coinciding(ax, lines, names):
    """Notes ("sync and ps_sync coincide") for groups of `lines` (Line2D, one per series, in
    drawing order) that lie on top of each other, which are restyled so that each stays visible.

    The data is not offset: a shifted curve would show accuracies or times that were not measured,
    and the reader compares exactly those. Instead a group is drawn as nested strokes — the first
    line widest at the bottom, each later one narrower on top — so every colour shows along the
    whole curve, and the note says why the curves look as one."""
    points = [in_axes_fractions(ax, *line.get_data()) for line in lines]
    grouped, notes = set(), []
    for first in range(len(lines)):
        if first in grouped or not points[first]:
            continue
        group = [first] + [other for other in range(first + 1, len(lines))
                           if other not in grouped and coincide(points[first], points[other])]
        if len(group) < 2:
            continue
        grouped.update(group)
        # Each layer shows a rim of the one above it; a large group stays within a few points.
        width_step = min(2.5, 6.0 / (len(group) - 1))
        size_step = min(4.0, 9.0 / (len(group) - 1))
        for depth, index in enumerate(group):
            widening = len(group) - 1 - depth
            line = lines[index]
            line.set_linewidth(line.get_linewidth() + width_step * widening)
            line.set_markersize(line.get_markersize() + size_step * widening)
            line.set_zorder(line.get_zorder() + 0.01 * depth)
        notes.append(f"all {len(group)} curves coincide" if len(group) == len(lines) > 2
                     else f"{name_list([names[i] for i in group])} coincide")
    return notes


def note_handles(notes):
    """Legend entries without a symbol, for notes such as coinciding curves."""
    return [Line2D([], [], linestyle="none", label=wrap(note + " (drawn nested: wide under "
                                                           "narrow)"))
            for note in notes]


def part_order(part):
    """A label part's sort key: by its number ("lr=0.003", "2 ranks") where it has one."""
    text = part.split("=", 1)[1] if "=" in part else part.split(" ", 1)[0]
    try:
        return (0, float(text), part)
    except ValueError:
        return (1, 0.0, part)


def curve_colours(series):
    """Each series' colour in a curve figure: its algorithm's (fixed across figures), unless
    every series is one algorithm and they differ in other settings (a sweep over lr, ranks,
    ...), where the algorithm's colour would tell nothing: then the settings that vary take
    VARIANT_COLOURS in the order of their values (marker fill and label still say them too)."""
    variants = sorted({s.variant for s in series},
                      key=lambda variant: [part_order(part) for part in variant])
    if len({s.algorithm for s in series}) > 1 or len(variants) < 2:
        return [s.colour for s in series]
    return [VARIANT_COLOURS[variants.index(s.variant) % len(VARIANT_COLOURS)] for s in series]


def curve_figure(series, x_column, y_column, labels, context, describe_end=None):
    """One curve per series of accuracy.csv's `y_column` against `x_column`: the mean of the
    repeats, the single repeats faint. `labels` = (xlabel, ylabel, title); `describe_end(y)`,
    when given, adds what the series' last point means to its legend entry."""
    xlabel, ylabel, title = labels
    fig, ax = plt.subplots(figsize=(8, 4.5))
    mean_lines, handles = [], []
    for s, colour in zip(series, curve_colours(series)):
        if len(s.runs) > 1:  # the single repeats, faint, as the spread
            for run in s.runs:
                style = line_style(s, len(run.accuracy))
                style.update(linewidth=0.8, alpha=0.3, color=colour)
                if len(run.accuracy) > 1:
                    style.update(marker="none")
                ax.plot([r[x_column] for r in run.accuracy], [r[y_column] for r in run.accuracy],
                        **style)
        xs, ys = mean_curve(s.runs, x_column, y_column)
        suffix = f" (mean of {len(s.runs)})" if len(s.runs) > 1 else ""
        if describe_end and ys:
            suffix += f": {describe_end(ys[-1])}"
        style = dict(linewidth=1.8, label=wrap(s.label + suffix),
                     **dict(line_style(s, len(xs)), color=colour))
        mean_lines.append(ax.plot(xs, ys, **style)[0])
        # The legend shows the style as drawn before mark_coinciding widens some lines.
        handles.append(Line2D([], [], **style))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title + context_note(context))
    notes = mark_coinciding(ax, mean_lines, [s.label for s in series])
    return fig, ax, handles, note_handles(notes) + kind_handles(context)


def kind_handles(context):
    """A legend note saying which runs a figure of a mixed call left out (see main)."""
    note = context.get("kind_note")
    return [Line2D([], [], linestyle="none", label=wrap(note))] if note else []


def accuracy_figure(series, x_column, xlabel, title, context):
    language_model = context.get("language_model", False)
    ylabel = "next-token accuracy" if language_model else "test accuracy"
    fig, ax, handles, notes = curve_figure(series, x_column, "test_acc", (xlabel, ylabel, title),
                                           context)
    target = context["target"]
    if target is not None:
        handles.append(ax.axhline(target, color="0.4", linestyle=(0, (1, 2)), linewidth=1,
                                  label=f"target {target:g}"))
    legend_outside(ax, handles=handles + notes)
    return fig


def accuracy_vs_time(series, context):
    if not any(run.accuracy for s in series for run in s.runs):
        raise SkipFigure("no accuracy.csv has a row")
    title = "Next-token accuracy over time" if context.get("language_model") else "Time to accuracy"
    return accuracy_figure(series, "wall_s", "training wall-clock time (s, evaluation excluded)",
                           title, context)


def accuracy_vs_epoch(series, context):
    if context.get("language_model"):
        raise SkipFigure("language-model runs are measured in iterations, not epochs "
                         "(see loss_vs_iteration)")
    if not any(len(run.accuracy) >= 2 for s in series for run in s.runs):
        raise SkipFigure("every run was evaluated once: no curve over epochs")
    fig = accuracy_figure(series, "epoch", "epoch", "Test accuracy per epoch", context)
    fig.axes[0].xaxis.get_major_locator().set_params(integer=True)
    return fig


def is_language_model(run):
    """A language-model run (dataset.name text or tokens, or a dataset.block_size): its losses
    are per-token cross-entropies (nats), its test_acc next-token accuracy, its progress counted
    in iterations. The rule is dtrain_results.is_language_model's, shared with sweep.py."""
    return results.is_language_model(run)


def perplexity(loss):
    """exp(loss) of a per-token cross-entropy in nats, element-wise; a diverged loss is inf."""
    with np.errstate(over="ignore"):
        return np.exp(loss)


def loss_of_perplexity(value):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.maximum(value, np.finfo(float).tiny))


class PerplexityLocator(ticker.Locator):
    """Ticks for the perplexity axis. exp is steep, so round perplexities evenly spaced would
    crowd at the top: 1-2-5 steps per decade (spaced like the loss they stand for) when the
    range holds three of them, else 1…9 per decade, else plain steps for a narrow range, over
    which exp is nearly linear."""

    def __call__(self):
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin, vmax):
        low, high = sorted((vmin, vmax))
        if not np.isfinite(high) or high <= 0:
            return []
        for subs in ((1.0, 2.0, 5.0), tuple(range(1, 10))):
            ticks = [t for t in ticker.LogLocator(10, subs=subs).tick_values(max(low, 1.0), high)
                     if low <= t <= high]
            if len(ticks) >= 3:
                return ticks
        return ticker.MaxNLocator(5).tick_values(low, high)


def perplexity_text(loss):
    # No-break spaces keep each name with its number when the legend label wraps.
    return f"perplexity\u00a0{float(perplexity(loss)):.3g} (loss\u00a0{loss:.3f})"


def loss_figure(series, x_column, xlabel, title, context):
    """Validation loss of language-model runs against `x_column`, with a right-hand axis that
    reads the same curves as perplexity: one curve per series, two scales."""
    lm_series = [s for s in series if all(is_language_model(run) for run in s.runs)]
    fig, ax, handles, notes = curve_figure(
        lm_series, x_column, "test_loss",
        (xlabel, "validation loss (per-token cross-entropy, nats)", title), context,
        describe_end=lambda loss: "final " + perplexity_text(loss))
    target_ppl = context.get("target_ppl")
    if target_ppl is not None:  # the sweep's --target-ppl, at the loss it stands for
        handles.append(ax.axhline(math.log(target_ppl), color="0.4", linestyle=(0, (1, 2)),
                                  linewidth=1, label=f"target perplexity {target_ppl:g}"))
    ax.set_ylim(bottom=max(0.0, ax.get_ylim()[0]))  # a cross-entropy is never negative
    right = ax.secondary_yaxis("right", functions=(perplexity, loss_of_perplexity))
    right.set_ylabel("perplexity = exp(loss)")
    right.yaxis.set_major_locator(PerplexityLocator())
    right.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    right.yaxis.set_minor_locator(ticker.NullLocator())
    # The legend goes right of the perplexity axis's labels.
    ax.legend(handles=handles + notes, loc="upper left", bbox_to_anchor=(1.12, 1.0),
              borderaxespad=0)
    return fig


def require_language_models(series):
    if not any(is_language_model(run) for s in series for run in s.runs):
        raise SkipFigure("no language-model run (dataset.name text or tokens)")
    if not any(run.accuracy for s in series for run in s.runs):
        raise SkipFigure("no accuracy.csv has a row")


def loss_vs_time(series, context):
    require_language_models(series)
    return loss_figure(series, "wall_s", "training wall-clock time (s, evaluation excluded)",
                       "Validation loss over time", context)


def loss_vs_iteration(series, context):
    require_language_models(series)
    if not any(len(run.accuracy) >= 2 for s in series for run in s.runs):
        raise SkipFigure("every language-model run was evaluated once: no curve over "
                         "iterations (loss_vs_time shows the points)")
    fig = loss_figure(series, "iteration", "iteration (optimizer steps)",
                      "Validation loss per iteration", context)
    fig.axes[0].xaxis.get_major_locator().set_params(integer=True)
    return fig


# Algorithms whose compute thread also waits for other ranks' compute, not only for
# communication. A pipedream stage's wait_s is its waits for activations and gradients from the
# neighbour stages (the pipeline bubble: they are computing), for its sends to drain and for the
# replicas' all-reduce. pipe_sgd and sapipe are not among them: their wait_s is the wait for the
# all-reduce of gradient t − K, communication that the K iterations did not hide.
PIPELINE_ALGORITHMS = {"pipedream"}


def rank_idle_s(sums):
    """A pipeline rank's idle seconds: the wait beyond all the communication this rank did
    (comm_s: its sends and the replicas' all-reduce). It could not have been waiting on
    communication for longer than there was any, so the rest is waiting on the neighbours'
    compute — a lower bound of the bubble; the remainder of wait_s stays exposed communication."""
    return max(0.0, sums["wait_s"] - sums["comm_s"])


def breakdown_with_idle(run):
    """results.time_breakdown with a pipeline's idle time (idle_s) taken out of wait_s."""
    parts = results.time_breakdown(run)
    parts["idle_s"] = 0.0
    if run.algorithm in PIPELINE_ALGORITHMS:
        idle = [rank_idle_s(sums) / sums["iterations"]
                for sums in results.per_rank_sums(run).values() if sums["iterations"] > 0]
        if idle:
            parts["idle_s"] = sum(idle) / len(idle)
            parts["wait_s"] = max(0.0, parts["wait_s"] - parts["idle_s"])
    return parts


def time_breakdown(series, context):
    breakdowns = [[breakdown_with_idle(run) for run in s.runs] for s in series]
    means = [{part: sum(b[part] for b in group) / len(group) for part in group[0]}
             for group in breakdowns]
    scale, unit = time_unit([sum(m[p] for p, _, _ in PART_STYLES) for m in means]
                            + [m["comm_s"] for m in means])
    # Language models: each bar's text also gives the run's training tokens/s.
    tokens, _ = throughput_unit(context)
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.55 * len(series)))
    for row, (s, mean, group) in enumerate(zip(series, means, breakdowns)):
        left = 0.0
        for part, _, colour in PART_STYLES:
            width = mean[part] * scale
            ax.barh(row, width, left=left, height=0.5, color=colour, edgecolor="0.3",
                    linewidth=0.5, gid=part)
            left += width
        totals = [sum(b[p] for p, _, _ in PART_STYLES) * scale for b in group]
        if len(group) > 1:  # spread of the repeats' totals
            ax.errorbar(left, row, xerr=[[max(0.0, left - min(totals))],
                                         [max(0.0, max(totals) - left)]],
                        color="0.2", capsize=3, linewidth=1)
        rate = (f", {s.mean(lambda run: throughput_of(run, True))[0]:.4g} tokens/s"
                if tokens else "")
        ax.text(max([left] + totals), row, f"  {left:.3g} {unit}{rate}", va="center", fontsize=7,
                gid="bar_total")
        ax.barh(row + 0.38, mean["comm_s"] * scale, height=0.22, facecolor="none",
                edgecolor=s.colour, hatch=s.hatch, linewidth=1.2)
    ax.set_yticks(range(len(series)))
    ax.set_yticklabels([wrap(s.label + (f" (mean of {len(s.runs)})" if len(s.runs) > 1 else ""))
                        for s in series])
    ax.invert_yaxis()
    ax.set_xlim(right=ax.get_xlim()[1] * (1.3 if tokens else 1.08))  # room for the totals' text
    ax.set_xlabel(f"time per iteration ({unit}), mean over ranks")
    ax.set_title("Where the time goes per iteration" + context_note(context)
                 + "\n(hidden communication: the hatched bar's excess over the wait part)")
    any_idle = any(mean["idle_s"] > 0 for mean in means)
    handles = [Patch(facecolor=colour, edgecolor="0.3", label=label)
               for part, label, colour in PART_STYLES if part != "idle_s" or any_idle]
    handles.append(Patch(facecolor="none", edgecolor="0.2", hatch="////",
                         label="all communication (comm_s),\nhidden or not; outline colour:\n"
                               "algorithm, hatch: compression"))
    legend_outside(ax, handles=handles)
    ax.grid(axis="y", visible=False)
    return fig


def setups_over_ranks(runs):
    """(setup, {ranks: runs}) for each setup (the runs grouped without their rank count) that
    was run at two or more rank counts."""
    setups = make_series(runs, exclude=("ranks",))
    result = []
    for setup in setups:
        by_ranks = {}
        for run in setup.runs:
            by_ranks.setdefault(run.ranks, []).append(run)
        if len(by_ranks) >= 2:
            result.append((setup, by_ranks))
    return result


def throughput_of(run, tokens=False):
    """Training samples/s of a run (sweep.py's samples_per_s), or with `tokens` a language
    model's tokens/s (its tokens_per_s: samples/s × dataset.block_size)."""
    if tokens:
        return results.language_model_metrics(run)["tokens_per_s"]
    return results.run_metrics(run)["samples_per_s"]


def throughput_unit(context):
    """(tokens?, unit): tokens/s when every run of the figure is a language model whose
    block_size is known, else samples/s (in a mixed call a language model's sample is one
    window)."""
    tokens = context.get("language_model", False) and all(
        results.block_size(run) for run in context["runs"])
    return tokens, "tokens/s" if tokens else "samples/s"


def scaling_figure(_series, context):
    runs = context["runs"]
    if len({run.ranks for run in runs}) < 2:
        raise SkipFigure("the runs do not vary in ranks")
    setups = setups_over_ranks(runs)
    if not setups:
        raise SkipFigure("no setup was run at two or more rank counts")
    tokens, rate_unit = throughput_unit(context)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    all_ranks = sorted({r for _, by_ranks in setups for r in by_ranks})
    base_ranks = set()
    lines = [[], [], []]  # per panel, one line per setup
    handles = []
    for setup, by_ranks in setups:
        ranks = sorted(by_ranks)
        rates = {k: [throughput_of(run, tokens) for run in by_ranks[k]] for k in ranks}
        means = [sum(rates[k]) / len(rates[k]) for k in ranks]
        spreads = [[m - min(rates[k]) for m, k in zip(means, ranks)],
                   [max(rates[k]) - m for m, k in zip(means, ranks)]]
        base, base_throughput = ranks[0], means[0]
        base_ranks.add(base)
        ideal = [base_throughput * k / base for k in ranks]
        speedup = [m / base_throughput for m in means]
        efficiency = [sp / (k / base) for sp, k in zip(speedup, ranks)]
        style = dict(linewidth=1.8, **line_style(setup, len(ranks)))
        bars = axes[0].errorbar(ranks, means, yerr=spreads, capsize=3, label=wrap(setup.label),
                                **style)
        axes[0].plot(ranks, ideal, color=setup.colour, linestyle=(0, (4, 3)), linewidth=0.8,
                     alpha=0.6)
        lines[0].append(bars.lines[0])
        # The legend shows the style as drawn before mark_coinciding widens some lines.
        handles.append(Line2D([], [], label=wrap(setup.label), **style))
        lines[1].append(axes[1].plot(ranks, speedup, **style)[0])
        lines[2].append(axes[2].plot(ranks, efficiency, **style)[0])
    base_text = "its smallest rank count" if len(base_ranks) > 1 else f"{min(base_ranks)} rank" + (
        "s" if min(base_ranks) > 1 else "")
    lowest = min(base_ranks)
    axes[1].plot(all_ranks, [k / lowest for k in all_ranks], color="0.3", linestyle="--",
                 linewidth=1, label="ideal (linear)")
    axes[2].axhline(1.0, color="0.3", linestyle="--", linewidth=1, label="ideal")
    axes[0].set_ylabel(f"throughput ({rate_unit})")
    axes[0].set_title("Throughput (thin dashed: ideal)")
    axes[1].set_ylabel(f"speedup over {base_text}")
    axes[1].set_title("Speedup")
    axes[2].set_ylabel("scaling efficiency (speedup / rank ratio)")
    axes[2].set_title("Scaling efficiency")
    axes[2].set_ylim(bottom=0)
    for ax in axes:
        ax.set_xlabel("ranks")
        ax.set_xticks(all_ranks)
    axes[0].set_ylim(bottom=0)
    names = [setup.label for setup, _ in setups]
    notes = []
    for ax, panel_lines, panel in zip(axes, lines, ("throughput", "speedup", "efficiency")):
        notes += [f"{panel}: {note}" for note in mark_coinciding(ax, panel_lines, names)]
    handles += [Line2D([], [], color="0.3", linestyle="--", label="ideal (linear)")]
    handles += note_handles(notes)
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.95))
    fig.tight_layout()
    return fig


def without_stragglers_twin(straggler_series, all_series):
    """The series with the same settings but no stragglers, if it was run."""
    wanted = tuple((k, v) for k, v in straggler_series.key if k != "cluster.stragglers")
    for candidate in all_series:
        settings = dict(candidate.key)
        if settings.get("cluster.stragglers", "[]") in ("[]", "None") and wanted == tuple(
                (k, v) for k, v in candidate.key if k != "cluster.stragglers"):
            return candidate
    return None


def mean_epoch_times(series):
    per_run = [results.mean_epoch_time_per_rank(run) for run in series.runs]
    ranks = sorted(per_run[0])
    return ranks, [sum(times.get(r, 0.0) for times in per_run) / len(per_run) for r in ranks]


def stragglers_figure(series, _context):
    slowed = [s for s in series if s.runs[0].stragglers]
    if not slowed:
        raise SkipFigure("no run has cluster.stragglers")
    columns = min(3, len(slowed))
    rows = (len(slowed) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False,
                             sharey=True)
    any_twin = False
    for ax, s in zip(axes.flat, slowed):
        slowdown = {int(x.get("rank", -1)): x.get("slowdown") for x in s.runs[0].stragglers}
        ranks, times = mean_epoch_times(s)
        twin = without_stragglers_twin(s, series)
        offset = 0.2 if twin else 0.0
        width = 0.38 if twin else 0.6
        for rank, value in zip(ranks, times):
            slow = rank in slowdown
            ax.bar(rank - offset, value, width=width, color=s.colour, edgecolor="black",
                   hatch="///" if slow else None, linewidth=0.8)
            if slow:
                ax.annotate(f"×{slowdown[rank]:g}", (rank - offset, value), ha="center",
                            va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
        if twin:
            any_twin = True
            twin_ranks, twin_times = mean_epoch_times(twin)
            ax.bar([r + offset for r in twin_ranks], twin_times, width=width, facecolor="white",
                   edgecolor=s.colour, linewidth=1.2)
        ax.set_xticks(ranks)
        ax.set_xlabel("rank")
        ax.set_title(wrap(s.label, 45), fontsize=9)
        ax.grid(axis="x", visible=False)
    for ax in axes.flat[len(slowed):]:
        ax.set_visible(False)
    axes[0, 0].set_ylim(top=axes[0, 0].get_ylim()[1] * 1.12)  # room for the ×slowdown notes
    for ax in axes[:, 0]:
        ax.set_ylabel("mean epoch time (s)")
    handles = [Patch(facecolor="0.6", edgecolor="black", label="with stragglers"),
               Patch(facecolor="0.6", edgecolor="black", hatch="///",
                     label="the straggler rank (×slowdown)")]
    if any_twin:
        handles.append(Patch(facecolor="white", edgecolor="0.3",
                             label="same run without stragglers"))
    fig.suptitle("Per-rank epoch time with emulated stragglers (bar colour: algorithm)")
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.9))
    fig.tight_layout()
    return fig


def cluster_points(positions, radius=0.015):
    """Greedy groups of indices whose positions (axes fractions) lie within `radius` — a marker's
    width — of the group's first: points drawn on top of each other, whose numbers are written
    once, together."""
    clusters = []
    for index, (x, y) in enumerate(positions):
        for cluster in clusters:
            cx, cy = positions[cluster[0]]
            if abs(x - cx) <= radius and abs(y - cy) <= radius:
                cluster.append(index)
                break
        else:
            clusters.append([index])
    return clusters


# Where a point's label may go, tried in this order: each direction (right-up first, as text
# reads) at growing distances (points); the first place that overlaps no other label, no point,
# no error bar and stays inside the axes wins, else the one that overlaps least.
LABEL_DIRECTIONS = [(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)]
LABEL_DISTANCES = [5, 10, 16, 24, 34, 48]
LABEL_GID = "point_label"


def text_extent(label, renderer):
    """The display box of an annotation's text alone (Annotation's own extent adds its arrow)."""
    label.update_positions(renderer)
    return Text.get_window_extent(label, renderer)


def overlap_area(box, other):
    overlap = Bbox.intersection(box, other)
    return overlap.width * overlap.height if overlap is not None else 0.0


def outside_area(box, frame):
    inside = Bbox.intersection(box, frame)
    return box.width * box.height - (inside.width * inside.height if inside is not None else 0.0)


def place_labels(ax, anchors, texts, obstacles, marker_radius_pt):
    """Annotate each data point of `anchors` with its text, placed greedily (LABEL_DIRECTIONS,
    LABEL_DISTANCES) clear of the `obstacles` (display boxes), of the labels placed before and
    of the axes' edges; a label set off farther than the nearest ring gets a leader line to its
    point."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = []
    for anchor, text in zip(anchors, texts):
        best = None  # (cost, offset, alignment)
        for distance in LABEL_DISTANCES:
            for dx, dy in LABEL_DIRECTIONS:
                alignment = dict(ha="left" if dx > 0 else "right" if dx < 0 else "center",
                                 va="bottom" if dy > 0 else "top" if dy < 0 else "center")
                offset = (dx * distance, dy * distance)
                probe = ax.annotate(text, anchor, xytext=offset, textcoords="offset points",
                                    fontsize=8, **alignment)
                box = text_extent(probe, renderer).padded(1)
                probe.remove()
                cost = (sum(overlap_area(box, other) for other in obstacles + placed)
                        + outside_area(box, frame))
                if best is None or cost < best[0]:
                    best = (cost, offset, alignment)
                if cost == 0:
                    break
            if best[0] == 0:
                break
        _, offset, alignment = best
        leader = (dict(arrowprops=dict(arrowstyle="-", color="0.5", linewidth=0.6, shrinkA=1,
                                       shrinkB=marker_radius_pt))
                  if max(map(abs, offset)) > LABEL_DISTANCES[0] else {})
        label = ax.annotate(text, anchor, xytext=offset, textcoords="offset points", fontsize=8,
                            gid=LABEL_GID, **alignment, **leader)
        placed.append(text_extent(label, renderer).padded(1))


def predicted_vs_measured(series, context):
    plan_rows = context["plan_rows"]
    if not context["sweeps"]:
        raise SkipFigure("no sweep folder given (plan.csv is a sweep's, made with --plan)")
    if not plan_rows:
        raise SkipFigure("no plan.csv in the sweep folder (run scripts/sweep.py with --plan)")
    points = []
    for s in series:
        predicted = [p for p in (results.predicted_iteration_s(plan_rows, run) for run in s.runs)
                     if p is not None]
        if predicted:
            measured = s.mean(lambda run: results.run_metrics(run)["iteration_s"])
            points.append((s, measured, sum(predicted) / len(predicted)))
    if not points:
        raise SkipFigure("no run matches a plan.csv row (ranks, algorithm, compression, settings)")
    scale, unit = time_unit([m for _, (m, _, _), _ in points] + [p for _, _, p in points])
    fig, ax = plt.subplots(figsize=(7.5, 6))
    handles = [Line2D([], [], color="0.3", linestyle="--", label="predicted = measured"),
               Line2D([], [], color="0.6", linestyle=":", label="2× off")]
    marker_size = 7
    for number, (s, (measured, low, high), predicted) in enumerate(points, start=1):
        style = dict(color=s.colour, marker=s.marker, fillstyle=s.fillstyle,
                     markersize=marker_size, linestyle="none")
        ax.errorbar(measured * scale, predicted * scale, capsize=3,
                    xerr=[[(measured - low) * scale], [(high - measured) * scale]], **style)
        handles.append(Line2D([], [], label=wrap(f"{number}: {s.label}"), **style))
    values = [v * scale for _, (m, _, _), p in points for v in (m, p) if v > 0]
    low, high = min(values), max(values)
    logarithmic = high / low > 20
    if logarithmic:
        ax.set_xscale("log")
        ax.set_yscale("log")
        low, high = low / 1.5, high * 1.5
    else:
        low, high = 0, high * 1.15
    ax.plot([low, high], [low, high], color="0.3", linestyle="--", linewidth=1)
    ax.plot([low, high], [2 * low, 2 * high], color="0.6", linestyle=":", linewidth=1)
    ax.plot([low, high], [low / 2, high / 2], color="0.6", linestyle=":", linewidth=1)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    # Number the points (the legend says which is which), one text per pile of points, each
    # text placed where it covers no other text, point or error bar.
    to_pixels = ax.transData.transform
    anchors = [(m * scale, p * scale) for _, (m, _, _), p in points]
    to_axes = ax.transAxes.inverted()
    clusters = cluster_points([to_axes.transform(to_pixels(a)) for a in anchors])
    pixels_per_point = fig.dpi / 72
    radius = (marker_size / 2 + 1) * pixels_per_point
    obstacles = []
    for (x, y), (_, (_, fastest, slowest), _) in zip(anchors, points):
        px, py = to_pixels((x, y))
        obstacles.append(Bbox.from_extents(px - radius, py - radius, px + radius, py + radius))
        left, right = to_pixels((fastest * scale, y))[0], to_pixels((slowest * scale, y))[0]
        if right - left > 2 * radius:  # the repeats' spread, its caps 3 points high
            cap = 3 * pixels_per_point
            obstacles.append(Bbox.from_extents(left - 1, py - cap, right + 1, py + cap))
    place_labels(ax, [anchors[min(c, key=lambda i: anchors[i][0])] for c in clusters],
                 [", ".join(str(i + 1) for i in c) for c in clusters], obstacles,
                 marker_size / 2 + 1)
    ax.set_xlabel(f"measured time per iteration ({unit}; slowest rank, timing.csv)")
    ax.set_ylabel(f"predicted time per iteration ({unit}; dtrain plan)")
    ax.set_title("Timing model against measurement" + context_note(context)
                 + (", log scales" if logarithmic else ""))
    legend_outside(ax, handles=handles)
    return fig


# Which runs a figure draws: ACCURACY figures the image runs, or the language models when all
# runs are language models; LOSS figures the language models (not attempted without one); ALL
# figures every run.
ALL, ACCURACY, LOSS = "all", "accuracy", "loss"
FIGURES = [
    ("accuracy_vs_time", accuracy_vs_time, ACCURACY),
    ("accuracy_vs_epoch", accuracy_vs_epoch, ACCURACY),
    ("loss_vs_time", loss_vs_time, LOSS),
    ("loss_vs_iteration", loss_vs_iteration, LOSS),
    ("time_breakdown", time_breakdown, ALL),
    ("scaling", scaling_figure, ALL),
    ("stragglers", stragglers_figure, ALL),
    ("predicted_vs_measured", predicted_vs_measured, ALL),
]


def runs_by_figure_kind(runs):
    """{ALL, ACCURACY, LOSS: the runs those figures draw} and the note of a mixed call (None
    when the runs are all of one kind)."""
    language_models = [run for run in runs if is_language_model(run)]
    images = [run for run in runs if not is_language_model(run)]
    chosen = {ALL: runs, ACCURACY: images or language_models, LOSS: language_models}
    note = None
    if images and language_models:
        note = ("language models and image models together: accuracy_vs_time and "
                f"accuracy_vs_epoch draw the {len(images)} image-model run(s), loss_vs_time and "
                f"loss_vs_iteration the {len(language_models)} language-model run(s); plot the "
                "language models alone for their next-token accuracy")
    return chosen, note


# ---------------------------------------------------------------- main

def sweep_target(sweeps, key="target"):
    """The --target (key "target_ppl": --target-ppl) of the sweep (sweep.json), to draw as a
    line."""
    for sweep in sweeps:
        path = os.path.join(sweep, "sweep.json")
        if os.path.isfile(path):
            with open(path) as handle:
                target = (json.load(handle).get("definition") or {}).get(key)
            if target is not None:
                return target
    return None


def save(fig, out_dir, name):
    paths = []
    for extension in FIGURE_FORMATS:
        path = os.path.join(out_dir, f"{name}.{extension}")
        fig.savefig(path, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


def common_ranks(runs):
    """"2 ranks" when every run had that many: said once in the titles, not in every label."""
    rank_counts = {run.ranks for run in runs}
    if len(rank_counts) != 1:
        return ""
    return f"{min(rank_counts)} rank" + ("s" if min(rank_counts) > 1 else "")


def kind_context(kind, kind_runs, total_runs, mixed):
    """What a figure of `kind` needs to know of its runs: the runs, their common rank count,
    whether they are language models, and in a mixed call the legend's note of who is drawn."""
    note = None
    if mixed and kind == ACCURACY:
        note = (f"image-model runs only ({len(kind_runs)} of {total_runs}); the language models "
                "are in the loss figures")
    elif mixed and kind == LOSS:
        note = (f"language-model runs only ({len(kind_runs)} of {total_runs}); the image models "
                "are in the accuracy figures")
    return {"runs": kind_runs, "common": common_ranks(kind_runs), "kind_note": note,
            "language_model": all(is_language_model(run) for run in kind_runs)}


def predicted_vs_measured_grid(cells_csv, out_dir):
    """bench/plan_vs_measured.py's cells: predicted against measured, one colour per algorithm."""

    with open(cells_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    points = {}
    for row in rows:
        try:
            measured, predicted = float(row["measured_s"]), float(row["predicted_s"])
        except (KeyError, ValueError):
            continue
        if measured > 0 and predicted > 0:
            points.setdefault(row["algorithm"], []).append((measured, predicted))
    if not points:
        raise SkipFigure(f"{cells_csv} has no cell with both a prediction and a measurement")
    values = [v for cells in points.values() for cell in cells for v in cell]
    scale, unit = time_unit(values)
    fig, ax = plt.subplots(figsize=(7.5, 6))
    for algorithm, cells in points.items():
        ax.plot([m * scale for m, _ in cells], [p * scale for _, p in cells], linestyle="none",
                marker="o", markersize=6, alpha=0.85, label=f"{algorithm} ({len(cells)})",
                color=ALGORITHM_COLOURS.get(algorithm, UNKNOWN_ALGORITHM_COLOUR),
                markeredgecolor="0.2")
    low, high = min(values) * scale / 1.5, max(values) * scale * 1.5
    ax.plot([low, high], [low, high], color="0.3", linestyle="--", linewidth=1,
            label="predicted = measured")
    ax.plot([low, high], [1.3 * low, 1.3 * high], color="0.6", linestyle=":", linewidth=1,
            label="±30 %")
    ax.plot([low, high], [0.7 * low, 0.7 * high], color="0.6", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel(f"measured time per iteration ({unit})")
    ax.set_ylabel(f"predicted time per iteration ({unit}, dtrain plan)")
    ax.set_title(f"dtrain plan against measured: {sum(map(len, points.values()))} cells")
    ax.legend(fontsize=8, loc="upper left")
    return save(fig, out_dir, "predicted_vs_measured_grid")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="plot.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", metavar="DIR", help="a sweep folder or run folders")
    parser.add_argument("--predicted-vs-measured", metavar="CSV",
                        help="bench/plan_vs_measured.py's cells.csv: its grid's figure only")
    parser.add_argument("--out", help="where the figures go (default: next to the runs)")
    return parser.parse_args(argv)


def main(argv):
    args = parse_arguments(argv)
    if args.predicted_vs_measured:
        if not os.path.isfile(args.predicted_vs_measured):
            print(f"plot.py: error: --predicted-vs-measured: no file {args.predicted_vs_measured}",
                  file=sys.stderr)
            return 2
        out_dir = args.out or os.path.dirname(os.path.abspath(args.predicted_vs_measured))
        os.makedirs(out_dir, exist_ok=True)
        try:
            paths = predicted_vs_measured_grid(args.predicted_vs_measured, out_dir)
        except SkipFigure as reason:
            print(f"plot.py: error: {reason}", file=sys.stderr)
            return 2
        for path in paths:
            print(path)
        return 0
    if not args.paths:
        print("plot.py: error: give a sweep folder, run folders or --predicted-vs-measured CSV",
              file=sys.stderr)
        return 2
    notes = []
    try:
        runs, sweeps = collect_runs(args.paths, notes)
        out_dir = output_folder(args, sweeps, runs)
        plan_rows = [row for sweep in sweeps for row in results.read_plan(sweep)]
    except results.ResultsError as error:
        print(f"plot.py: error: {error}", file=sys.stderr)
        return 2
    for note in notes:
        print(note)
    os.makedirs(out_dir, exist_ok=True)
    context = {"sweeps": sweeps, "plan_rows": plan_rows, "target": sweep_target(sweeps),
               "target_ppl": sweep_target(sweeps, "target_ppl")}
    chosen, kind_note = runs_by_figure_kind(runs)
    if kind_note:
        print(f"note: {kind_note}")
    series = {kind: make_series(kind_runs) for kind, kind_runs in chosen.items() if kind_runs}
    for name, draw, kind in FIGURES:
        if kind not in series:  # loss figures, and no language model among the runs
            continue
        figure_context = dict(context, **kind_context(kind, chosen[kind], len(runs),
                                                      mixed=kind_note is not None))
        try:
            fig = draw(series[kind], figure_context)
        except SkipFigure as reason:
            print(f"skipped {name}: {reason}")
            continue
        for path in save(fig, out_dir, name):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
