#!/usr/bin/env python3
"""One many-core CPU node, filled by one wide process or by several narrow ones (issue 40; docs/calibration.md,
"What one wide process pays"). OSU 2019 measured training 1.35x (ResNet-152) and 1.47x (Inception-v4) faster
per Skylake node with several processes than with one; dtsim's ratio comes from each pass's parallel fraction
and co-run slowdown, which a 2-core host fits from 1 and 2 threads only. This measures both on a wider node.

For each configuration P x T (P processes of T threads, pinned to disjoint cores, all running at once):
- passes: every distinct layer shape of the models at a batch per process (forward; for convolutions
  backward-data and backward-weights apart, through aten::convolution_backward; for the rest backward through
  autograd), all P processes timing the same pass at the same moment (a barrier before each), median per call
  per process; the record keeps every process's median;
- steps: a whole training step (forward, cross-entropy, backward, SGD with momentum) of each model at the same
  batch per process, every process stepping on its own (no gradient exchange: the compute side only), median
  step time per process.
Records are JSON lines, flushed one by one, so a run cut short keeps what it measured. A wall budget
(--budget-s) ends the run between measurements. No fit is made here: benchmarks/cpu_node_scaling_fit.py reads
the records.

Needs PyTorch and torchvision (timm for Inception-v4, else it is skipped and said so).
  benchmarks/cpu_node_scaling.py --out FILE [--batch 32] [--plan PLAN] [--layers-from RECORDS.jsonl]
PLAN: comma-separated items KIND:MODEL:PxT, run in order, KIND 'step', 'pass' or 'bw' (a copy of 512 MiB per
process, MODEL 'none': the node's memory bandwidth as the processes share it).
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time

DEFAULT_PLAN = ("bw:none:1x1,bw:none:1x16,bw:none:4x4,bw:none:16x1,step:resnet152:1x16,step:resnet152:4x4,pass:resnet152:1x16,pass:resnet152:4x4,"
                "pass:resnet152:16x1,step:inception_v4:1x16,step:inception_v4:4x4,pass:inception_v4:1x16,"
                "pass:inception_v4:4x4,pass:inception_v4:16x1,step:resnet152:2x8,pass:resnet152:2x8,"
                "pass:resnet152:1x1")
WINDOW_S = 0.2     # timed calls per pass: at least MIN_CALLS, and enough to fill this window
MIN_CALLS = 2
STEP_WARMUP = 1
STEP_ITERS = 3
BW_BYTES = 512 * 1024 * 1024
BW_CALLS = 5


def build_model(name):
    import torchvision
    if name == "inception_v4":
        import timm  # noqa: F401  (ImportError is reported by the caller)
        return timm.create_model("inception_v4", num_classes=1000), 299
    return getattr(torchvision.models, name)(num_classes=1000), 224


def capture_layers(name):
    """Distinct layer shapes of one model (per image), with how many times each is called in a forward."""
    import torch
    import torch.nn as nn
    model, side = build_model(name)
    seen = {}

    def hook(mod, inp, out):
        x = inp[0]
        if isinstance(mod, nn.Conv2d):
            sig = dict(op="conv2d", c=x.shape[1], h=x.shape[2], w=x.shape[3], k=mod.out_channels,
                       kernel=list(mod.kernel_size), stride=list(mod.stride), padding=list(mod.padding),
                       dilation=list(mod.dilation), groups=mod.groups, bias=mod.bias is not None)
        elif isinstance(mod, nn.BatchNorm2d):
            sig = dict(op="batch_norm", c=x.shape[1], h=x.shape[2], w=x.shape[3])
        elif isinstance(mod, nn.ReLU):
            sig = dict(op="relu", shape=list(x.shape[1:]))
        elif isinstance(mod, (nn.MaxPool2d, nn.AvgPool2d)):
            sig = dict(op="max_pool" if isinstance(mod, nn.MaxPool2d) else "avg_pool", c=x.shape[1], h=x.shape[2],
                       w=x.shape[3], kernel=mod.kernel_size, stride=mod.stride, padding=mod.padding,
                       ceil_mode=bool(getattr(mod, "ceil_mode", False)),
                       count_include_pad=bool(getattr(mod, "count_include_pad", True)))
        elif isinstance(mod, nn.Linear):
            sig = dict(op="fully_connected", features=mod.in_features, out=mod.out_features)
        else:
            return
        key = json.dumps(sig, sort_keys=True)
        seen.setdefault(key, [sig, 0])[1] += 1

    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Linear)):
            m.register_forward_hook(hook)
    model.eval()
    with torch.no_grad():
        model(torch.randn(1, 3, side, side))
    return [dict(sig=s, count=n) for s, n in seen.values()]


def pass_functions(sig, batch):
    """(pass name, zero-argument callable) for one layer shape at a batch."""
    import torch
    import torch.nn.functional as F
    op = sig["op"]
    out = []
    if op == "conv2d":
        x = torch.randn(batch, sig["c"], sig["h"], sig["w"])
        w = torch.randn(sig["k"], sig["c"] // sig["groups"], *sig["kernel"]) * 0.05
        b = torch.randn(sig["k"]) if sig["bias"] else None
        args = dict(stride=sig["stride"], padding=sig["padding"], dilation=sig["dilation"], groups=sig["groups"])
        y = F.conv2d(x, w, b, **args)
        g = torch.randn_like(y)
        bw = [sig["k"]] if sig["bias"] else None

        def bwd(mask):
            return lambda: torch.ops.aten.convolution_backward(g, x, w, bw, sig["stride"], sig["padding"],
                                                               sig["dilation"], False, [0, 0], sig["groups"], mask)
        out.append(("forward", lambda: F.conv2d(x, w, b, **args)))
        out.append(("backward_data", bwd([True, False, False])))
        out.append(("backward_weights", bwd([False, True, sig["bias"]])))
        return out
    if op == "fully_connected":
        x = torch.randn(batch, sig["features"])
        w = torch.randn(sig["out"], sig["features"]) * 0.05
        g = torch.randn(batch, sig["out"])
        out.append(("forward", lambda: F.linear(x, w)))
        out.append(("backward_data", lambda: g.mm(w)))
        out.append(("backward_weights", lambda: g.t().mm(x)))
        return out
    if op == "batch_norm":
        x = torch.randn(batch, sig["c"], sig["h"], sig["w"], requires_grad=True)
        wt = torch.ones(sig["c"], requires_grad=True)
        bs = torch.zeros(sig["c"], requires_grad=True)
        rm, rv = torch.zeros(sig["c"]), torch.ones(sig["c"])
        fwd = lambda: F.batch_norm(x, rm, rv, wt, bs, training=True)  # noqa: E731
    elif op == "relu":
        x = torch.randn(batch, *sig["shape"], requires_grad=True)
        fwd = lambda: F.relu(x)  # noqa: E731
    else:
        x = torch.randn(batch, sig["c"], sig["h"], sig["w"], requires_grad=True)
        if op == "max_pool":
            fwd = lambda: F.max_pool2d(x, sig["kernel"], sig["stride"], sig["padding"],  # noqa: E731
                                       ceil_mode=sig["ceil_mode"])
        else:
            fwd = lambda: F.avg_pool2d(x, sig["kernel"], sig["stride"], sig["padding"],  # noqa: E731
                                       ceil_mode=sig["ceil_mode"], count_include_pad=sig["count_include_pad"])
    y = fwd()
    g = torch.randn_like(y)
    inputs = [t for t in (x, locals().get("wt"), locals().get("bs")) if t is not None]
    out.append(("forward", lambda: fwd().detach()))
    out.append(("backward", lambda: torch.autograd.grad(y, inputs, g, retain_graph=True)))
    return out


def time_call(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def worker(rank, procs, threads, cores, job, barrier, queue):
    os.sched_setaffinity(0, cores)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(rank)
    try:
        if job["kind"] == "pass":
            for li, layer in enumerate(job["layers"]):
                for name, fn in pass_functions(layer["sig"], job["batch"]):
                    barrier.wait()
                    fn()  # warm-up: the primitive's creation and first touch of its buffers
                    first = time_call(fn)
                    calls = max(MIN_CALLS, math.ceil(WINDOW_S / max(first, 1e-6)))
                    times = [first] + [time_call(fn) for _ in range(calls - 1)]
                    queue.put(("pass", rank, li, name, statistics.median(times), len(times)))
        elif job["kind"] == "bw":
            # Memory bandwidth: a copy of BW_BYTES (read + write counted), every process at once.
            a = torch.ones(BW_BYTES // 4)
            b = torch.empty_like(a)
            barrier.wait()
            b.copy_(a)
            times = [time_call(lambda: b.copy_(a)) for _ in range(BW_CALLS)]
            queue.put(("bw", rank, statistics.median(times), 2 * BW_BYTES))
        else:
            import torch.nn.functional as F
            model, side = build_model(job["model"])
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            x = torch.randn(job["batch"], 3, side, side)
            y = torch.randint(0, 1000, (job["batch"],))
            barrier.wait()
            times = []
            for it in range(STEP_WARMUP + STEP_ITERS):
                t0 = time.perf_counter()
                out = model(x)
                loss = F.cross_entropy(out if torch.is_tensor(out) else out[0], y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                if it >= STEP_WARMUP:
                    times.append(time.perf_counter() - t0)
            queue.put(("step", rank, statistics.median(times), times))
    except Exception as e:  # reported by the parent as one line, the run goes on
        queue.put(("error", rank, f"{type(e).__name__}: {e}"))
    queue.put(("done", rank))


def run_job(job, procs, threads, all_cores):
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, procs, threads, set(all_cores[r * threads:(r + 1) * threads]), job,
                                           barrier, queue)) for r in range(procs)]
    for p in ps:
        p.start()
    done, msgs = 0, []
    while done < procs:
        m = queue.get()
        if m[0] == "done":
            done += 1
        else:
            msgs.append(m)
    for p in ps:
        p.join()
    return msgs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--plan", default=DEFAULT_PLAN)
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-layers", type=int, default=0, help="time only the first N layer shapes (a quick check)")
    ap.add_argument("--layers-from", action="append", default=[], metavar="RECORDS",
                    help="take a model's layer shapes from an earlier run's records (a host without timm can "
                         "time Inception-v4's shapes as another node captured them)")
    a = ap.parse_args()
    layers = {}  # read before anything is written, so a bad --layers-from leaves no record
    planned = {item.split(":")[1] for item in a.plan.split(",") if item.startswith("pass:")}
    for path in a.layers_from:
        try:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    rec = json.loads(line) if line.strip() else {}
                    if rec.get("kind") == "layers" and rec["model"] in planned:
                        layers.setdefault(rec["model"], rec["layers"])
        except (OSError, ValueError, KeyError) as e:
            print(f"cpu_node_scaling.py: --layers-from {path}"
                  f"{f', line {n}' if isinstance(e, (ValueError, KeyError)) else ''}: {e}", file=sys.stderr)
            sys.exit(2)
    start = time.time()
    cores = sorted(os.sched_getaffinity(0))
    out = open(a.out, "a")

    def emit(rec):
        rec["t_s"] = round(time.time() - start, 2)
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(json.dumps(rec)[:400], flush=True)

    import torch
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if os.path.exists("/usr/bin/lscpu") else ""
    emit(dict(kind="machine", cores=len(cores), torch=torch.__version__, python=platform.python_version(),
              mkldnn=torch.backends.mkldnn.is_available(), parallel=torch.__config__.parallel_info(),
              config=torch.__config__.show(), lscpu=lscpu, batch=a.batch))
    for model in sorted(layers):
        emit(dict(kind="layers", model=model, layers=layers[model], source=a.layers_from))
    for item in a.plan.split(","):
        if time.time() - start > a.budget_s:
            emit(dict(kind="skipped", item=item, why="budget"))
            continue
        kind, model, pt = item.split(":")
        procs, threads = (int(v) for v in pt.split("x"))
        if procs * threads > len(cores):
            emit(dict(kind="skipped", item=item, why=f"{procs * threads} cores asked, {len(cores)} here"))
            continue
        try:
            if kind == "pass" and model not in layers:
                layers[model] = capture_layers(model)
                emit(dict(kind="layers", model=model, layers=layers[model]))
        except ImportError as e:
            emit(dict(kind="skipped", item=item, why=str(e)))
            continue
        chosen = layers.get(model, [])[:a.max_layers] if a.max_layers else layers.get(model, [])
        t0 = time.time()
        msgs = run_job(dict(kind=kind, model=model, batch=a.batch, layers=chosen), procs, threads, cores)
        for m in msgs:
            if m[0] == "error":
                emit(dict(kind="error", item=item, rank=m[1], what=m[2]))
        if kind == "bw":
            per = sorted((m[1], m[2], m[3]) for m in msgs if m[0] == "bw")
            emit(dict(kind="bw", procs=procs, threads=threads, median_s=[v[1] for v in per],
                      bytes_moved=per[0][2] if per else 0,
                      node_Bps=sum(v[2] / v[1] for v in per)))
        elif kind == "step":
            per = sorted((m[1], m[2], m[3]) for m in msgs if m[0] == "step")
            emit(dict(kind="step", model=model, procs=procs, threads=threads, batch=a.batch,
                      median_s=[v[1] for v in per], times_s=[v[2] for v in per], wall_s=round(time.time() - t0, 2)))
        else:
            by = {}
            for m in msgs:
                if m[0] == "pass":
                    by.setdefault((m[2], m[3]), []).append((m[1], m[4], m[5]))
            for (li, name), v in sorted(by.items()):
                v.sort()
                emit(dict(kind="pass", model=model, layer=li, op=chosen[li]["sig"]["op"], pass_=name, procs=procs,
                          threads=threads, batch=a.batch, median_s=[x[1] for x in v], calls=[x[2] for x in v]))
            emit(dict(kind="pass_done", item=item, wall_s=round(time.time() - t0, 2)))
    out.close()


if __name__ == "__main__":
    main()
