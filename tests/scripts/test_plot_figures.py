#!/usr/bin/python3
"""scripts/plot.py's figures, built from small synthetic runs (no dtrain needed) and checked on
the matplotlib objects: what a reader must be able to tell apart is drawn apart.

Usage: test_plot_figures.py REPO_ROOT — exits 77 (skipped) when Debian's python3 lacks yaml or
matplotlib.
"""

import contextlib
import io
import math
import os
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
try:
    import matplotlib
    import yaml
except ImportError as missing:
    print(f"SKIP: {sys.executable} lacks {missing.name} (apt-get install python3-{missing.name})")
    sys.exit(77)
matplotlib.use("Agg")  # files only, as plot.py
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dtrain_results as results  # noqa: E402
import plot  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.text import Text  # noqa: E402

TIMING_ROW = dict(data_s=0.1, forward_s=1.0, backward_s=2.0, update_s=0.2, compress_s=0.0,
                  comm_s=0.5, wait_s=0.3)


def make_run(name, algorithm="sync", compression="none", ranks=1, accuracy=(0.5, 0.7, 0.8),
             seconds_per_epoch=10.0, timing=None, bandwidth=None, status=None, dataset=None,
             losses=None, lr=None, block_size=None):
    """A results.Run as load_run would give it: one evaluation and one timing row per rank per
    epoch; `timing` overrides the phases' seconds of every row. `dataset` names the dataset
    ("text": a language model), `losses` the test_loss of each evaluation (1.0 without),
    `block_size` the tokens of a language model's sample, `lr` optimizer.lr."""
    config = {"algorithm": {"name": algorithm}, "compression": {"name": compression},
              "dataset": {"batch_size": 32}, "name": name}
    if dataset:
        config["dataset"]["name"] = dataset
    if block_size:
        config["dataset"]["block_size"] = block_size
    if lr is not None:
        config["optimizer"] = {"lr": lr}
    if bandwidth:
        config["cluster"] = {"bandwidth": bandwidth}
    losses = losses or [1.0] * len(accuracy)
    accuracy_rows = [dict(epoch=e + 1, iteration=10 * (e + 1), wall_s=seconds_per_epoch * (e + 1),
                          train_loss=1.0, train_acc=a, test_loss=loss, test_acc=a)
                     for e, (a, loss) in enumerate(zip(accuracy, losses))]
    phases = dict(TIMING_ROW, **(timing or {}))
    timing_rows = [dict(rank=r, epoch=e + 1, iterations=10, wall_s=seconds_per_epoch, **phases)
                   for e in range(len(accuracy)) for r in range(ranks)]
    return results.Run(f"runs/{name}", config, {"world_size": ranks}, accuracy_rows, timing_rows,
                       status)


def context(runs, **more):
    return dict({"runs": runs, "sweeps": [], "plan_rows": [], "target": None, "common": ""},
                **more)


def legend_texts(fig):
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + fig.legends
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def data_lines(ax):
    """The lines that draw series (labelled ones: the mean curves)."""
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")
            and line.get_label() in {t.get_text() for t in ax.get_legend().get_texts()}]


class Figures(unittest.TestCase):
    def tearDown(self):
        plot.plt.close("all")

    def accuracy_figure(self, runs):
        return plot.accuracy_vs_time(plot.make_series(runs), context(runs))

    def test_compression_is_marker_and_line_style(self):
        runs = [make_run("a"), make_run("b", compression="quantize8", accuracy=(0.4, 0.6, 0.75)),
                make_run("c", compression="truncate16", accuracy=(0.3, 0.5, 0.7))]
        for figure in (plot.accuracy_vs_time, plot.accuracy_vs_epoch):
            fig = figure(plot.make_series(runs), context(runs))
            lines = data_lines(fig.axes[0])
            self.assertEqual(len(lines), 3)
            self.assertEqual(len({line.get_marker() for line in lines}), 3,
                             "each compression its own marker")
            self.assertEqual(len({line.get_linestyle() for line in lines}), 3,
                             "each compression its own line style")
            self.assertEqual(len({to_rgba(line.get_color()) for line in lines}), 1,
                             "one algorithm, one colour")

    def test_variants_of_one_compression_differ_in_marker_fill(self):
        runs = [make_run("a", bandwidth="1Gbps"),
                make_run("b", bandwidth="10Gbps", accuracy=(0.2, 0.3, 0.4))]
        lines = data_lines(self.accuracy_figure(runs).axes[0])
        self.assertEqual(len({line.get_marker() for line in lines}), 1)
        self.assertEqual(len({line.get_fillstyle() for line in lines}), 2)

    def test_a_single_evaluation_is_a_dot(self):
        runs = [make_run("once", accuracy=(0.6,)), make_run("twice", algorithm="pipe_sgd",
                                                            accuracy=(0.5, 0.7))]
        fig = self.accuracy_figure(runs)
        fig.canvas.draw()
        ax = fig.axes[0]
        single = [line for line in data_lines(ax) if len(line.get_xdata()) == 1]
        self.assertEqual(len(single), 1)
        dot = single[0]
        self.assertTrue(dot.get_visible())
        self.assertNotIn(dot.get_marker(), ("None", "none", "", " ", None))
        self.assertGreater(dot.get_markersize(), 0)
        # drawn inside the axes
        x, y = ax.transAxes.inverted().transform(
            ax.transData.transform((dot.get_xdata()[0], dot.get_ydata()[0])))
        self.assertTrue(0 <= x <= 1 and 0 <= y <= 1, (x, y))

    def test_identical_curves_are_noted_and_both_visible(self):
        runs = [make_run("s"), make_run("p", algorithm="ps_sync"),
                make_run("q", algorithm="pipe_sgd", accuracy=(0.2, 0.4, 0.6))]
        fig = self.accuracy_figure(runs)
        notes = [t for t in legend_texts(fig) if "coincide" in t]
        self.assertEqual(len(notes), 1, legend_texts(fig))
        self.assertIn("sync and ps_sync coincide", notes[0].replace("\n", " "))
        self.assertNotIn("pipe_sgd", notes[0])
        sync, ps_sync = [line for line in data_lines(fig.axes[0])
                         if line.get_label() in ("sync", "ps_sync")]
        # The one drawn first is wider and below, so both colours show.
        self.assertGreater(sync.get_linewidth(), ps_sync.get_linewidth())
        self.assertLess(sync.get_zorder(), ps_sync.get_zorder())

    def test_a_whole_figure_of_identical_curves_is_one_short_note(self):
        runs = [make_run("s"), make_run("p", algorithm="ps_sync"),
                make_run("q", algorithm="pipe_sgd")]
        notes = [t for t in legend_texts(self.accuracy_figure(runs)) if "coincide" in t]
        self.assertEqual(len(notes), 1)
        self.assertIn("all 3 curves coincide", notes[0])

    def test_different_curves_get_no_note(self):
        runs = [make_run("s"), make_run("p", algorithm="ps_sync", accuracy=(0.4, 0.6, 0.7))]
        for figure in (plot.accuracy_vs_time, plot.accuracy_vs_epoch):
            fig = figure(plot.make_series(runs), context(runs))
            self.assertFalse([t for t in legend_texts(fig) if "coincide" in t])

    def test_coinciding_scaling_curves_are_noted(self):
        runs = [make_run(f"{a}{r}", algorithm=a, ranks=r, seconds_per_epoch=10.0 / r)
                for a in ("sync", "ps_sync") for r in (1, 2)]
        fig = plot.scaling_figure(plot.make_series(runs), context(runs))
        self.assertTrue([t for t in legend_texts(fig) if "coincide" in t], legend_texts(fig))

    def test_pipeline_idle_has_its_own_colour(self):
        runs = [make_run("pd", algorithm="pipedream", ranks=2,
                         timing=dict(wait_s=2.0, comm_s=0.5)),
                make_run("ps", algorithm="pipe_sgd", timing=dict(wait_s=2.0, comm_s=0.5))]
        series = plot.make_series(runs)
        fig = plot.time_breakdown(series, context(runs))
        patches = {}
        for patch in fig.axes[0].patches:
            if patch.get_gid():
                patches.setdefault(patch.get_gid(), []).append(patch)
        self.assertEqual([s.algorithm for s in series], ["pipe_sgd", "pipedream"])
        pipe_sgd_idle, pipedream_idle = patches["idle_s"]
        pipe_sgd_wait, pipedream_wait = patches["wait_s"]
        # pipedream's idle is the wait beyond its communication: 1.5 s of the 2 s, 0.5 s stay
        # exposed communication (per iteration of 1 s: the figure is in seconds).
        self.assertAlmostEqual(pipedream_idle.get_width() + pipedream_wait.get_width(), 0.2)
        self.assertAlmostEqual(pipedream_idle.get_width(), 0.15)
        self.assertEqual(pipe_sgd_idle.get_width(), 0.0, "pipe_sgd's wait is communication")
        self.assertAlmostEqual(pipe_sgd_wait.get_width(), 0.2)
        self.assertNotEqual(to_rgba(pipedream_idle.get_facecolor()),
                            to_rgba(pipedream_wait.get_facecolor()))
        self.assertTrue([t for t in legend_texts(fig) if "idle" in t])

    def test_no_idle_legend_without_a_pipeline(self):
        runs = [make_run("s")]
        fig = plot.time_breakdown(plot.make_series(runs), context(runs))
        self.assertFalse([t for t in legend_texts(fig) if "idle" in t])

    def test_predicted_vs_measured_labels_do_not_overlap(self):
        # Many points close together (and two on top of each other): their number labels must
        # not cover each other nor any point.
        runs, plan = [], []
        grid = [(a, c) for a in ("sync", "ps_sync", "pipe_sgd", "local_sgd", "hpsgd")
                for c in ("none", "quantize8", "truncate16")]
        for index, (algorithm, compression) in enumerate(grid):
            seconds = 10.0 * (1 + 0.01 * index)  # 0.1 s per iteration, 1 % apart
            runs.append(make_run(f"r{index}", algorithm, compression,
                                 seconds_per_epoch=seconds, status={"status": "ok",
                                                                    "plan_settings": ""}))
            plan.append({"ranks": 1, "algorithm": algorithm, "compression": compression,
                         "settings": "", "predicted_iteration_s": 1.0 + 0.012 * (index // 2)})
        fig = plot.predicted_vs_measured(plot.make_series(runs),
                                         context(runs, sweeps=["sweep"], plan_rows=plan))
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = [t for t in ax.texts if t.get_gid() == plot.LABEL_GID]
        self.assertGreater(len(labels), 1)
        numbers = sorted(int(n) for t in labels for n in t.get_text().split(", "))
        self.assertEqual(numbers, list(range(1, len(grid) + 1)), "every point numbered once")
        boxes = []
        for label in labels:
            label.update_positions(renderer)
            boxes.append(Text.get_window_extent(label, renderer))
        for i, box in enumerate(boxes):
            for other in boxes[i + 1:]:
                self.assertFalse(box.overlaps(other), f"labels overlap: {box} {other}")
        radius = 3.5 * fig.dpi / 72  # the markers' half size
        points = [ax.transData.transform(xy) for line in ax.get_lines()
                  for xy in line.get_xydata()
                  if line.get_marker() in plot.COMPRESSION_MARKERS.values()]
        self.assertEqual(len(points), len(grid))
        for box in boxes:
            for x, y in points:
                marker = plot.Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)
                self.assertFalse(box.overlaps(marker), f"a label covers the point at {x}, {y}")
            self.assertTrue(ax.get_window_extent(renderer).contains(box.x0, box.y0))

    def test_command_line_writes_the_figures(self):
        with tempfile.TemporaryDirectory() as folder:
            run_dir = write_run_folder(folder, make_run("r", accuracy=(0.5,)))
            printed = run_plot([run_dir])
            self.assertIn("time_breakdown.svg", printed)
            for name in ("accuracy_vs_time", "time_breakdown"):
                self.assertTrue(os.path.getsize(os.path.join(run_dir, name + ".png")) > 0)
            # Image runs: the loss figures are not attempted, not even reported as skipped.
            self.assertNotIn("loss_vs", printed)
            self.assertIn(">test accuracy<", read(run_dir, "accuracy_vs_time.svg"))


def write_run_folder(folder, run):
    """`run` (make_run's) as the folder dtrain writes: config.yaml and the two CSVs."""
    run_dir = os.path.join(folder, run.name)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "config.yaml"), "w") as handle:
        yaml.safe_dump(run.config, handle)
    for name, columns, rows in (("accuracy.csv", results.ACCURACY_COLUMNS, run.accuracy),
                                ("timing.csv", results.TIMING_COLUMNS, run.timing)):
        with open(os.path.join(run_dir, name), "w") as handle:
            handle.write(",".join(columns) + "\n")
            for row in rows:
                handle.write(",".join(str(row[c]) for c in columns) + "\n")
    return run_dir


def run_plot(argv):
    """plot.py's main on `argv`, which must succeed; what it printed."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = plot.main(argv)
    if status != 0:
        raise AssertionError(f"plot.py {argv}: exit {status}: {printed.getvalue()}")
    return printed.getvalue()


def read(folder, name):
    """A written figure's SVG: its text stays text (svg.fonttype none), so labels can be found."""
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


LM_LOSSES = (5.5, 3.1, 2.3, 1.9)


def make_lm_run(name, losses=LM_LOSSES, **more):
    """A language-model run: dataset.name text, one evaluation per loss."""
    accuracy = [0.1 + 0.1 * i for i in range(len(losses))]
    return make_run(name, dataset="text", losses=list(losses), accuracy=accuracy, **more)


class LanguageModelFigures(unittest.TestCase):
    def tearDown(self):
        plot.plt.close("all")

    def loss_figures(self, runs):
        series = plot.make_series(runs)
        ctx = context(runs, language_model=True)
        return [plot.loss_vs_time(series, ctx), plot.loss_vs_iteration(series, ctx)]

    def test_perplexity_axis_reads_exp_of_the_plotted_loss(self):
        runs = [make_lm_run("s"), make_lm_run("p", algorithm="pipe_sgd",
                                              losses=(5.5, 2.9, 2.0, 1.6))]
        for fig, xlabel in zip(self.loss_figures(runs), ("training wall-clock time",
                                                         "iteration (optimizer steps)")):
            fig.canvas.draw()
            ax = fig.axes[0]
            self.assertIn(xlabel, ax.get_xlabel())
            self.assertIn("validation loss", ax.get_ylabel())
            self.assertIn("nats", ax.get_ylabel())
            (right,) = ax.child_axes
            self.assertEqual(right.get_ylabel(), "perplexity = exp(loss)")
            lines = data_lines(ax)
            self.assertEqual(len(lines), 2)
            self.assertEqual(sorted(tuple(line.get_ydata()) for line in lines),
                             sorted([(5.5, 2.9, 2.0, 1.6), LM_LOSSES]))
            for line in lines:
                for x, loss in line.get_xydata():
                    # Where the loss is drawn, the perplexity axis reads exp(loss).
                    height = ax.transData.transform((x, loss))[1]
                    read_off = right.transData.inverted().transform((0, height))[1]
                    self.assertAlmostEqual(read_off, math.exp(loss), places=6)
            ticks = [t for t in right.get_yticks() if right.get_ylim()[0] <= t
                     <= right.get_ylim()[1]]
            self.assertGreaterEqual(len(ticks), 3, ticks)
            # The legend gives each series' final perplexity: exp of its last loss.
            finals = [t.replace("\n", " ").replace("\u00a0", " ") for t in legend_texts(fig)]
            self.assertIn(f"perplexity {math.exp(1.9):.3g} (loss 1.900)", " ".join(finals))
            self.assertIn(f"perplexity {math.exp(1.6):.3g} (loss 1.600)", " ".join(finals))
            # Okabe-Ito per algorithm, as in the accuracy figures.
            self.assertEqual({to_rgba(line.get_color()) for line in lines},
                             {to_rgba(plot.ALGORITHM_COLOURS[a]) for a in ("sync", "pipe_sgd")})

    def test_repeats_are_one_mean_curve(self):
        runs = [make_lm_run("r1", losses=(4.0, 2.0)), make_lm_run("r2", losses=(3.0, 1.0))]
        fig = self.loss_figures(runs)[1]
        (line,) = data_lines(fig.axes[0])
        self.assertEqual(list(line.get_ydata()), [3.5, 1.5])
        self.assertIn("mean of 2", line.get_label())
        self.assertIn(f"perplexity\u00a0{math.exp(1.5):.3g}", line.get_label())

    def test_compression_is_marker_and_line_style_and_one_evaluation_a_dot(self):
        runs = [make_lm_run("a"), make_lm_run("b", compression="quantize8", losses=(4.2,))]
        fig = self.loss_figures(runs)[0]
        lines = data_lines(fig.axes[0])
        self.assertEqual(len({line.get_marker() for line in lines}), 2)
        self.assertEqual(len({line.get_linestyle() for line in lines}), 2)
        (dot,) = [line for line in lines if len(line.get_xdata()) == 1]
        self.assertEqual(dot.get_markersize(), plot.SINGLE_POINT_MARKER_SIZE)

    def test_coinciding_loss_curves_are_named(self):
        runs = [make_lm_run("s"), make_lm_run("p", algorithm="ps_sync")]
        notes = [t for t in legend_texts(self.loss_figures(runs)[0]) if "coincide" in t]
        self.assertEqual(len(notes), 1)
        self.assertIn("sync and ps_sync coincide", notes[0].replace("\n", " "))

    def test_perplexity_ticks_stay_inside_any_range(self):
        locator = plot.PerplexityLocator()
        for low, high in ((1.0, 30000.0), (4.0, 250.0), (4.05, 4.27), (1.0, 1.001)):
            ticks = [t for t in locator.tick_values(low, high) if low <= t <= high]
            self.assertGreaterEqual(len(ticks), 3, (low, high, ticks))
        self.assertEqual(list(locator.tick_values(1.0, float("inf"))), [])

    def test_image_runs_get_no_loss_figure(self):
        runs = [make_run("i")]
        with self.assertRaisesRegex(plot.SkipFigure, "no language-model run"):
            plot.loss_vs_time(plot.make_series(runs), context(runs))

    def test_one_algorithms_lr_sweep_is_coloured_by_lr(self):
        # An lr sweep of one algorithm: its colour would tell the curves nothing, the lr does.
        runs = [make_lm_run(f"lr{lr}", lr=lr, losses=(5.5, 2 + 10 * lr))
                for lr in (0.03, 0.001, 0.01)]
        for fig in self.loss_figures(runs):
            lines = data_lines(fig.axes[0])
            colours = {line.get_label().split(":")[0]: to_rgba(line.get_color()) for line in lines}
            self.assertEqual(len(set(colours.values())), 3, colours)
            # In the order of the values, from the palette's first colour.
            self.assertEqual([colours[f"sync, lr={lr}"] for lr in (0.001, 0.01, 0.03)],
                             [to_rgba(c) for c in plot.VARIANT_COLOURS[:3]])
        # Two algorithms: each keeps its own colour, as in every other figure.
        runs.append(make_lm_run("p", algorithm="pipe_sgd", lr=0.01))
        lines = data_lines(self.loss_figures(runs)[0].axes[0])
        self.assertEqual({to_rgba(line.get_color()) for line in lines},
                         {to_rgba(plot.ALGORITHM_COLOURS[a]) for a in ("sync", "pipe_sgd")})

    def test_target_perplexity_is_a_line_at_its_loss(self):
        runs = [make_lm_run("s")]
        fig = plot.loss_vs_time(plot.make_series(runs),
                                context(runs, language_model=True, target_ppl=10.0))
        (target,) = [line for line in fig.axes[0].get_lines()
                     if line.get_label() == "target perplexity 10"]
        self.assertAlmostEqual(target.get_ydata()[0], math.log(10.0))

    def test_language_model_throughput_is_tokens_per_s(self):
        # Epochs of 10 iterations of 32 windows of 64 tokens, 10 s each on 1 rank: 2048
        # tokens/s; 5 s each on 2 ranks: 4096.
        runs = [make_lm_run(f"r{r}", ranks=r, seconds_per_epoch=10.0 / r, block_size=64)
                for r in (1, 2)]
        for run, expected in zip(runs, (2048.0, 4096.0)):
            metrics = results.language_model_metrics(run)
            self.assertAlmostEqual(metrics["tokens_per_s"], expected)
            self.assertAlmostEqual(metrics["final_test_ppl"], math.exp(LM_LOSSES[-1]))
            self.assertAlmostEqual(metrics["best_test_ppl"], math.exp(min(LM_LOSSES)))
        ctx = context(runs, language_model=True)
        fig = plot.scaling_figure(plot.make_series(runs), ctx)
        self.assertEqual(fig.axes[0].get_ylabel(), "throughput (tokens/s)")
        self.assertEqual(sorted(fig.axes[0].get_lines()[0].get_ydata()), [2048.0, 4096.0])
        fig = plot.time_breakdown(plot.make_series(runs), ctx)
        totals = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "bar_total"]
        self.assertEqual(len(totals), 2)
        self.assertTrue(any(t.endswith(", 2048 tokens/s") for t in totals), totals)
        # Image runs: samples/s, no tokens.
        images = [make_run(f"i{r}", ranks=r, seconds_per_epoch=10.0 / r) for r in (1, 2)]
        fig = plot.scaling_figure(plot.make_series(images), context(images))
        self.assertEqual(fig.axes[0].get_ylabel(), "throughput (samples/s)")
        self.assertEqual(results.language_model_metrics(images[0]),
                         {c: "" for c in results.LANGUAGE_MODEL_COLUMNS})
        fig = plot.time_breakdown(plot.make_series(images), context(images))
        self.assertFalse([t for t in fig.axes[0].texts if "tokens/s" in t.get_text()])

    def test_a_block_size_makes_a_language_model(self):
        self.assertTrue(results.is_language_model(make_run("w", dataset="windows",
                                                           block_size=16)))
        self.assertTrue(results.is_language_model(make_run("t", dataset="tokens")))
        self.assertFalse(results.is_language_model(make_run("i", dataset="synthetic")))

    def test_command_line_on_language_models(self):
        with tempfile.TemporaryDirectory() as folder:
            for run in (make_lm_run("sync"), make_lm_run("pipe", algorithm="pipe_sgd")):
                write_run_folder(folder, run)
            printed = run_plot([folder])
            for name in ("accuracy_vs_time", "loss_vs_time", "loss_vs_iteration",
                         "time_breakdown"):
                for extension in ("png", "svg"):
                    path = os.path.join(folder, f"{name}.{extension}")
                    self.assertIn(path, printed)
                    self.assertGreater(os.path.getsize(path), 0)
            self.assertIn("skipped accuracy_vs_epoch: language-model runs are measured in "
                          "iterations", printed)
            self.assertFalse(os.path.exists(os.path.join(folder, "accuracy_vs_epoch.png")))
            self.assertNotIn("note:", printed)
            self.assertIn(">next-token accuracy<", read(folder, "accuracy_vs_time.svg"))
            self.assertNotIn(">test accuracy<", read(folder, "accuracy_vs_time.svg"))
            for name in ("loss_vs_time.svg", "loss_vs_iteration.svg"):
                self.assertIn("perplexity = exp(loss)", read(folder, name))

    def test_command_line_on_language_models_evaluated_once(self):
        with tempfile.TemporaryDirectory() as folder:
            run_dir = write_run_folder(folder, make_lm_run("once", losses=(2.5,)))
            printed = run_plot([run_dir])
            self.assertIn("skipped loss_vs_iteration: every language-model run was evaluated "
                          "once", printed)
            self.assertIn(os.path.join(run_dir, "loss_vs_time.svg"), printed)

    def test_command_line_on_mixed_kinds_draws_each_from_its_own_runs(self):
        with tempfile.TemporaryDirectory() as folder:
            write_run_folder(folder, make_run("image", accuracy=(0.5, 0.7)))
            write_run_folder(folder, make_lm_run("lm"))
            printed = run_plot([folder])
            self.assertIn("note: language models and image models together", printed)
            self.assertNotIn("skipped accuracy", printed)
            self.assertNotIn("skipped loss", printed)
            for name in ("accuracy_vs_time", "accuracy_vs_epoch", "loss_vs_time",
                         "loss_vs_iteration", "time_breakdown"):
                self.assertIn(os.path.join(folder, f"{name}.svg"), printed)
            accuracy = read(folder, "accuracy_vs_time.svg")
            self.assertIn(">test accuracy<", accuracy)
            self.assertNotIn("next-token", accuracy)
            self.assertIn("image-model runs only (1 of 2)", accuracy)
            self.assertIn("language-model runs only (1 of 2)", read(folder, "loss_vs_time.svg"))


if __name__ == "__main__":
    unittest.main()
