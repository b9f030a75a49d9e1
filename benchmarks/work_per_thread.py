#!/usr/bin/env python3
"""Work per thread: what a oneDNN pass costs beyond its work, from batch sweeps (docs/calibration.md,
"Work per thread").

For every (layer shape, pass) timed at several batches, fits t = a + b * batch (least squares):
  a  the pass's fixed cost, paid however little work each thread has (fork, join barrier, set-up);
  b  the cost per sample, which the threads share.
Prints, per pass and per thread count, the median a over shapes and the median speedup of b from 1 to 2
threads. Two sources:
  --db FILE   a calibration database with the probe swept at 1 and 2 threads (benchmarks/work_per_thread.sh);
  DeepBench's published KNL7250 sheet (68 cores, Intel MKL 2017; ../shared/reference/deepbench/conv.csv),
              the shapes it times at batch 8 and 16: a = 2 t(8) - t(16).
"""
import argparse
import collections
import csv
import json
import os
import re
import statistics


def fit_line(points):
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def from_db(path, max_batch):
    doc = json.load(open(path))
    sweeps = collections.defaultdict(lambda: collections.defaultdict(list))  # threads -> (shape|pass) -> points
    ops = {}
    for host in doc["hosts"]:
        if host.get("instances", 1) != 1 or host.get("backend", "onednn") != "onednn":
            continue
        for sig, passes in host["entries"].items():
            m = re.search(r"src=(\d+)", sig)
            if not m:
                continue
            batch = int(m.group(1))
            if batch > max_batch:
                continue
            shape = re.sub(r"(src|dst)=\d+", r"\1=N", sig)
            for p, e in passes.items():
                if e.get("status") != "measured":
                    continue
                sweeps[host["threads"]][shape + "|" + p].append((batch, e["time_s"]))
                ops[shape + "|" + p] = e["op"] + "/" + p
    fits = {t: {k: fit_line(v) for k, v in s.items() if len({x for x, _ in v}) >= 3} for t, s in sweeps.items()}
    print(f"{path}: straight-line fits over batch 1-{max_batch}")
    print(f"{'op/pass':28} {'shapes':>6} {'a 1 thread us':>14} {'a 2 threads us':>15} {'b speedup 1->2':>15}")
    by_op = collections.defaultdict(lambda: collections.defaultdict(list))
    for key, (a1, b1) in fits.get(1, {}).items():
        by_op[ops[key]]["a1"].append(a1 * 1e6)
        if key in fits.get(2, {}):
            a2, b2 = fits[2][key]
            by_op[ops[key]]["a2"].append(a2 * 1e6)
            if b2 > 0:
                by_op[ops[key]]["s"].append(b1 / b2)
    every = collections.defaultdict(list)
    for op in sorted(by_op):
        d = by_op[op]
        med = lambda v: f"{statistics.median(v):.1f}" if v else "-"
        print(f"{op:28} {len(d['a1']):>6} {med(d['a1']):>14} {med(d['a2']):>15} {med(d['s']):>15}")
        for k in ("a1", "a2", "s"):
            every[k] += d[k]
    med = lambda v: f"{statistics.median(v):.1f}" if v else "-"
    print(f"{'all':28} {len(every['a1']):>6} {med(every['a1']):>14} {med(every['a2']):>15} {med(every['s']):>15}")


def from_deepbench(path):
    rows = [r for r in csv.DictReader(open(path)) if r["gpu"] == "KNL7250"]
    by_shape = collections.defaultdict(dict)
    for r in rows:
        key = tuple(r[k] for k in ("W", "H", "C", "K", "R", "S", "pad_w", "pad_h", "stride_w", "stride_h"))
        by_shape[key][int(r["N"])] = r
    out = collections.defaultdict(list)
    for byn in by_shape.values():
        if 8 not in byn or 16 not in byn:
            continue
        for p, col in (("fwd", "fwd_ms"), ("bwd_data", "bwd_input_ms"), ("bwd_weights", "bwd_weights_ms")):
            try:
                t8, t16 = float(byn[8][col]) * 1e-3, float(byn[16][col]) * 1e-3
            except ValueError:
                continue  # "N/A*": the first layer has no data gradient
            out[p].append(2 * t8 - t16)
    print(f"{path}: DeepBench KNL7250 (68 threads), shapes timed at batch 8 and 16, a = 2 t(8) - t(16)")
    everything = []
    for p, v in out.items():
        q = statistics.quantiles([x * 1e6 for x in v], n=4)
        print(f"  {p:12} {len(v):3} shapes: median a {statistics.median(v) * 1e6:6.1f} us (quartiles {q[0]:.0f}, {q[2]:.0f})")
        everything += v
    print(f"  all          {len(everything):3} passes: median a {statistics.median(everything) * 1e6:6.1f} us")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="calibration database with the batch sweep")
    ap.add_argument("--max-batch", type=int, action="append",
                    help="fit batches up to this (repeatable; default: 8, where fixed costs show, and 64)")
    ap.add_argument("--deepbench", default=os.path.join(here, "..", "..", "shared", "reference", "deepbench", "conv.csv"))
    args = ap.parse_args()
    if args.db:
        for max_batch in args.max_batch or [8, 64]:
            from_db(args.db, max_batch)
    if os.path.exists(args.deepbench):
        from_deepbench(args.deepbench)
    else:
        print(f"{args.deepbench}: not found (DeepBench's published sheets, ../shared/reference/deepbench)")


if __name__ == "__main__":
    main()
