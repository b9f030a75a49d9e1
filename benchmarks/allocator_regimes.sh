#!/bin/bash
# The allocator regimes on this machine (issue 40, docs/validation.md "The allocator regime"): for each
# regime, a plain PyTorch script (benchmarks/plain_pytorch_train.py: ResNet-18, 64x64, batch 16, no tuning)
# at 1 x 1, 1 x 2 threads and 2 x 1 DDP over gloo, then `dtsim validate --framework pytorch` with the same
# shapes, which runs its own trainer in the regime, calibrates with libtorch in it and predicts.
# Usage: benchmarks/allocator_regimes.sh [build dir] [regimes...]   (default: build, glibc glibc-held)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
regimes=("$@")
[ ${#regimes[@]} -gt 0 ] || regimes=(glibc glibc-held)
env_of() {  # the environment of a regime, as calibrate/allocator.cpp starts a process in it
  case "$1" in
    glibc) echo "" ;;
    glibc-held) echo "MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=67108864" ;;
    jemalloc) echo "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" ;;
    tcmalloc) echo "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4" ;;
    *) echo "allocator_regimes.sh: unknown regime '$1'" >&2; exit 2 ;;
  esac
}
shape=(--model resnet18 --side 64 --channels 3 --data synthetic --batch 16 --iterations 20 --warmup 5)
for regime in "${regimes[@]}"; do
  echo "== regime $regime"; uptime
  for pt in "1 1" "1 2" "2 1"; do
    set -- $pt
    env $(env_of "$regime") /usr/bin/python3 "$here/plain_pytorch_train.py" --procs "$1" --threads "$2" \
      --batch 16 --iterations 20 --warmup 5
  done
  "$build/apps/dtsim" validate --framework pytorch "${shape[@]}" --ranks 1,2 --threads 1 --allocator "$regime"
  "$build/apps/dtsim" validate --framework pytorch "${shape[@]}" --ranks 1 --threads 2 --allocator "$regime"
done
