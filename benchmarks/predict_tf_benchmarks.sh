#!/usr/bin/env bash
# Held-out checks of the simulation: TensorFlow's multi-GPU benchmarks (May 2017) inside one DGX-1
# (2-8 P100) and across AWS p2.8xlarge instances (8-64 K80), benchmarks/data/tf-benchmarks-2017.yaml.
# Each model is anchored at its measured 1-GPU throughput; dtsim's prediction is printed beside
# every published row.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
exec /usr/bin/python3 "$root/benchmarks/predict_tf_benchmarks.py" "$dtsim" "$root/benchmarks/data/tf-benchmarks-2017.yaml"
