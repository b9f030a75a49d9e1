#!/usr/bin/env bash
# Held-out check of the simulation: TensorFlow's distributed K80 benchmark (AWS p2.8xlarge, 8-64 GPUs,
# Inception-v3, ResNet-50, ResNet-152; benchmarks/data/tf-benchmarks-2017.yaml), each model anchored at
# its measured 1-GPU throughput. Prints dtsim's prediction beside every published row.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
exec /usr/bin/python3 "$root/benchmarks/predict_tf_k80_distributed.py" "$dtsim" "$root/benchmarks/data/tf-benchmarks-2017.yaml"
