#!/usr/bin/env python3
"""OSU 2019's single- vs multi-process ratio on a Stampede2 SKX node: where dtsim's ratio comes from, and
what a missing mechanism would have to cost to reach the published one (docs/results.md, "OSU 2019:
osu-single-vs-multi.yaml"; docs/calibration.md, "What one wide process pays").

Runs `dtsim calibrate report` for one process of 48 threads over both sockets and for one of four
12-thread processes (batch 64 each), and prints per op class: its share of the wide process's step and
the per-node gain of four narrow processes. Then, for each published ratio R, three ways a mechanism
missing from dtsim could close the gap, each as the size it would need:
  serial  a cost X per step that does not shrink with threads, paid by every process:
          4 (T1 + X) / (T4 + X) = R  ->  X = (R T4 - 4 T1) / (4 - R), also per pass;
  wide    a cost paid only by the wide process (e.g. a barrier crossing the sockets), per pass:
          4 (T1 + Y) / T4 = R  ->  Y = R T4 / 4 - T1;
  amdahl  the convolutions' parallel fraction p' (dtsim: the median over the host's 1- to 2-thread
          timings) that would give R, all else equal; conv time at n threads scales as
          ((1 - p') + p'/n) / ((1 - p) + p/n) (docs/calibration.md, §4). Approximate: the per-pass fixed
          cost and the bandwidth floors are kept as they are.
These are sizes for comparison with sourced costs, not constants: nothing in dtsim is fitted to OSU.

Last, a published bound on p at many threads: DeepBench's KNL7250 sheet (68 cores, Intel MKL 2017;
../shared/reference/deepbench/conv.csv) times convolutions at batch 8 and 16. A pass reaching efficiency e
of the nominal peak on n threads has 1/e >= (1 - p) n + p (its single-core efficiency is at most 1), so
p >= 1 - (1/e - 1)/(n - 1). For each p' it counts the passes (and their share of the sheet's time) whose e
exceeds what p' allows: for those, p' is ruled out.

Usage: benchmarks/osu_gap.py [DTSIM]   (default: build/apps/dtsim beside this folder, or $DTSIM)
"""
import collections
import csv
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DTSIM = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DTSIM", os.path.join(HERE, "..", "build", "apps", "dtsim"))
DEVICE = "xeon-platinum-8160"  # Stampede2 SKX: 2 sockets x 24 cores (platforms/stampede2-skx.yaml)
BATCH = 64
WIDE = (48, 1)     # threads, processes per node
NARROW = (12, 4)
# OSU 2019 (benchmarks/data/open-measurements.yaml, osu_cpu_study_facts): multi- over single-process per node.
PUBLISHED = {"resnet152": 1.35, "inception_v4": 1.47}
DB = os.path.join(HERE, "..", "calibrate", "data", "calibration.json")  # the shipped calibration
BOOTSTRAP_DRAWS = 2000
# Passes per layer: forward, backward-data and backward-weights for layers with weights; the loss has its
# forward only; flatten is a view. Every other layer: forward and backward.
PASSES_PER_LAYER = {"conv2d": 3, "fully_connected": 3, "softmax_loss": 1, "flatten": 0}


def report(model, threads, per_node):
    out = subprocess.run([DTSIM, "calibrate", "report", "--model", model, "--device", DEVICE, "--batch", str(BATCH),
                          "--threads", str(threads), "--workers-per-node", str(per_node), "--sockets", "2",
                          "--format", "csv"], check=True, capture_output=True, text=True).stdout
    by_op = collections.Counter()
    passes = 0
    for r in csv.DictReader(io.StringIO(out)):
        by_op[r["op"]] += (float(r["fwd_ms"]) + float(r["bwd_ms"])) / 1e3
        passes += PASSES_PER_LAYER.get(r["op"], 2)
    return by_op, passes


def conv_parallel_fraction(path):
    """The convolutions' Amdahl fraction as fit_host_model fits it (calibrate/src/device_model.cpp): per
    shape and pass p = (1 - 1/s) / (1 - 1/2), s = t(1) h / t(2), h the co-run slowdown, clamped to [0, 1];
    the median over shapes. Also its standard error: bootstrap over shapes (fixed seed), and the normal
    approximation 1.2533 sd / sqrt(n) of the unclamped values."""
    hosts = {(h["threads"], h.get("instances", 1)): h["entries"] for h in json.load(open(path))["hosts"]
             if h.get("backend", "onednn") == "onednn"}
    one, corun, two = hosts[(1, 1)], hosts.get((1, 2), {}), hosts[(2, 1)]
    raw = []
    for sig, passes in one.items():
        for name, e1 in passes.items():
            e2 = two.get(sig, {}).get(name)
            if e1["op"] != "conv2d" or e1.get("status") != "measured" or not e2 or e2.get("status") != "measured":
                continue
            ec = corun.get(sig, {}).get(name)
            h = max(1.0, ec["time_s"] / e1["time_s"]) if ec and ec.get("status") == "measured" else 1.0
            s = e1["time_s"] * h / e2["time_s"]
            raw.append((1 - 1 / s) / (1 - 1 / 2))
    clamped = [min(1.0, max(0.0, p)) for p in raw]
    rng = random.Random(1)
    boot = [statistics.median(rng.choices(clamped, k=len(clamped))) for _ in range(BOOTSTRAP_DRAWS)]
    normal_se = 1.2533 * statistics.stdev(raw) / math.sqrt(len(raw))
    return statistics.median(clamped), statistics.stdev(boot), normal_se, len(raw)


DEEPBENCH = os.path.join(HERE, "..", "..", "shared", "reference", "deepbench", "conv.csv")
# Xeon Phi 7250 nominal FP32 peak: 68 cores x 1.4 GHz x 16 lanes x 2 VPUs x 2 (FMA) (platforms/devices.yaml).
# Its AVX-512 clock is lower than nominal, so e is understated and the bound on p is conservative.
KNL_CORES = 68
KNL_PEAK_FLOPS = KNL_CORES * 1.4e9 * 16 * 2 * 2


def deepbench_knl_passes(path):
    """(efficiency of nominal peak, time_s) of every timed pass of the KNL7250 sheet."""
    out = []
    for r in csv.DictReader(open(path)):
        if r["gpu"] != "KNL7250":
            continue
        w, h, c, n, k, kh, kw = (int(r[f]) for f in ("W", "H", "C", "N", "K", "R", "S"))
        oh = (h + 2 * int(r["pad_h"]) - kh) // int(r["stride_h"]) + 1
        ow = (w + 2 * int(r["pad_w"]) - kw) // int(r["stride_w"]) + 1
        flops = 2.0 * n * k * c * kh * kw * oh * ow
        for col in ("fwd_ms", "bwd_input_ms", "bwd_weights_ms"):
            try:
                t = float(r[col]) * 1e-3
            except ValueError:
                continue  # "N/A*": the first layer has no data gradient
            out.append((flops / (t * KNL_PEAK_FLOPS), t))
    return out


def amdahl(p, n):
    return (1 - p) + p / n


def conv_ratio(p_old, p_new, conv1, rest1, conv4, rest4):
    t1 = conv1 * amdahl(p_new, WIDE[0]) / amdahl(p_old, WIDE[0]) + rest1
    t4 = conv4 * amdahl(p_new, NARROW[0]) / amdahl(p_old, NARROW[0]) + rest4
    return NARROW[1] * t1 / t4


def p_for(target, p_old, conv1, rest1, conv4, rest4):
    lo, hi = 0.5, 1.0  # the ratio falls as p rises towards 1: bisect
    for _ in range(60):
        mid = (lo + hi) / 2
        if conv_ratio(p_old, mid, conv1, rest1, conv4, rest4) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main():
    p0, se, normal_se, shapes = conv_parallel_fraction(DB)
    print(f"conv parallel fraction p = {p0:.4f} over {shapes} shape-passes, standard error {se:.4f} (bootstrap), "
          f"{normal_se:.4f} (normal approximation)")
    splits = {}
    for model, published in PUBLISHED.items():
        wide, passes = report(model, *WIDE)
        narrow, _ = report(model, *NARROW)
        t1, t4 = sum(wide.values()), sum(narrow.values())
        ratio = NARROW[1] * t1 / t4
        print(f"{model}: {passes} passes, step {t1:.3f} s (1 x {WIDE[0]}) vs {t4:.3f} s (each of {NARROW[1]} x {NARROW[0]}); "
              f"per-node ratio {ratio:.3f}, published {published}")
        for op, s in sorted(wide.items(), key=lambda kv: -kv[1]):
            if s < 0.005 * t1:
                continue
            print(f"  {op:16s} {100 * s / t1:5.1f}% of the wide step, per-node gain {NARROW[1] * s / narrow[op]:.2f}x")
        x = (published * t4 - NARROW[1] * t1) / (NARROW[1] - published)
        y = published * t4 / NARROW[1] - t1
        print(f"  serial: X = {1e3 * x:.0f} ms per step per process ({1e6 * x / passes:.0f} us per pass, "
              f"{100 * x / t1:.1f}% of the wide step)")
        print(f"  wide:   Y = {1e3 * y:.0f} ms per step ({1e6 * y / passes:.0f} us per pass, {100 * y / t1:.1f}% of the wide step)")
        splits[model] = (wide["conv2d"], t1 - wide["conv2d"], narrow["conv2d"], t4 - narrow["conv2d"])
        p = p_for(published, p0, *splits[model])
        print(f"  amdahl: conv p' = {p:.4f}, {(p0 - p) / se:.1f} standard errors below the measured p; "
              f"p - 2 standard errors ({p0 - 2 * se:.4f}) gives {conv_ratio(p0, p0 - 2 * se, *splits[model]):.2f}x")
    # One p serves every convolution: what each model's p' gives the other model.
    for model, published in PUBLISHED.items():
        p = p_for(published, p0, *splits[model])
        others = ", ".join(f"{m} {conv_ratio(p0, p, *splits[m]):.2f}x" for m in PUBLISHED if m != model)
        print(f"at {model}'s p' = {p:.4f}: {others}")
    if not os.path.exists(DEEPBENCH):
        print(f"{DEEPBENCH}: not found (DeepBench's published sheets, ../shared/reference/deepbench)")
        return
    knl = deepbench_knl_passes(DEEPBENCH)
    total_s = sum(t for _, t in knl)
    print(f"DeepBench KNL7250 ({KNL_CORES} threads, batch 8 and 16): {len(knl)} passes, median efficiency "
          f"{statistics.median(e for e, _ in knl):.2f}, best {max(e for e, _ in knl):.2f} of nominal peak")
    for p in [p0] + [p_for(r, p0, *splits[m]) for m, r in PUBLISHED.items()]:
        cap = 1 / (1 + (KNL_CORES - 1) * (1 - p))
        over = [(e, t) for e, t in knl if e > cap]
        print(f"  p = {p:.4f} allows at most {cap:.2f} of peak at {KNL_CORES} threads: exceeded by {len(over)} passes, "
              f"{100 * sum(t for _, t in over) / total_s:.1f}% of the sheet's time")


if __name__ == "__main__":
    main()
