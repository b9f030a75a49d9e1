#!/usr/bin/env bash
# Work per thread: times the probe's layers (ResNet-152 stage-3/4 shapes,
# data/models/work_per_thread_probe.yaml) with `dtsim calibrate` at batch 1-64 and 1 and 2 threads into
# a database of their own, then fits each pass's fixed cost and per-sample cost (work_per_thread.py), and
# prints the same fit of DeepBench's published KNL7250 sweep. docs/calibration.md, "Work per thread".
# Usage: benchmarks/work_per_thread.sh [DTSIM] [DB]   (default DB: /tmp/dtsim-work-per-thread.json; resumable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dtsim="${1:-${DTSIM:-$here/../build/apps/dtsim}}"
db="${2:-/tmp/dtsim-work-per-thread.json}"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)  ($(date -u +%FT%TZ))"
for threads in 1 2; do
  for batch in 1 2 4 8 16 32 64; do
    "$dtsim" calibrate --model "$here/data/models/work_per_thread_probe.yaml" --batch "$batch" \
      --threads "$threads" --db "$db" --quiet
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)  ($(date -u +%FT%TZ))"
python3 "$here/work_per_thread.py" --db "$db"
