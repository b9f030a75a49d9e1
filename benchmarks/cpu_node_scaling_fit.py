#!/usr/bin/env python3
"""The thread scaling of CPU passes on a full node, from benchmarks/cpu_node_scaling.py's records: writes
calibrate/data/thread_scaling.json and prints what the records say of one wide process against several narrow
ones (docs/calibration.md, "Thread scaling on a full node").

For each pass measured at P x T = 16 x 1, 4 x 4 and 1 x 16 (every configuration filling the node), its loss at
T threads is L(T) = T t(T) / t(1): the time T threads take beside the time one thread takes for the same work
on the same full node (so that memory bandwidth, caches and clocks are shared as in the wide run), times T.
L(1) = 1; a pass that scales perfectly keeps L = 1. t(T) is the median over the P processes. Per op class the
loss is time-weighted over the passes a step runs (each pass weighted by its calls in the model's forward).
Shapes are keyed as dtsim keys them (calibrate/op_signature.cpp without the batch, and the pass), so a
model's own passes take their measured loss where dtsim finds them.

  benchmarks/cpu_node_scaling_fit.py [RECORDS.jsonl ...] [--out calibrate/data/thread_scaling.json]
"""
import argparse
import collections
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = [(16, 1), (4, 4), (1, 16)]   # P x T: the threads per process are 1, 4, 16
CLASS = {"conv2d": "conv", "fully_connected": "fc", "batch_norm": "batch_norm", "relu": "eltwise",
         "max_pool": "pool", "avg_pool": "pool"}
PASS = {"forward": "fwd", "backward_data": "bwd_data", "backward_weights": "bwd_weights", "backward": "bwd_data"}


def out_hw(s):
    def one(size, k, st, p, d, ceil=False):
        span = size + 2 * p - d * (k - 1) - 1
        return (-(-span // st) if ceil else span // st) + 1
    if s["op"] == "conv2d":
        return (one(s["h"], s["kernel"][0], s["stride"][0], s["padding"][0], s["dilation"][0]),
                one(s["w"], s["kernel"][1], s["stride"][1], s["padding"][1], s["dilation"][1]))
    k, st, p = (s[f] if isinstance(s[f], int) else s[f][0] for f in ("kernel", "stride", "padding"))
    return one(s["h"], k, st, p, 1, s["ceil_mode"]), one(s["w"], k, st, p, 1, s["ceil_mode"])


def signature(s):
    """dtsim's batch-free op signature (calibrate/src/op_signature.cpp, strip_batch), or None."""
    op = s["op"]
    if op == "conv2d":
        ho, wo = out_hw(s)
        return (f"conv2d src=Nx{s['c']}x{s['h']}x{s['w']} dst=Nx{s['k']}x{ho}x{wo} k={s['kernel'][0]}x{s['kernel'][1]} "
                f"s={s['stride'][0]}x{s['stride'][1]} p={s['padding'][0]}x{s['padding'][1]} "
                f"d={s['dilation'][0]}x{s['dilation'][1]} g={s['groups']} bias={int(s['bias'])}")
    if op == "batch_norm":
        return f"batch_norm src=Nx{s['c']}x{s['h']}x{s['w']} dst=Nx{s['c']}x{s['h']}x{s['w']}"
    if op == "relu" and len(s["shape"]) == 3:
        c, h, w = s["shape"]
        return f"relu src=Nx{c}x{h}x{w} dst=Nx{c}x{h}x{w}"
    if op in ("max_pool", "avg_pool"):
        ho, wo = out_hw(s)
        k, st, p = (s[f] if isinstance(s[f], int) else s[f][0] for f in ("kernel", "stride", "padding"))
        return f"{op} src=Nx{s['c']}x{s['h']}x{s['w']} dst=Nx{s['c']}x{ho}x{wo} k={k}x{k} s={st}x{st} p={p}x{p}"
    return None


def load(paths):
    recs = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    machine = next(r for r in recs if r["kind"] == "machine")
    layers = {r["model"]: r["layers"] for r in recs if r["kind"] == "layers"}
    times = collections.defaultdict(dict)
    for r in recs:
        if r["kind"] == "pass":
            times[(r["model"], r["layer"], r["pass_"])][(r["procs"], r["threads"])] = statistics.median(r["median_s"])
    steps = [r for r in recs if r["kind"] == "step"]
    bw = [r for r in recs if r["kind"] == "bw"]
    return machine, layers, times, steps, bw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*")
    ap.add_argument("--out", default=os.path.join(ROOT, "calibrate", "data", "thread_scaling.json"))
    a = ap.parse_args()
    paths = a.records or sorted(glob.glob(os.path.join(HERE, "data", "cpu_node_scaling", "*.jsonl")))
    machine, layers, times, steps, bw = load(paths)
    shapes = {}
    by_class = collections.defaultdict(lambda: [0.0, 0.0, 0.0])      # sum of count x t(T) per T
    by_model_class = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for (model, li, pname), d in sorted(times.items()):
        if not all(c in d for c in CONFIGS):
            continue
        layer = layers[model][li]
        sig, cls = signature(layer["sig"]), CLASS[layer["sig"]["op"]]
        t = [d[c] for c in CONFIGS]
        for i in range(3):
            by_class[cls][i] += layer["count"] * t[i]
            by_model_class[(model, cls)][i] += layer["count"] * t[i]
            by_model_class[(model, "all")][i] += layer["count"] * t[i]
        if sig:
            key = f"{sig}|{PASS[pname]}"
            loss = [1.0, 4 * t[1] / t[0], 16 * t[2] / t[0]]
            if key in shapes and shapes[key] != loss:  # the same shape in both models: keep the mean
                loss = [(x + y) / 2 for x, y in zip(shapes[key], loss)]
            shapes[key] = [round(x, 4) for x in loss]
    classes = {c: [1.0, round(4 * v[1] / v[0], 4), round(16 * v[2] / v[0], 4)] for c, v in sorted(by_class.items())}
    lscpu = dict(line.split(":", 1) for line in machine["lscpu"].splitlines() if ":" in line)
    cpu = (f"{lscpu.get('Model name', '?').strip()} (family {lscpu.get('CPU family', '?').strip()}, model "
           f"{lscpu.get('Model', '?').strip()}), {lscpu.get('Socket(s)', '?').strip()} socket, "
           f"{machine['cores']} cores, {lscpu.get('Thread(s) per core', '?').strip()} thread per core")
    onednn = next((ln.strip() for ln in machine["parallel"].splitlines() if "DNN" in ln), "")
    doc = {
        "description": "Loss L(T) = T t(T) / t(1) of CPU passes on a full node (every core busy): 16 processes x 1 "
                       "thread, 4 x 4 and 1 x 16, each process timing the same pass at once (median per call, "
                       "median over processes). Per class: time-weighted over ResNet-152's and Inception-v4's passes.",
        "source": "benchmarks/cpu_node_scaling.py on a lent node, then benchmarks/cpu_node_scaling_fit.py; records in "
                  "benchmarks/data/cpu_node_scaling/",
        "node": cpu,
        "library": f"PyTorch {machine['torch']}, {onednn}",
        "backend": "libtorch",
        "batch": machine["batch"],
        "threads": [1, 4, 16],
        "classes": classes,
        "shapes": dict(sorted(shapes.items())),
    }
    with open(a.out, "w") as f:  # one row per line
        head = {k: v for k, v in doc.items() if k not in ("classes", "shapes")}
        f.write("{\n" + "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        for field in ("classes", "shapes"):
            rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc[field].items())
            f.write(f' "{field}": {{\n{rows}\n }}' + (",\n" if field == "classes" else "\n"))
        f.write("}\n")
    print(f"node: {cpu}; {doc['library']}; batch {machine['batch']} per process")
    print(f"wrote {a.out}: {len(classes)} classes, {len(shapes)} shape-passes")
    print("\nloss L(4), L(16) per class (time-weighted):")
    for c, v in classes.items():
        print(f"  {c:11s} L(4) {v[1]:.3f}  L(16) {v[2]:.3f}")
    print("\nnode throughput of 4 x 4 over 1 x 16, same batch per process: 4 t(16) / t(4), passes summed per step")
    for (model, cls), v in sorted(by_model_class.items()):
        print(f"  {model:13s} {cls:11s} {4 * v[2] / v[1]:.3f}   (16 x 1 over 1 x 16: {16 * v[2] / v[0]:.3f}; "
              f"share of the 1 x 16 step {v[2] / by_model_class[(model, 'all')][2]:.2f})")
    print("\nwhole training steps (forward, loss, backward, SGD; no exchange), images/s per node:")
    rate = {}
    for s in steps:
        slowest = max(s["median_s"])
        rate[(s["model"], s["procs"], s["threads"])] = s["procs"] * s["batch"] / slowest
        print(f"  {s['model']:13s} {s['procs']} x {s['threads']:2d}: {rate[(s['model'], s['procs'], s['threads'])]:6.2f}"
              f" img/s (step medians {', '.join(f'{x:.2f}' for x in s['median_s'])} s)")
    for model in sorted({m for m, _, _ in rate}):
        if (model, 4, 4) in rate and (model, 1, 16) in rate:
            print(f"  {model:13s} 4 x 4 over 1 x 16: {rate[(model, 4, 4)] / rate[(model, 1, 16)]:.3f}")
    print("\nmemory bandwidth (a copy of 512 MiB, read + write counted):")
    for r in bw:
        print(f"  {r['procs']} x {r['threads']:2d}: {r['node_Bps'] / 1e9:6.1f} GB/s per node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
