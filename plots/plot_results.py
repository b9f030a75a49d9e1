#!/usr/bin/python3
"""Plots of dtsim results: scaling, efficiency, time breakdown, platform comparison and
predicted-vs-measured. Input: a sweep/compare output directory or results.csv, or an accuracy.csv.
Writes PNG and SVG files into --out and prints each path written (one per line).
Run with Debian's /usr/bin/python3 (matplotlib); `dtsim plot` calls this script."""
import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

LABEL_COLUMNS = ["model", "platform", "strategy", "batch", "data"]
BREAKDOWN = [("compute_s", "compute (fwd+bwd+update)", "#4c72b0"),
             ("exposed_communication_s", "exposed communication", "#dd8452"),
             ("io_stall_s", "input I/O stall", "#55a868")]
MAX_SERIES = 12
MAX_BARS = 48
HEADROOM = 1.08  # breakdown axes reach this factor above the tallest bar or marker
PS_STRATEGIES = ("ps", "ps-replicated", "ps-async")


def plural(n, noun):
    """'1 worker', '2 workers'."""
    n = int(n) if float(n).is_integer() else n
    return f"{n} {noun}" + ("" if n == 1 else "s")


def plain_number(v, _pos=None):
    """Tick label without exponents: 1, 2, 64, 1,500, 0.5."""
    if v >= 1 and float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:g}"


class PlainLogFormatter(LogFormatter):
    """Labels the ticks matplotlib's log formatter would label (minor ones too on a short axis), as
    plain numbers."""

    def __call__(self, x, pos=None):
        return plain_number(x) if super().__call__(x, pos) else ""


def plain_log_axis(axis):
    """A log axis labelled 1, 2, 4 ... 64 (not 2^0 ... 2^6, not 10^2)."""
    base = axis.get_transform().base
    axis.set_major_formatter(PlainLogFormatter(base=base))
    axis.set_minor_formatter(PlainLogFormatter(base=base, labelOnlyBase=False))


def fail(msg, code=2):
    print(f"plot_results.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def to_float(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


def save(fig, out_dir, stem, written):
    for ext in ("png", "svg"):
        p = os.path.join(out_dir, f"{stem}.{ext}")
        fig.savefig(p, dpi=130, bbox_inches="tight")
        written.append(p)
    plt.close(fig)


def series_columns(rows):
    """Columns (other than workers) whose values differ between rows: they name the series."""
    cols = [c for c in LABEL_COLUMNS if len({r.get(c, "") for r in rows}) > 1]
    for c in rows[0].keys():
        if c.startswith("sweep.") and c != "sweep.workers" and c[6:] not in LABEL_COLUMNS:
            if len({r.get(c, "") for r in rows}) > 1:
                cols.append(c)
    return cols


def short(c):
    return c[6:] if c.startswith("sweep.") else c


def group(rows, cols):
    groups = {}
    for r in rows:
        key = ", ".join(f"{short(c)}={r.get(c, '')}" for c in cols) if cols else "prediction"
        groups.setdefault(key, []).append(r)
    for k in groups:
        groups[k].sort(key=lambda r: to_float(r["workers"]) or 0)
    return groups


def title_of(rows, name):
    """The plot's kind and the scenario's description (or name) on the first line, then the labels
    shared by every row (model, platform ...)."""
    fixed = [f"{c} {rows[0][c]}" for c in LABEL_COLUMNS if rows[0].get(c) and len({r.get(c) for r in rows}) == 1]
    return f"{name}\n" + ", ".join(fixed) if fixed else name


def plot_scaling(rows, groups, out_dir, name, written):
    fig, ax = plt.subplots(figsize=(8, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, rs) in enumerate(list(groups.items())[:MAX_SERIES]):
        w = [to_float(r["workers"]) for r in rs]
        t = [to_float(r["throughput_samples_per_s"]) for r in rs]
        pts = [(a, b) for a, b in zip(w, t) if a and b]
        if not pts:
            continue
        c = colors[i % len(colors)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=c, label=label)
        w0, t0 = pts[0]
        ax.plot([p[0] for p in pts], [t0 * p[0] / w0 for p in pts], ":", color=c, alpha=0.6)
    ax.plot([], [], "k:", alpha=0.6, label="ideal (linear from the smallest point)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("workers (GPUs or processes)")
    ax.set_ylabel("throughput (samples/s, whole job)")
    ax.set_title(title_of(rows, f"Scaling - {name}"), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out_dir, "scaling", written)


def plot_efficiency(rows, groups, out_dir, name, written):
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, rs in list(groups.items())[:MAX_SERIES]:
        pts = []
        base = rs[0]
        w0, t0 = to_float(base["workers"]), to_float(base["throughput_samples_per_s"])
        for r in rs:
            w, t, e = to_float(r["workers"]), to_float(r["throughput_samples_per_s"]), to_float(r.get("efficiency"))
            if not w or t is None:
                continue
            if not e and w0 and t0:
                e = t / (t0 * w / w0)
            pts.append((w, 100 * e))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    ax.axhline(100, color="k", ls=":", alpha=0.6, label="ideal")
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("workers (GPUs or processes)")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title(title_of(rows, f"Efficiency - {name}"), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out_dir, "efficiency", written)


def plot_breakdown(rows, groups, out_dir, name, written):
    """One panel per series (shared time axis), one stacked bar per worker count."""
    items = list(groups.items())[:MAX_SERIES]
    n = len(items)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 1, 3.4 * nrows + 1), sharey=True, squeeze=False)
    top = 0.0
    for k, (label, rs) in enumerate(items):
        ax = axes[k // ncols][k % ncols]
        if len(rs) > MAX_BARS:
            rs = rs[:: math.ceil(len(rs) / MAX_BARS)]
        x = list(range(len(rs)))
        bottom = [0.0] * len(rs)
        for col, text, color in BREAKDOWN:
            vals = [1000 * (to_float(r.get(col)) or 0) for r in rs]
            ax.bar(x, vals, bottom=bottom, color=color, label=text)
            bottom = [b + v for b, v in zip(bottom, vals)]
        it = [1000 * (to_float(r.get("iteration_time_s")) or 0) for r in rs]
        ax.plot(x, it, "k_", markersize=12, mew=2, label="simulated iteration time")
        top = max(top, *bottom, *it)
        ax.set_xticks(x)
        ax.set_xticklabels([r["workers"] for r in rs], fontsize=8)
        ax.set_title(label.replace(", ", "\n") if len(label) > 40 else label, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        if k % ncols == 0:
            ax.set_ylabel("time per iteration (ms)")
        if k // ncols == nrows - 1:
            ax.set_xlabel("workers")
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    # The shared y axis reaches above the tallest stack in any panel: no bar is cut at the top.
    axes[0][0].set_ylim(0, top * HEADROOM if top > 0 else 1)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(title_of(rows, f"Time per iteration - {name}"), fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    save(fig, out_dir, "breakdown", written)


def plot_platforms(rows, out_dir, name, written):
    platforms = list(dict.fromkeys(r["platform"] for r in rows))
    workers = sorted({to_float(r["workers"]) for r in rows if to_float(r["workers"])})
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(platforms) * max(1, len(workers)) / 2 + 3), 5))
    width = 0.8 / max(1, len(workers))
    top = 0.0
    for j, w in enumerate(workers):
        vals = []
        for p in platforms:
            match = [to_float(r["throughput_samples_per_s"]) or 0 for r in rows
                     if r["platform"] == p and to_float(r["workers"]) == w]
            vals.append(max(match) if match else 0)
        xs = [i + (j - (len(workers) - 1) / 2) * width for i in range(len(platforms))]
        b = ax.bar(xs, vals, width=width, label=plural(w, "worker"))
        ax.bar_label(b, fmt="%.0f", fontsize=7)
        top = max([top] + vals)
    ax.set_xticks(range(len(platforms)))
    ax.set_xticklabels(platforms, rotation=20, ha="right")
    ax.set_ylim(0, top * HEADROOM if top > 0 else 1)  # room for the value labels above the bars
    ax.set_ylabel("throughput (samples/s, whole job)")
    others = [short(c) for c in series_columns(rows) if c not in ("platform", "sweep.platform")]
    best = f" (best over {', '.join(others)})" if others else ""
    ax.set_title(title_of(rows, f"Platform comparison{best} - {name}"), fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out_dir, "platforms", written)


def ps_rows(rows):
    """Parameter-server rows with a server count."""
    return [r for r in rows if r.get("strategy", "") in PS_STRATEGIES and to_float(r.get("ps_servers"))]


def plot_servers(rows, out_dir, name, written):
    """Throughput against the number of parameter servers ("how many servers do I need?"): one line
    per worker count (and per other swept field); a `ps: auto` sweep shows the count it chose."""
    rows = ps_rows(rows)
    cols = [c for c in series_columns(rows) if c not in ("sweep.ps",)]
    lines = {}
    for r in rows:
        key = ", ".join([plural(to_float(r["workers"]), "worker")] + [f"{short(c)}={r.get(c, '')}" for c in cols])
        lines.setdefault(key, []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for label, rs in list(lines.items())[:MAX_SERIES]:
        pts = sorted((to_float(r["ps_servers"]), to_float(r["throughput_samples_per_s"])) for r in rs)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("parameter servers")
    ax.set_ylabel("throughput (samples/s, whole job)")
    ax.set_title(title_of(rows, f"Throughput vs parameter servers - {name}"), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out_dir, "servers", written)


def plot_accuracy(rows, out_dir, written):
    studies = list(dict.fromkeys(r["study"] for r in rows))
    fig, ax = plt.subplots(figsize=(6.5, 6))
    lo, hi = float("inf"), 0.0
    for s in studies:
        rs = [r for r in rows if r["study"] == s and to_float(r["predicted"]) and to_float(r["measured"])]
        for variant in sorted({r.get("variant", "") for r in rs}):
            vs = [r for r in rs if r.get("variant", "") == variant]
            m = [to_float(r["measured"]) for r in vs]
            p = [to_float(r["predicted"]) for r in vs]
            if not m:
                continue
            lo, hi = min(lo, *m, *p), max(hi, *m, *p)
            ax.plot(m, p, "o", label=f"{s} {variant}".strip(), alpha=0.8)
    if hi <= 0:
        fail("accuracy file has no row with both measured and predicted values")
    xs = [lo / 1.5, hi * 1.5]
    ax.plot(xs, xs, "k-", lw=1, label="predicted = measured")
    ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="k", alpha=0.08, label="+-10%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("measured throughput (images/s)")
    ax.set_ylabel("dtsim predicted throughput (images/s)")
    ax.set_title("Predicted vs measured (open-measurements.yaml)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out_dir, "predicted_vs_measured", written)
    # Per study: throughput against workers, measured as markers, predicted as lines.
    for s in studies:
        rs = [r for r in rows if r["study"] == s]
        fig, ax = plt.subplots(figsize=(7.5, 5))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, variant in enumerate(sorted({r.get("variant", "") for r in rs})):
            vs = sorted([r for r in rs if r.get("variant", "") == variant], key=lambda r: float(r["workers"]))
            w = [float(r["workers"]) for r in vs]
            c = colors[i % len(colors)]
            ax.plot(w, [to_float(r["measured"]) for r in vs], "s", color=c, label=f"measured {variant}".strip())
            ax.plot(w, [to_float(r["predicted"]) for r in vs], "-", color=c, label=f"dtsim {variant}".strip())
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_axis(ax.xaxis)
        plain_log_axis(ax.yaxis)
        ax.set_xlabel("workers (GPUs)")
        ax.set_ylabel("throughput (images/s)")
        ax.set_title(f"{s}: measured (markers) vs dtsim (lines)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, out_dir, f"accuracy_{s}", written)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="sweep/compare output directory, results.csv, or accuracy.csv")
    ap.add_argument("--out", default=None, help="directory for the PNG/SVG files (default: beside the input)")
    ap.add_argument("--name", default=None,
                    help="title of the plots, e.g. the scenario's description (default: the directory name)")
    args = ap.parse_args()
    path = args.results
    if os.path.isdir(path):
        cand = [os.path.join(path, f) for f in ("results.csv", "accuracy.csv")]
        cand = [c for c in cand if os.path.isfile(c)]
        if not cand:
            fail(f"{path}: holds neither results.csv nor accuracy.csv")
        path = cand[0]
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    out_dir = args.out or os.path.dirname(os.path.abspath(path))
    os.makedirs(out_dir, exist_ok=True)
    name = args.name or os.path.basename(os.path.dirname(os.path.abspath(path)))
    rows = read_csv(path)
    written = []
    if rows and "measured" in rows[0] and "predicted" in rows[0]:
        plot_accuracy(rows, out_dir, written)
    else:
        if rows and "throughput_samples_per_s" not in rows[0]:
            fail(f"{path}: not a dtsim results file (no throughput_samples_per_s column)")
        ok = [r for r in rows if r.get("status", "ok") == "ok" and to_float(r.get("throughput_samples_per_s"))]
        if not ok:
            fail(f"{path}: no successful result rows to plot")
        groups = group(ok, series_columns(ok))
        if len({r["workers"] for r in ok}) > 1:
            plot_scaling(ok, groups, out_dir, name, written)
            plot_efficiency(ok, groups, out_dir, name, written)
        plot_breakdown(ok, groups, out_dir, name, written)
        if len({r.get("platform", "") for r in ok}) > 1:
            plot_platforms(ok, out_dir, name, written)
        if len({r["ps_servers"] for r in ps_rows(ok)}) > 1:
            plot_servers(ok, out_dir, name, written)
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
