"""Unanchored single-GPU predictions (GPU kernel model, docs/calibration.md §4b) against published figures."""
import json
import subprocess
import sys

import yaml

dtsim, path = sys.argv[1:3]


def predict(model, device, batch, sockets=1):
    """dtsim's samples/s and the measured coverage of the host calibration."""
    out = subprocess.run([dtsim, "calibrate", "report", "--model", model, "--device", device, "--batch", str(batch),
                          "--sockets", str(sockets), "--format", "json"], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    return j["samples_per_s"], j["coverage"]


def row(label, model, device, batch, published):
    pred, coverage = predict(model, device, batch)
    err = (pred / published - 1) * 100
    print(f"{label:8} {model:13} {device:11} batch {batch:>3}  predicted {pred:7.1f}  published {published:7.1f} img/s  "
          f"error {err:+6.1f}%  host coverage {coverage * 100:3.0f}%")
    return abs(err)


print("Published single-GPU throughputs, unanchored:")
row("CSCS", "inception_v3", "p100-pcie", 64, 138.23)   # TF 1.1, Piz Daint P100 PCIe, synthetic
row("PRACE", "resnet50", "gtx-1080ti", 64, 182)         # MXNet, real data
errors = {}
for model, device, batch, published in yaml.safe_load(open(path))["single_gpu"]["rows"]:
    errors.setdefault(device, []).append(row("TF page", model, device, batch, published))
for device, e in errors.items():
    print(f"TF page {device}: mean absolute error {sum(e) / len(e):.1f}% over {len(e)} rows")

# OSU 2019 (open-measurements.yaml, osu_cpu_study_facts): "the fastest Skylake is up to 2.35x faster than a
# K80 (Inception-v4) and up to 3.32x slower than a V100 (ResNet-101)". Skylake = Stampede2's 2x Platinum 8160
# (48 cores, one process); the study's batch is not in the reference, 64 per device is assumed.
skx_v4, _ = predict("inception_v4", "xeon-platinum-8160", 64, sockets=2)
k80_v4, _ = predict("inception_v4", "k80-gk210", 64)
skx_101, _ = predict("resnet101", "xeon-platinum-8160", 64, sockets=2)
v100_101, _ = predict("resnet101", "v100-sxm2-32gb", 64)
print(f"OSU      Inception-v4 Skylake/K80  {skx_v4 / k80_v4:.2f}x (published up to 2.35x)  "
      f"Skylake {skx_v4:.1f}, K80 {k80_v4:.1f} img/s")
print(f"OSU      ResNet-101 V100/Skylake {v100_101 / skx_101:.2f}x (published up to 3.32x)  "
      f"Skylake {skx_101:.1f}, V100 {v100_101:.1f} img/s")
