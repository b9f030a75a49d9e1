#!/usr/bin/env python3
"""The thread scaling of CPU passes on a full node, from benchmarks/cpu_node_scaling.py's records: writes
calibrate/data/thread_scaling.json and prints what the records say of one wide process against several narrow
ones (docs/calibration.md, "Thread scaling on a full node").

For each pass measured on a node at P x T with P T = the node's cores (every configuration filling the node:
16 x 1, 4 x 4, 2 x 8, 1 x 16 on a 16-core node, 2 x 1 and 1 x 2 on a 2-core one), its loss at T threads is
L(T) = T t(T) / t(1): the time T threads take beside the time one thread takes for the same work on the same
full node (so that memory bandwidth, caches and clocks are shared as in the wide run), times T. L(1) = 1; a
pass that scales perfectly keeps L = 1. t(T) is the median over the P processes (and over runs). Per op class
the loss is time-weighted over the passes a step runs (each pass weighted by its calls in the model's forward).
Each thread count comes from one node; records of several nodes give one table over the union of their counts.
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
    """The records per node: {node key: dict(machine, layers, times, steps, bw)}. A node is a CPU model, a core
    count and a PyTorch build; several runs on one node merge, a pass timed in several runs taking the median
    of the runs' values."""
    nodes = {}
    for p in paths:
        recs = [json.loads(line) for line in open(p) if line.strip()]
        machine = next(r for r in recs if r["kind"] == "machine")
        lscpu = dict(line.split(":", 1) for line in machine["lscpu"].splitlines() if ":" in line)
        key = (lscpu.get("Model name", "?").strip(), lscpu.get("Model", "?").strip(), machine["cores"], machine["torch"])
        node = nodes.setdefault(key, dict(machine=machine, lscpu=lscpu, layers={}, steps=[], bw=[], files=[],
                                          runs=collections.defaultdict(lambda: collections.defaultdict(list))))
        node["files"].append(os.path.relpath(p, ROOT))
        for r in recs:
            if r["kind"] == "layers":
                if node["layers"].setdefault(r["model"], r["layers"]) != r["layers"]:
                    sys.exit(f"{p}: {r['model']}'s layers differ from an earlier run on the same node")
            elif r["kind"] == "pass":
                node["runs"][(r["model"], r["layer"], r["pass_"])][(r["procs"], r["threads"])].append(
                    statistics.median(r["median_s"]))
            elif r["kind"] == "step":
                node["steps"].append(r)
            elif r["kind"] == "bw":
                node["bw"].append(r)
    for node in nodes.values():
        node["times"] = {k: {c: statistics.median(v) for c, v in d.items()} for k, d in node["runs"].items()}
        cores = node["machine"]["cores"]
        # Full-node configurations: P x T = the node's cores; T = 1 is the reference.
        node["full"] = {t: (cores // t, t) for t in range(1, cores + 1) if cores % t == 0}
    return nodes


def describe(node):
    lscpu, machine = node["lscpu"], node["machine"]
    cpu = (f"{lscpu.get('Model name', '?').strip()} (family {lscpu.get('CPU family', '?').strip()}, model "
           f"{lscpu.get('Model', '?').strip()}), {lscpu.get('Socket(s)', '?').strip()} socket, "
           f"{machine['cores']} cores, {lscpu.get('Thread(s) per core', '?').strip()} thread per core")
    onednn = next((ln.strip() for ln in machine["parallel"].splitlines() if "DNN" in ln), "")
    return cpu, f"PyTorch {machine['torch']}, {onednn}"


def node_losses(node):
    """Per node: {T: loss} per shape-pass key and per class (time-weighted over the passes measured at T and 1),
    and the summed times per (model, class) and configuration for the step-level print."""
    full, ref = node["full"], node["full"][1]
    shapes = collections.defaultdict(dict)
    sums = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0]))  # class -> T -> [t1, tT]
    by_model_class = collections.defaultdict(lambda: collections.defaultdict(float))     # (model, cls) -> (P,T) -> s
    for (model, li, pname), d in sorted(node["times"].items()):
        if ref not in d:
            continue
        layer = node["layers"][model][li]
        sig, cls = signature(layer["sig"]), CLASS[layer["sig"]["op"]]
        for pt, t in d.items():
            by_model_class[(model, cls)][pt] += layer["count"] * t
            by_model_class[(model, "all")][pt] += layer["count"] * t
        for t_count, pt in full.items():
            if t_count == 1 or pt not in d:
                continue
            sums[cls][t_count][0] += layer["count"] * d[ref]
            sums[cls][t_count][1] += layer["count"] * d[pt]
            if sig:
                key = f"{sig}|{PASS[pname]}"
                loss = t_count * d[pt] / d[ref]
                old = shapes[key].get(t_count)   # the same shape in both models: keep the mean
                shapes[key][t_count] = loss if old is None else (old + loss) / 2
    classes = {c: {t: t * v[1] / v[0] for t, v in per.items()} for c, per in sums.items()}
    return shapes, classes, by_model_class


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*")
    ap.add_argument("--out", default=os.path.join(ROOT, "calibrate", "data", "thread_scaling.json"))
    a = ap.parse_args()
    paths = a.records or sorted(glob.glob(os.path.join(HERE, "data", "cpu_node_scaling", "*.jsonl")))
    nodes = load(paths)
    shapes, classes, measured, sources = {}, {}, {}, []
    for key, node in sorted(nodes.items(), key=lambda kv: kv[0][2]):
        node_shapes, node_classes, node["by_model_class"] = node_losses(node)
        counts = sorted({t for per in node_classes.values() for t in per})
        cpu, library = describe(node)
        for t in counts:   # each thread count from one node: a second node measuring it is refused
            if t in measured:
                sys.exit(f"threads {t} measured on two nodes ({measured[t]} and {cpu}); keep one node's records")
            measured[t] = cpu
        for k, per in node_shapes.items():
            shapes.setdefault(k, {}).update(per)
        for c, per in node_classes.items():
            classes.setdefault(c, {}).update(per)
        sources.append(dict(node=cpu, library=library, batch=node["machine"]["batch"], threads=[1] + counts,
                            records=node["files"]))
        node["cpu"], node["library"] = cpu, library
    threads = [1] + sorted(measured)

    def row(per):
        return [1.0] + [round(per[t], 4) if t in per else None for t in threads[1:]]
    doc = {
        "description": "Loss L(T) = T t(T) / t(1) of CPU passes on a full node (every core busy: P processes x T "
                       "threads with P T = the node's cores), each process timing the same pass at once (median "
                       "per call, median over processes, median over runs). Per class: time-weighted over the "
                       "passes measured at T. Each thread count comes from one node (nodes); null where a shape "
                       "was not measured at that count.",
        "source": "benchmarks/cpu_node_scaling.py, then benchmarks/cpu_node_scaling_fit.py; records in "
                  "benchmarks/data/cpu_node_scaling/",
        "node": "; ".join(f"{s['node']}, {s['library']}: threads {', '.join(map(str, s['threads'][1:]))}"
                          for s in sources),
        "nodes": sources,
        "backend": "libtorch",
        "threads": threads,
        "classes": {c: row(per) for c, per in sorted(classes.items())},
        "shapes": {k: row(per) for k, per in sorted(shapes.items())},
    }
    with open(a.out, "w") as f:  # one row per line
        head = {k: v for k, v in doc.items() if k not in ("classes", "shapes")}
        f.write("{\n" + "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        for field in ("classes", "shapes"):
            rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc[field].items())
            f.write(f' "{field}": {{\n{rows}\n }}' + (",\n" if field == "classes" else "\n"))
        f.write("}\n")
    print(f"wrote {a.out}: threads {threads}, {len(doc['classes'])} classes, {len(shapes)} shape-passes")
    print("\nloss per class (time-weighted), thread counts " + ", ".join(map(str, threads[1:])) + ":")
    for c, r in doc["classes"].items():
        print(f"  {c:11s} " + "  ".join("   -  " if v is None else f"{v:.3f}" for v in r[1:]))
    for node in sorted(nodes.values(), key=lambda n: n["machine"]["cores"]):
        cores = node["machine"]["cores"]
        print(f"\n== node: {node['cpu']}; {node['library']}; batch {node['machine']['batch']} per process")
        widest = (1, cores)
        print(f"node throughput of P x T over 1 x {cores}, same batch per process: P t(1 x {cores}) / t(P x T), "
              "passes summed per step")
        for (model, cls), v in sorted(node["by_model_class"].items()):
            if widest not in v:
                continue
            ratios = [f"{p} x {t}: {p * v[widest] / v[(p, t)]:.3f}" for (p, t) in sorted(v, reverse=True)
                      if p * t == cores and (p, t) != widest]
            print(f"  {model:13s} {cls:11s} " + "; ".join(ratios) +
                  f"   (share of the 1 x {cores} step {v[widest] / node['by_model_class'][(model, 'all')][widest]:.2f})")
        print("whole training steps (forward, loss, backward, SGD; no exchange), images/s per node:")
        rate = {}
        for s in node["steps"]:
            slowest = max(s["median_s"])
            rate[(s["model"], s["procs"], s["threads"])] = s["procs"] * s["batch"] / slowest
            print(f"  {s['model']:13s} {s['procs']} x {s['threads']:2d}: {rate[(s['model'], s['procs'], s['threads'])]:6.2f}"
                  f" img/s (step medians {', '.join(f'{x:.2f}' for x in s['median_s'])} s)")
        for model, p, t in sorted(rate):
            if (p, t) != widest and (model, 1, cores) in rate and p * t == cores:
                print(f"  {model:13s} {p} x {t} over 1 x {cores}: {rate[(model, p, t)] / rate[(model, 1, cores)]:.3f}")
        print("memory bandwidth (a copy of 512 MiB, read + write counted):")
        for r in node["bw"]:
            print(f"  {r['procs']} x {r['threads']:2d}: {r['node_Bps'] / 1e9:6.1f} GB/s per node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
