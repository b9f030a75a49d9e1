#!/usr/bin/env bash
# Horovod with NCCL against Horovod built without GPU operations (GPU tensors staged through host memory,
# Open MPI's host allreduce: collective library horovod-host-openmpi-4.0) on the same GPU clusters, same
# model and batch: iteration time, throughput and scaling efficiency of each, and their ratio.
# docs/collective-libraries.md "Horovod on host buffers". No published figures are compared here.
# Usage: benchmarks/horovod_host_staged.sh [path/to/dtsim]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-${DTSIM:-$root/build/apps/dtsim}}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
[ -x "$dtsim" ] || { echo "horovod_host_staged.sh: no dtsim binary at $dtsim (build it or pass its path)" >&2; exit 2; }
/usr/bin/python3 - "$dtsim" "$root" <<'PY'
import json, subprocess, sys
dtsim, root = sys.argv[1], sys.argv[2]
# [platform, framework, model, batch per GPU, GPUs]
runs = [
    ("piz-daint", "horovod", "resnet50", 64, "16,64"),
    ("taiwania2-ib", "horovod", "resnet50", 64, "16,64"),
    ("taiwania2-ib", "horovod", "vgg16", 64, "16,64"),
    (f"{root}/benchmarks/data/transports/p100-pcie-4gpu-25gbe.yaml", "horovod-0.16", "resnet101", 64, "16,128"),
    (f"{root}/benchmarks/data/transports/p100-pcie-4gpu-25gbe.yaml", "horovod-0.16", "vgg16", 64, "16,128"),
]
libs = ["nccl-2.7", "horovod-host-openmpi-4.0"]
print(f"{'platform':<22}{'model':<11}{'GPUs':>5}  {'NCCL s/it':>10}{'eff':>7}  {'host s/it':>10}{'eff':>7}  {'host/NCCL':>9}")
for plat, fw, model, batch, gpus in runs:
    res = {}
    for lib in libs:
        out = subprocess.run([dtsim, "predict", "--model", model, "--platform", plat, "--batch", str(batch),
                              "--framework", fw, "--collective-library", lib, "--workers", gpus,
                              "--format", "json"], check=True, capture_output=True, text=True).stdout
        for p in json.loads(out)["points"]:
            res[(lib, p["workers"])] = p
    name = plat.rsplit("/", 1)[-1].removesuffix(".yaml")
    for n in (int(g) for g in gpus.split(",")):
        a, b = res[(libs[0], n)], res[(libs[1], n)]
        print(f"{name:<22}{model:<11}{n:>5}  {a['iteration_time_s']:>10.4f}{a['efficiency']:>7.3f}  "
              f"{b['iteration_time_s']:>10.4f}{b['efficiency']:>7.3f}  {b['iteration_time_s'] / a['iteration_time_s']:>9.2f}")
PY
