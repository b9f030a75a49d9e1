#!/bin/bash
# Ring allreduce on 8-GPU PCIe nodes with the pcie transport (docs/transports.md): the vendor-figure
# platform benchmarks/data/transports/p100-pcie-2socket-fdr.yaml at 2-32 GPUs and 67 / 258 MB, and
# aws-p2-8xlarge at 8 GPUs and 128 MB. Pass a second dtsim to print both side by side (e.g. before / after).
# Usage: benchmarks/pcie_allreduce.sh [path/to/dtsim] [path/to/other/dtsim]
set -euo pipefail
cd "$(dirname "$0")/.."
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$PWD}"
A="${1:-build/apps/dtsim}"
B="${2:-}"
P=benchmarks/data/transports/p100-pcie-2socket-fdr.yaml
run() {  # binary platform workers bytes -> "time_ms busbw_GBps"
  local per=$(( $3 < 8 ? $3 : 8 ))
  "$1" comm --platform "$2" --pattern allreduce-ring --workers "$3" --workers-per-node "$per" --bytes "$4" \
    --format csv | tail -1 | awk -F, '{printf "%8.3f %7.2f", $6 * 1e3, $8}'
}
printf "%-24s %7s %6s  %8s %7s" platform workers bytes "ms" busbw
[ -n "$B" ] && printf "  %8s %7s" "ms(2)" "busbw(2)"
echo
cases=()
for w in 2 4 8 16 32; do for b in 67MB 258MB; do cases+=("$P $w $b"); done; done
cases+=("aws-p2-8xlarge 8 128MB")
for c in "${cases[@]}"; do
  set -- $c
  printf "%-24s %7s %6s  %s" "$(basename "$1" .yaml)" "$2" "$3" "$(run "$A" "$1" "$2" "$3")"
  [ -n "$B" ] && printf "  %s" "$(run "$B" "$1" "$2" "$3")"
  echo
done
