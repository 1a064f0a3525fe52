#!/usr/bin/python3
"""scripts/plot.py's figures, built from small synthetic runs (no dtrain needed) and checked on
the matplotlib objects: what a reader must be able to tell apart is drawn apart.

Usage: test_plot_figures.py REPO_ROOT — exits 77 (skipped) when Debian's python3 lacks yaml or
matplotlib.
"""

import contextlib
import io
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
             seconds_per_epoch=10.0, timing=None, bandwidth=None, status=None):
    """A results.Run as load_run would give it: one evaluation and one timing row per rank per
    epoch; `timing` overrides the phases' seconds of every row."""
    config = {"algorithm": {"name": algorithm}, "compression": {"name": compression},
              "dataset": {"batch_size": 32}, "name": name}
    if bandwidth:
        config["cluster"] = {"bandwidth": bandwidth}
    accuracy_rows = [dict(epoch=e + 1, iteration=10 * (e + 1), wall_s=seconds_per_epoch * (e + 1),
                          train_loss=1.0, train_acc=a, test_loss=1.0, test_acc=a)
                     for e, a in enumerate(accuracy)]
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
            run_dir = os.path.join(folder, "run")
            os.makedirs(run_dir)
            run = make_run("r", accuracy=(0.5,))
            with open(os.path.join(run_dir, "config.yaml"), "w") as handle:
                yaml.safe_dump(run.config, handle)
            for name, columns, rows in (("accuracy.csv", results.ACCURACY_COLUMNS, run.accuracy),
                                        ("timing.csv", results.TIMING_COLUMNS, run.timing)):
                with open(os.path.join(run_dir, name), "w") as handle:
                    handle.write(",".join(columns) + "\n")
                    for row in rows:
                        handle.write(",".join(str(row[c]) for c in columns) + "\n")
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                self.assertEqual(plot.main([run_dir]), 0)
            self.assertIn("time_breakdown.svg", printed.getvalue())
            for name in ("accuracy_vs_time", "time_breakdown"):
                self.assertTrue(os.path.getsize(os.path.join(run_dir, name + ".png")) > 0)


if __name__ == "__main__":
    unittest.main()
