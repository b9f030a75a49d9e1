#!/usr/bin/python3
"""Real PyTorch training for `dtsim validate --framework pytorch`: torchvision's ResNet-18 or a LeNet-5,
eager mode, SGD with momentum, 1 process or N processes with DistributedDataParallel over gloo. Writes
one JSON report in dtsim-train's schema (per-iteration phases, own CPU time and machine busy time for
the disturbance check of validate/src/measure.cpp). Also --bench-comm (gloo allreduce / send-recv
curves) and --check-model (the torch model against dtsim's layer table).

The data are loaded and the untrained model is evaluated in the launching process; training runs in
processes started afresh (also for 1 process) that receive the data through shared memory and copy it,
so their heap starts as a plain training script's: whatever glibc's dynamic mmap threshold becomes, the
training step's own blocks set it, not the loading's temporaries (the allocator regime of
calibrate/allocator.hpp; the environment -- MALLOC_* or LD_PRELOAD -- picks the regime).

Run with /usr/bin/python3 (Debian's python3-torch and python3-torchvision)."""
import argparse
import gzip
import json
import os
import resource
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian package dataset-fashion-mnist
CLASSES = 10
SGD_LEARNING_RATE = 0.01
SGD_MOMENTUM = 0.9
DDP_BUCKET_CAP_MB = 25  # DistributedDataParallel's default bucket_cap_mb
BENCH_SIZES_B = [4 << k for k in range(0, 25, 2)]  # 4 B .. 64 MiB
BENCH_REPEATS = 5


class LeNet5(nn.Module):
    """dtsim's lenet5 (models/src/zoo.cpp): the layer names are dtsim's."""

    def __init__(self, channels, side, classes):
        super().__init__()
        pad = max(0, (32 - side + 1) // 2)
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=pad)
        self.tanh1 = nn.Tanh()
        self.pool1 = nn.AvgPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.tanh2 = nn.Tanh()
        self.pool2 = nn.AvgPool2d(2, 2)
        self.conv3 = nn.Conv2d(16, 120, 5)
        self.tanh3 = nn.Tanh()
        self.fc1 = nn.Linear(120, 84)
        self.tanh4 = nn.Tanh()
        self.fc2 = nn.Linear(84, classes)

    def forward(self, x):
        x = self.pool1(self.tanh1(self.conv1(x)))
        x = self.pool2(self.tanh2(self.conv2(x)))
        x = torch.flatten(self.tanh3(self.conv3(x)), 1)
        return self.fc2(self.tanh4(self.fc1(x)))


def build_model(name, channels, side):
    if name == "lenet5":
        return LeNet5(channels, side, CLASSES)
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=CLASSES)
        if channels != 3:  # the usual adaptation to gray images: the first convolution takes 1 channel
            m.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return m
    raise SystemExit(f"train.py: --model: expected lenet5 or resnet18, got '{name}'")


def torch_name(dtsim_name):
    """torchvision's module name for a dtsim layer name (dtsim names its shortcut conv/bn, torchvision numbers them)."""
    return dtsim_name.replace(".downsample.conv", ".downsample.0").replace(".downsample.bn", ".downsample.1")


def check_model(model, layers_path, channels, side):
    """Every dtsim layer with parameters has a torch module of the same name, parameter count and output
    shape; the totals agree. Returns a list of mismatches (empty when equal)."""
    with open(layers_path) as f:
        layers = json.load(f)["layers"]
    modules = dict(model.named_modules())
    shapes = {}
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: shapes.__setitem__(n, list(o.shape)))
             for n, m in modules.items() if n]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(2, channels, side, side))
    model.train()
    for h in hooks:
        h.remove()
    problems = []
    total = 0
    for layer in layers:
        total += layer["params"]
        if layer["params"] == 0:
            continue
        name = torch_name(layer["name"])
        if name not in modules:
            problems.append(f"layer {layer['name']}: no torch module '{name}'")
            continue
        count = sum(p.numel() for p in modules[name].parameters(recurse=False))
        if count != layer["params"]:
            problems.append(f"layer {layer['name']}: {count} parameters in torch, {layer['params']} in dtsim")
        want = [2] + layer["dst"][1:]
        got = shapes.get(name)
        if got is not None and len(got) == 2:
            got = got + [1, 1]
        if got != want:
            problems.append(f"layer {layer['name']}: output {got} in torch, {want} in dtsim (batch 2)")
    torch_total = sum(p.numel() for p in model.parameters())
    if torch_total != total:
        problems.append(f"model: {torch_total} parameters in torch, {total} in dtsim")
    return problems


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_data(kind, split, channels, side, count, seed):
    """Images (count x channels x side x side, float) and labels: Fashion-MNIST (gray replicated to the
    channels, resized when side != 28) or a fixed synthetic set."""
    if kind == "synthetic":
        g = torch.Generator().manual_seed(seed)
        return torch.rand(count, channels, side, side, generator=g) * 2 - 1, torch.randint(0, CLASSES, (count,), generator=g)
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(FASHION_MNIST_DIR, f"{prefix}-images-idx3-ubyte.gz"))[:count]
    labels = read_idx(os.path.join(FASHION_MNIST_DIR, f"{prefix}-labels-idx1-ubyte.gz"))[:count]
    x = torch.from_numpy(images.copy()).float().div_(255.0).sub_(0.5).div_(0.5).unsqueeze(1)
    if side != 28:
        x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
    return x.expand(-1, channels, -1, -1).contiguous(), torch.from_numpy(labels.astype("int64"))


def own_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def minor_faults():
    """Page faults served without I/O so far (first touches of fresh memory): 0 per iteration in a held heap;
    in glibc's default regime, the pages of the blocks above its dynamic mmap threshold (calibrate/allocator.hpp)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def machine_busy_s():
    """Busy time of every CPU (user nice system irq softirq steal) from /proc/stat, as common/clean_timer."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def reduce(value, op):
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.item()


def evaluate(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(x) - batch + 1, batch):
            correct += (model(x[first:first + batch]).argmax(1) == y[first:first + batch]).sum().item()
    model.train()
    seen = (len(x) // batch) * batch
    return correct / seen if seen else 0.0


def initial_model(a):
    torch.manual_seed(a.seed)
    return build_model(a.model, a.channels, a.side)


def train(a, rank, world, data, accuracy_before):
    # Own copies of the shared data: first touches of shared pages would page-fault inside the steps. The
    # copies live until exit, so their blocks never move glibc's threshold.
    train_x, train_y, test_x, test_y = (t.clone() for t in data)
    del data
    model = initial_model(a)
    steps = a.warmup + a.iterations
    report = {"model": a.model, "framework": f"pytorch {torch.__version__}", "ranks": world, "batch": a.batch,
              "threads": a.threads, "strategy": "ddp-gloo" if world > 1 else "single", "data": a.data,
              "params": sum(p.numel() for p in model.parameters()), "warmup": a.warmup,
              "online_cpus": os.cpu_count()}
    report["test_accuracy_before"] = accuracy_before
    hook_calls = []  # perf_counter() at each bucket's allreduce launch, this iteration
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_cap_mb)

        def allreduce_hook(state, bucket):
            hook_calls.append(time.perf_counter())
            buf = bucket.buffer().div_(world)  # DDP's default hook averages, then allreduces
            return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

        model.register_comm_hook(None, allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
    iters, losses = [], []
    for it in range(steps):
        hook_calls.clear()
        cpu0 = own_cpu_s()
        faults0 = minor_faults()
        busy0 = machine_busy_s() if rank == 0 else 0.0
        t0 = time.perf_counter()
        first = (it * world + rank) * a.batch
        x, y = train_x[first:first + a.batch], train_y[first:first + a.batch]
        t1 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        t2 = time.perf_counter()
        loss.backward()  # with DDP: returns once every bucket's allreduce has finished
        t3 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t4 = time.perf_counter()
        # Backward compute ends when the last bucket is handed to gloo; the rest is exposed exchange.
        compute_end = max(hook_calls) if hook_calls else t3
        busy1 = machine_busy_s() if rank == 0 else 0.0
        own = reduce(own_cpu_s() - cpu0, dist.ReduceOp.SUM if world > 1 else None)
        faults = reduce(minor_faults() - faults0, dist.ReduceOp.SUM if world > 1 else None)
        total = reduce(t4 - t0, dist.ReduceOp.MAX if world > 1 else None)
        loss_mean = reduce(loss.item(), dist.ReduceOp.SUM if world > 1 else None) / world
        if rank == 0:
            losses.append(loss_mean)
            iters.append({"warmup": it < a.warmup, "total_s": total, "data_s": t1 - t0, "forward_s": t2 - t1,
                          "backward_s": compute_end - t2, "exchange_s": t3 - compute_end, "update_s": t4 - t3,
                          "own_cpu_s": own, "machine_busy_s": busy1 - busy0, "minor_faults": faults,
                          "loss": loss_mean})
    if rank == 0:
        inner = model.module if world > 1 else model
        report["iterations"] = iters
        report["losses"] = losses
        report["test_accuracy_after"] = evaluate(inner, test_x, test_y, a.batch)
        report["layers"] = []
    return report


def bench_comm(rank, world):
    """gloo send/recv ping-pong and allreduce times per message size, as dtsim-train --bench-comm."""
    out = {"ranks": world, "pingpong": [], "allreduce": []}
    for size in BENCH_SIZES_B:
        t = torch.zeros(max(1, size // 4))
        times = []
        for _ in range(BENCH_REPEATS):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            elif rank == 1:
                dist.recv(t, 0)
                dist.send(t, 0)
            times.append((time.perf_counter() - t0) / 2)
        out["pingpong"].append({"bytes": size, "time_s": sorted(times)[len(times) // 2]})
        times = []
        for _ in range(BENCH_REPEATS):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        out["allreduce"].append({"bytes": size, "time_s": sorted(times)[len(times) // 2]})
    return out


def worker(rank, a, port, data, accuracy_before):
    torch.set_num_threads(a.threads)
    world = a.procs
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    report = bench_comm(rank, world) if a.bench_comm else train(a, rank, world, data, accuracy_before)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        text = json.dumps(report, indent=1)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        else:
            print(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="lenet5", choices=["lenet5", "resnet18"])
    p.add_argument("--procs", type=int, default=1, help="processes (DDP over gloo when > 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--batch", type=int, default=32, help="samples per process and iteration")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--data", default="fashion-mnist", choices=["fashion-mnist", "synthetic"])
    p.add_argument("--side", type=int, default=28, help="image side (Fashion-MNIST is resized when not 28)")
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--test-samples", type=int, default=512)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bucket-cap-mb", type=float, default=DDP_BUCKET_CAP_MB, help="DDP bucket size, MiB")
    p.add_argument("--check-model", default="", help="dtsim layer table (JSON) the torch model must equal")
    p.add_argument("--bench-comm", action="store_true", help="measure gloo curves instead of training")
    p.add_argument("--out", default="", help="report file (default: stdout)")
    a = p.parse_args()
    for name in ("procs", "threads", "batch", "iterations", "side", "channels"):
        if getattr(a, name) < 1:
            raise SystemExit(f"train.py: --{name.replace('_', '-')}: expected >= 1, got {getattr(a, name)}")
    if a.bench_comm and a.procs < 2:
        raise SystemExit("train.py: --bench-comm needs --procs >= 2")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    if a.check_model:  # before any process starts, so a mismatch is this process's one-line error
        problems = check_model(build_model(a.model, a.channels, a.side), a.check_model, a.channels, a.side)
        if problems:
            raise SystemExit("train.py: the torch model differs from dtsim's: " + "; ".join(problems))
    data, accuracy_before = None, 0.0
    if not a.bench_comm:
        steps = a.warmup + a.iterations
        train_x, train_y = load_data(a.data, "train", a.channels, a.side, steps * a.batch * a.procs, a.seed)
        test_x, test_y = load_data(a.data, "test", a.channels, a.side, a.test_samples, a.seed + 1)
        torch.set_num_threads(a.threads)
        accuracy_before = evaluate(initial_model(a), test_x, test_y, a.batch)
        data = (train_x, train_y, test_x, test_y)
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(worker, args=(a, port, data, accuracy_before), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
