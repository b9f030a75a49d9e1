#!/usr/bin/python3
"""Tests of plot_results.py on synthetic results (ctest runs them with /usr/bin/python3): plain tick
labels on log axes, the description as title, no clipped breakdown bar, plurals, the servers plot."""
import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_results  # noqa: E402

HEADER = ["index", "key", "sweep.ps", "model", "platform", "strategy", "batch", "data", "status", "workers", "nodes",
          "ps_servers", "throughput_samples_per_s", "efficiency", "iteration_time_s", "compute_s",
          "communication_s", "exposed_communication_s", "io_stall_s", "bottleneck"]


def rows_for(strategy="ps", workers=(1, 2, 4, 8, 16, 32, 64), servers=(1, 2, 4), platforms=("piz-daint",),
             tall_io_s=0.0):
    """Rows of a sweep: throughput saturating at 8 x servers workers, and one tall I/O stall at 64 workers."""
    rows = []
    for platform in platforms:
        for w in workers:
            for ps in servers:
                t = 100.0 * w / (1 + w / (8 * ps))
                it = 32 * w / t
                rows.append({"index": len(rows), "key": f"ps={ps}", "sweep.ps": ps, "model": "resnet50",
                             "platform": platform, "strategy": strategy, "batch": 32, "data": "synthetic",
                             "status": "ok", "workers": w, "nodes": w, "ps_servers": ps if strategy == "ps" else 0,
                             "throughput_samples_per_s": t, "efficiency": t / (100 * w), "iteration_time_s": it,
                             "compute_s": 0.3, "communication_s": 0.1, "exposed_communication_s": max(0.0, it - 0.3),
                             "io_stall_s": tall_io_s if w == workers[-1] else 0.0, "bottleneck": ""})
    return rows


class Captured:
    """Replaces plot_results.save: keeps each figure (drawn) by stem instead of writing files."""

    def __init__(self):
        self.figures = {}

    def __call__(self, fig, out_dir, stem, written):
        fig.canvas.draw()
        self.figures[stem] = fig
        written.append(stem)


class PlotTests(unittest.TestCase):
    def setUp(self):
        self.saved = plot_results.save
        self.captured = Captured()
        plot_results.save = self.captured

    def tearDown(self):
        plot_results.save = self.saved
        plot_results.plt.close("all")

    def plot(self, rows, name="One PS on 10 GbE: how many servers?"):
        groups = plot_results.group(rows, plot_results.series_columns(rows))
        written = []
        plot_results.plot_scaling(rows, groups, "/nonexistent", name, written)
        plot_results.plot_efficiency(rows, groups, "/nonexistent", name, written)
        plot_results.plot_breakdown(rows, groups, "/nonexistent", name, written)
        if len({r["platform"] for r in rows}) > 1:
            plot_results.plot_platforms(rows, "/nonexistent", name, written)
        if len({r["ps_servers"] for r in plot_results.ps_rows(rows)}) > 1:
            plot_results.plot_servers(rows, "/nonexistent", name, written)
        return self.captured.figures

    def test_log_axes_have_plain_tick_labels(self):
        figs = self.plot(rows_for())
        for stem in ("scaling", "efficiency", "servers"):
            ax = figs[stem].axes[0]
            labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            self.assertIn("1", labels, stem)
            if stem != "servers":
                self.assertIn("64", labels, stem)
            for text in labels + [t.get_text() for t in ax.get_yticklabels()]:
                self.assertNotIn("^", text, stem)
                self.assertNotIn("$", text, stem)

    def test_title_is_the_description(self):
        figs = self.plot(rows_for(), name="One PS on 10 GbE: how many servers?")
        self.assertIn("One PS on 10 GbE: how many servers?", figs["scaling"].axes[0].get_title())
        self.assertIn("One PS on 10 GbE: how many servers?", figs["breakdown"]._suptitle.get_text())

    def test_tall_breakdown_bars_are_not_clipped(self):
        figs = self.plot(rows_for(tall_io_s=5.0))
        for ax in figs["breakdown"].axes:
            top = ax.get_ylim()[1]
            for bar in ax.patches:
                self.assertLessEqual(bar.get_y() + bar.get_height(), top)
        # The tallest stack (64 workers, 5 s of I/O stall) is the one that must fit.
        tallest = max(b.get_y() + b.get_height() for ax in figs["breakdown"].axes for b in ax.patches)
        self.assertGreater(tallest, 5000)

    def test_one_worker_is_singular(self):
        figs = self.plot(rows_for(strategy="allreduce-ring", workers=(1, 8), servers=(1,),
                                  platforms=("piz-daint", "taiwania2-ib")))
        legend = [t.get_text() for t in figs["platforms"].axes[0].get_legend().get_texts()]
        self.assertIn("1 worker", legend)
        self.assertIn("8 workers", legend)
        self.assertEqual(plot_results.plural(1, "server"), "1 server")
        self.assertEqual(plot_results.plural(2.0, "server"), "2 servers")

    def test_servers_plot_only_for_ps_sweeps_over_server_counts(self):
        figs = self.plot(rows_for())
        ax = figs["servers"].axes[0]
        self.assertEqual(ax.get_xlabel(), "parameter servers")
        self.assertEqual(len(ax.get_lines()), 7)  # one line per worker count
        self.captured.figures.clear()
        figs = self.plot(rows_for(strategy="allreduce-ring", servers=(1,)))
        self.assertNotIn("servers", figs)

    def test_servers_plot_for_ps_auto(self):
        # `ps: auto` picks one server count per worker count: the plot shows each choice.
        rows = [r for r in rows_for(servers=(1, 2, 4)) if r["ps_servers"] == min(4, max(1, r["workers"] // 8))]
        figs = self.plot(rows)
        ax = figs["servers"].axes[0]
        xs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
        self.assertEqual(xs, [1, 2, 4])

    def test_script_writes_the_files_it_names(self):
        plot_results.save = self.saved
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=HEADER)
                w.writeheader()
                w.writerows(rows_for())
            sys.argv = ["plot_results.py", path, "--name", "a title"]
            plot_results.main()
            for stem in ("scaling", "efficiency", "breakdown", "servers"):
                self.assertTrue(os.path.isfile(os.path.join(d, f"{stem}.png")), stem)


if __name__ == "__main__":
    unittest.main()
