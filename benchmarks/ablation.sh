#!/usr/bin/env bash
# Ablation report (issue 14 item 8): MAPE of every open accuracy table under ideal -> +transport ->
# +collective library -> +framework -> +variance (benchmarks/ablation.py says what each step sets).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
exec /usr/bin/python3 "$root/benchmarks/ablation.py" "$dtsim" "$root/benchmarks/data/open-measurements.yaml" \
  "$root/benchmarks/data/tf-benchmarks-2017.yaml" "$root/platforms"
