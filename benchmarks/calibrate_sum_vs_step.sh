#!/usr/bin/env bash
# Done-when figure: the sum of calibrated per-layer times of one training step vs a directly timed
# full forward+backward+update of the same network built from the same oneDNN primitives (target:
# within 10%), for LeNet-5 and ResNet-18. Usage: benchmarks/calibrate_sum_vs_step.sh (DTSIM=...)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
db="${DTSIM_CALIBRATION_DB:-$root/calibrate/data/calibration.json}"
"$dtsim" calibrate check --model lenet5 --batch 64 --db "$db" --quiet
"$dtsim" calibrate check --model resnet18 --batch 16 --db "$db" --quiet
