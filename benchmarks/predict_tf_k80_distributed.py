"""Held-out check of the simulation: TensorFlow's distributed K80 benchmark on AWS p2.8xlarge.

Each model is anchored at its measured 1-GPU throughput, so the rows test the scaling that dtsim
simulates (intra-node replication, parameter servers over the 10 Gigabit network), not the device
model. Usage: predict_tf_k80_distributed.py DTSIM DATA_YAML
"""
import csv
import io
import subprocess
import sys

import yaml

dtsim, path = sys.argv[1:3]
data = yaml.safe_load(open(path))["aws_k80_distributed"]
errors = []
print("TensorFlow benchmarks, AWS p2.8xlarge, distributed_replicated, synthetic, anchored at 1 GPU:")
for model, (batch, anchor, rows) in data.items():
    gpus = ",".join(str(r[0]) for r in rows)
    ps = ",".join(str(r[1]) for r in rows)
    out = subprocess.run([dtsim, "predict", "--model", model, "--platform", "aws-p2-8xlarge", "--batch", str(batch),
                          "--strategy", "ps-replicated", "--workers", gpus, "--ps", ps, "--anchor", str(anchor),
                          "--format", "csv"], check=True, capture_output=True, text=True).stdout
    predicted = {int(r["workers"]): r for r in csv.DictReader(io.StringIO(out))}
    for n, servers, published in rows:
        p = predicted[n]
        thr = float(p["throughput"])
        err = (thr / published - 1) * 100
        errors.append(abs(err))
        print(f"{model:13} batch {batch:>3}  {n:>3} GPUs {servers:>2} PS  predicted {thr:7.1f}  published {published:7.1f} "
              f"img/s  error {err:+5.1f}%  efficiency predicted {float(p['efficiency']) * 100:5.1f}% "
              f"published {published / (n * anchor) * 100:5.1f}%")
print(f"mean absolute error {sum(errors) / len(errors):.1f}% over {len(errors)} rows")
