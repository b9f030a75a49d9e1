#!/usr/bin/env bash
# Done-when figure: predicted single-GPU throughput from this host's calibration vs published
# measurements (../shared/reference/open-measurements.yaml): P100 Inception-v3 batch 64 (138 img/s,
# TensorFlow 1.1, Piz Daint P100 PCIe) and GTX 1080 Ti ResNet-50 batch 64 (182 img/s, MXNet, PRACE).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
report() {  # model device batch published_img_per_s
  "$dtsim" calibrate report --model "$1" --device "$2" --batch "$3" --format json | python3 -c '
import json, sys
j = json.load(sys.stdin)
model, device, batch, pub = sys.argv[1:5]
pred = j["samples_per_s"]
fwd_ms, bwd_ms, cov = j["per_sample_fwd_s"] * 1e3, j["per_sample_bwd_s"] * 1e3, j["coverage"] * 100
print(f"{model:13} {device:12} batch {batch:>3}  predicted {pred:7.1f} img/s  published {float(pub):6.1f} img/s  "
      f"predicted/published {pred/float(pub):.2f}  per-sample fwd {fwd_ms:.2f} ms "
      f"bwd {bwd_ms:.2f} ms  coverage {cov:.0f}%")' "$@"
}
report inception_v3 p100-pcie 64 138.23
report inception_v3 p100-sxm2 64 138.23
report resnet50 gtx-1080ti 64 182
