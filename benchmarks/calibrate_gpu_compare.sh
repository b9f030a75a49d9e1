#!/usr/bin/env bash
# Unanchored single-GPU predictions from this host's calibration against published measurements:
# - the two single-GPU rows of ../shared/reference/open-measurements.yaml (CSCS P100 Inception-v3 138.23
#   img/s, TensorFlow 1.1; PRACE GTX 1080 Ti ResNet-50 182 img/s, MXNet);
# - a held-out table nothing in dtsim is fitted to: the TensorFlow benchmark page's P100 and K80 rows
#   (benchmarks/data/tf-benchmarks-2017.yaml);
# - the OSU 2019 device ratios (Skylake vs K80, V100 vs Skylake).
# GPU conv/FC layers come from the kernel model fitted to DeepBench (docs/calibration.md §4b).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
exec /usr/bin/python3 "$root/benchmarks/calibrate_gpu_compare.py" "$dtsim" "$root/benchmarks/data/tf-benchmarks-2017.yaml"
