#!/usr/bin/python3
"""A plain PyTorch training script as a new user writes one, no tuning of any kind: torchvision's
ResNet-18 (10 classes), synthetic 64x64 input, SGD with momentum, 1 process or N processes with
DistributedDataParallel over gloo. The heap is whatever the environment gives (glibc's defaults unless
MALLOC_* variables or an LD_PRELOAD'ed allocator say otherwise): it is the yardstick of issue 40 for
dtsim's allocator regimes (docs/validation.md, "A plain script"). Prints one line per process count:
the median iteration time (of the slowest process), its phases, the process's own CPU time per iteration
(all its threads: the figure to compare on a shared machine) and the median page faults per phase.

Run with /usr/bin/python3 (Debian's python3-torch and python3-torchvision):
  benchmarks/plain_pytorch_train.py --procs 1 --threads 1 --batch 16 --iterations 20
"""
import argparse
import os
import resource
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def worker(rank, a, port, queue):
    torch.set_num_threads(a.threads)
    if a.procs > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.procs)
    torch.manual_seed(1)
    model = torchvision.models.resnet18(num_classes=10)
    if a.procs > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, a.side, a.side)
    y = torch.randint(0, 10, (a.batch,))
    rows = []
    for it in range(a.warmup + a.iterations):
        f0, t0, c0 = faults(), time.perf_counter(), time.process_time()
        loss = F.cross_entropy(model(x), y)
        f1, t1 = faults(), time.perf_counter()
        loss.backward()
        f2, t2 = faults(), time.perf_counter()
        opt.step()
        opt.zero_grad()
        f3, t3, c3 = faults(), time.perf_counter(), time.process_time()
        if it >= a.warmup:
            rows.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2, f1 - f0, f2 - f1, f3 - f2, c3 - c0))
    med = [statistics.median(c) for c in zip(*rows)]
    if queue is not None:
        queue.put((rank, med))
    else:
        report(a, [med])
    if a.procs > 1:
        dist.barrier()
        dist.destroy_process_group()


def report(a, meds):
    m = max(meds, key=lambda r: r[0])
    print(f"procs {a.procs} threads {a.threads} batch {a.batch}: iteration {m[0]*1e3:.1f} ms "
          f"(forward {m[1]*1e3:.1f}, backward {m[2]*1e3:.1f}, update {m[3]*1e3:.1f}), own CPU {m[7]*1e3:.1f} ms "
          f"(all threads); page faults per "
          f"iteration forward {m[4]:.0f} backward {m[5]:.0f} update {m[6]:.0f} "
          f"[MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_', '-')} "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '-')}]", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--side", type=int, default=64)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    if a.procs == 1:
        worker(0, a, 0, None)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = torch.multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, a, port, queue)) for r in range(a.procs)]
    for proc in procs:
        proc.start()
    meds = [queue.get()[1] for _ in procs]
    for proc in procs:
        proc.join()
    report(a, meds)


if __name__ == "__main__":
    main()
