#!/usr/bin/env bash
# Calibrates this host for the zoo models the studies use and writes calibrate/data/calibration.json.
# Idempotent and resumable: every finished (shape, pass) is saved at once; a re-run times only what is
# missing or was stored as "disturbed". Run it on a quiet machine (docs/calibration.md, "Shipping").
# Usage: scripts/calibrate-host.sh [--quick]     (DTSIM=/path/to/dtsim to choose the binary)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
[[ -x "$dtsim" ]] || { echo "calibrate-host: no dtsim binary at $dtsim (build first or set DTSIM=)" >&2; exit 2; }
db="${DTSIM_CALIBRATION_DB:-$root/calibrate/data/calibration.json}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
all_threads="$(nproc)"

# model:batch pairs at every CPU's threads. Batches are those the scenarios use; other batches use the
# same shape's efficiency at the nearest calibrated batch (build_profile's batch-scaling rule).
# resnet101/152 share every shape with resnet50: they cost only their update step.
main_set=(lenet5:64 resnet20:64 resnet18:32 alexnet:32 resnet50:32 resnet101:32 resnet152:32
          inception_v3:32 inception_v4:32 vgg16:16 resnet50:16 resnet50:64)
# model:batch pairs at 1 thread, alone and as co-run copies: the threads-per-process fit (device
# model) needs the same shapes at 1 thread, at all threads, and at 1 thread with every core busy.
fit_set=(lenet5:64 resnet18:32 resnet50:32)
if [[ "${1:-}" == "--quick" ]]; then
  main_set=(lenet5:64 resnet18:32 resnet50:32)
  fit_set=(lenet5:64 resnet18:32)
fi

start=$(date +%s)
run() {  # threads model:batch
  local threads="$1" model="${2%%:*}" batch="${2##*:}"
  echo "== $model batch $batch, $threads thread(s)"
  "$dtsim" calibrate --model "$model" --batch "$batch" --threads "$threads" --db "$db" --quiet
}
for mb in "${main_set[@]}"; do run "$all_threads" "$mb"; done
if (( all_threads > 1 )); then
  for mb in "${fit_set[@]}"; do run 1 "$mb"; done
  # The same shapes as $all_threads single-thread copies at once: the co-run slowdown that separates
  # shared-hardware loss from the software's serial fraction (docs/calibration.md, section 4).
  for mb in "${fit_set[@]}"; do
    echo "== ${mb%%:*} batch ${mb##*:}, 1 thread x $all_threads co-run copies"
    "$dtsim" calibrate --model "${mb%%:*}" --batch "${mb##*:}" --threads 1 --instances "$all_threads" --db "$db" --quiet
  done
fi
echo "calibrate-host: done in $(( $(date +%s) - start )) s; database $db"
