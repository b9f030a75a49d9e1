"""Held-out checks: TensorFlow's benchmarks (May 2017), single GPU unanchored, then multi-GPU.

The single-GPU rows test the GPU compute model (kernel model, docs/calibration.md) with no anchor.
In the multi-GPU sets each model is anchored at its measured 1-GPU throughput, so the rows test the scaling that dtsim
simulates (intra-node links, parameter servers, allreduce, the network), not the device model.
Usage: predict_tf_benchmarks.py DTSIM DATA_YAML
"""
import csv
import io
import json
import subprocess
import sys

import yaml

SETS = {
    "dgx1_p100_single_server": "one DGX-1 (8 P100, NVLink)",
    "aws_k80_distributed": "AWS p2.8xlarge instances (8 K80 each, 10 Gigabit), distributed_replicated",
}

dtsim, path = sys.argv[1:3]
data = yaml.safe_load(open(path))

print("TensorFlow benchmarks, single GPU, synthetic, unanchored (GPU compute model):")
single = {}
for model, device, batch, published in data["single_gpu"]["rows"]:
    out = subprocess.run([dtsim, "calibrate", "report", "--model", model, "--device", device, "--batch", str(batch),
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    thr = json.loads(out)["samples_per_s"]
    err = (thr / published - 1) * 100
    single.setdefault(device, []).append(abs(err))
    print(f"  {model:13} {device:10} batch {batch:>3}  predicted {thr:7.1f}  published {published:7.1f} img/s  error {err:+6.1f}%")
for device, e in single.items():
    print(f"  single GPU {device}: mean absolute error {sum(e) / len(e):.1f}% over {len(e)} rows")
flat = [x for e in single.values() for x in e]
print(f"  single GPU, all: mean absolute error {sum(flat) / len(flat):.1f}% over {len(flat)} rows")
all_errors = []
for name, title in SETS.items():
    platform = data[name]["platform"]
    errors = []
    print(f"TensorFlow benchmarks, {title}, synthetic, anchored at 1 GPU (platform {platform}):")
    for model, m in data[name]["models"].items():
        rows = m["rows"]
        cmd = [dtsim, "predict", "--model", model, "--platform", platform, "--batch", str(m["batch"]),
               "--strategy", m["strategy"], "--workers", ",".join(str(r[0]) for r in rows), "--anchor", str(m["anchor"]),
               "--format", "csv"]
        if m["strategy"].startswith("ps"):
            cmd += ["--ps", ",".join(str(r[1]) for r in rows)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        predicted = {int(r["workers"]): r for r in csv.DictReader(io.StringIO(out))}
        for gpus, servers, published in rows:
            p = predicted[gpus]
            thr = float(p["throughput"])
            err = (thr / published - 1) * 100
            errors.append(abs(err))
            print(f"  {model:13} batch {m['batch']:>3} {m['strategy']:14} {gpus:>3} GPUs {servers:>2} PS  "
                  f"predicted {thr:7.1f}  published {published:7.1f} img/s  error {err:+5.1f}%  "
                  f"efficiency predicted {float(p['efficiency']) * 100:5.1f}% "
                  f"published {published / (gpus * m['anchor']) * 100:5.1f}%")
    print(f"  {name}: mean absolute error {sum(errors) / len(errors):.1f}% over {len(errors)} rows")
    all_errors += errors
print(f"all sets: mean absolute error {sum(all_errors) / len(all_errors):.1f}% over {len(all_errors)} rows")
