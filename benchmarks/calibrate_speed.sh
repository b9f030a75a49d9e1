#!/usr/bin/env bash
# Done-when figures of calibration speed: ResNet-50 batch 32 into a fresh database (target <= 60 s
# wall on a quiet 2-core host), then the same command again (target <= 2 s: everything reused).
# Usage: benchmarks/calibrate_speed.sh [model] [batch]   (DTSIM=/path/to/dtsim)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
model="${1:-resnet50}"
batch="${2:-32}"
db="$(mktemp -d)/calibration.json"
trap 'rm -rf "$(dirname "$db")"' EXIT
t0=$(date +%s.%N)
"$dtsim" calibrate --model "$model" --batch "$batch" --db "$db" --quiet
t1=$(date +%s.%N)
"$dtsim" calibrate --model "$model" --batch "$batch" --db "$db" --quiet
t2=$(date +%s.%N)
echo "uptime: $(uptime)"
printf 'first run (fresh database): %.2f s wall   [target <= 60 s when quiet]\n' "$(echo "$t1 - $t0" | bc)"
printf 'second run (reuse):         %.2f s wall   [target <= 2 s]\n' "$(echo "$t2 - $t1" | bc)"
