#!/usr/bin/python3
"""Timeline of a dtsim trace (the Chrome/Perfetto JSON written by `dtsim predict --trace`): one row per
worker (compute slices by phase, input waits), per exchange track and per parameter-server shard
(concurrent flows drawn translucent), and below them each traced link's utilisation over time.
Writes timeline.png and timeline.svg into --out and prints each path written (one per line).
Run with Debian's /usr/bin/python3 (matplotlib); `dtsim plot --timeline` calls this script."""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GROUP_ORDER = [1, 3, 2, 4]  # workers, gradient exchange, parameter servers, input I/O
NETWORK_GROUP = 5
COLOURS = {"forward": "#4c72b0", "backward": "#55a868", "update": "#8172b2", "allreduce": "#dd8452",
           "pull": "#c44e52", "push": "#dd8452", "io": "#937860", "other": "#999999"}
MAX_ROWS = 40          # slice rows shown (the first workers, then the other tracks)
MAX_COUNTERS = 8       # link utilisation curves shown (the busiest by mean)
US_PER_MS = 1000.0


def fail(msg, code=2):
    print(f"plot_timeline.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def colour(name, cat):
    if cat == "compute":
        for key in ("forward", "backward", "update"):
            if key in name:
                return COLOURS[key]
    return COLOURS.get(cat, COLOURS["other"])


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a readable trace-event JSON file ({e})")
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        fail(f"{path}: no traceEvents list (expected a trace written by dtsim predict --trace)")
    return events


def collect(events):
    names, slices, opened, counters = {}, {}, {}, {}
    for e in events:
        ph, pid, tid = e.get("ph"), e.get("pid"), e.get("tid", 0)
        if ph == "M" and e.get("name") == "thread_name":
            names[(pid, tid)] = e.get("args", {}).get("name", f"track {tid}")
        elif ph == "X":
            slices.setdefault((pid, tid), []).append((e["ts"], e["ts"] + e.get("dur", 0), e.get("name", ""),
                                                      e.get("cat", ""), False))
        elif ph == "b":
            opened[e["id"]] = e
        elif ph == "e" and e.get("id") in opened:
            b = opened.pop(e["id"])
            slices.setdefault((b["pid"], b.get("tid", 0)), []).append((b["ts"], e["ts"], b.get("name", ""),
                                                                        b.get("cat", ""), True))
        elif ph == "C" and pid == NETWORK_GROUP:
            value = next(iter(e.get("args", {}).values()), None)
            if isinstance(value, (int, float)) and math.isfinite(value):
                counters.setdefault(e.get("name", "link"), []).append((e["ts"], value))
    return names, slices, counters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="")
    args = ap.parse_args()
    names, slices, counters = collect(load(args.trace))
    if not slices:
        fail(f"{args.trace}: the trace holds no slices to draw")
    os.makedirs(args.out, exist_ok=True)
    # Tracks with nothing but iteration markers (ranks folded onto a representative: dtsim predict's layout
    # folds, docs/parallel-layouts.md) are left out.
    slices = {k: v for k, v in slices.items() if any(s[3] != "iteration" for s in v)}
    if not slices:
        fail(f"{args.trace}: the trace holds no slices to draw")
    tracks = sorted(slices, key=lambda k: (GROUP_ORDER.index(k[0]) if k[0] in GROUP_ORDER else 9, k[1]))
    hidden = max(0, len(tracks) - MAX_ROWS)
    tracks = tracks[:MAX_ROWS]
    t0 = min(s[0] for k in tracks for s in slices[k])
    t1 = max(s[1] for k in tracks for s in slices[k])
    series = sorted(counters.items(), key=lambda kv: -sum(v for _, v in kv[1]) / max(1, len(kv[1])))[:MAX_COUNTERS]

    rows = len(tracks)
    heights = [max(2.0, 0.28 * rows)] + ([2.2] if series else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(12, sum(heights) + 1.0), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    ax = axes[0][0]
    for row, key in enumerate(tracks):
        for start, end, name, cat, concurrent in slices[key]:
            if cat == "iteration":
                ax.plot([(start - t0) / US_PER_MS] * 2, [row - 0.45, row + 0.45], color="black", lw=0.6)
                continue
            ax.barh(row, (end - start) / US_PER_MS, left=(start - t0) / US_PER_MS, height=0.8,
                    color=colour(name, cat), alpha=0.35 if concurrent else 1.0, linewidth=0)
    ax.set_yticks(range(rows))
    ax.set_yticklabels([names.get(k, f"track {k[1]}") for k in tracks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (t1 - t0) / US_PER_MS)
    title = args.name or os.path.basename(args.trace)
    more = f" ({hidden} more tracks not shown)" if hidden else ""
    ax.set_title(f"{title}: simulated timeline{more}", loc="left")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in
               (COLOURS["forward"], COLOURS["backward"], COLOURS["update"], COLOURS["allreduce"], COLOURS["pull"],
                COLOURS["io"])]
    ax.legend(handles, ["forward", "backward", "update", "allreduce / push", "pull", "input I/O"], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if series:
        cax = axes[1][0]
        for name, points in series:
            points.sort()
            xs = [(t - t0) / US_PER_MS for t, _ in points] + [(t1 - t0) / US_PER_MS]
            ys = [v for _, v in points] + [points[-1][1]]
            cax.step(xs, ys, where="post", lw=1, label=name)
        cax.set_ylabel("link utilisation (%)")
        cax.set_ylim(0, 105)
        cax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1][0].set_xlabel("time since the first traced iteration (ms)")
    written = []
    for ext in ("png", "svg"):
        p = os.path.join(args.out, f"timeline.{ext}")
        fig.savefig(p, dpi=130, bbox_inches="tight")
        written.append(p)
    plt.close(fig)
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
