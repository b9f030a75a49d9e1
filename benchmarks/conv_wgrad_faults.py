#!/usr/bin/python3
"""One 512x512 3x3 Conv2d backward (ResNet-18's layer4 shape at 64x64 input: batch 16, 2x2 spatial) in a loop:
its page faults and process CPU time per call, in whatever heap regime the environment gives (issue 40,
docs/calibration.md "The heap a pass runs in"). glibc's defaults fault its 9 MiB weight gradient in on every
call; MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=67108864 do not.

  /usr/bin/python3 benchmarks/conv_wgrad_faults.py
"""
import resource
import statistics
import time

import torch

CALLS = 30
WARMUP = 5


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main():
    torch.set_num_threads(1)
    conv = torch.nn.Conv2d(512, 512, 3, padding=1, bias=False)
    x = torch.randn(16, 512, 2, 2)
    grad = torch.ones(16, 512, 2, 2)
    rows = []
    for _ in range(CALLS):
        y = conv(x)
        f0, c0, t0 = minor_faults(), time.process_time(), time.perf_counter()
        y.backward(grad)
        rows.append((minor_faults() - f0, time.process_time() - c0, time.perf_counter() - t0))
    rows = rows[WARMUP:]
    print(f"conv 512x512 3x3 backward, batch 16, 2x2: faults {statistics.median(r[0] for r in rows):.0f} per call, "
          f"CPU {statistics.median(r[1] for r in rows) * 1e3:.2f} ms, wall {statistics.median(r[2] for r in rows) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
