#!/bin/bash
# Allreduce bus bandwidth of today's NVSwitch and rail-NIC nodes against nccl-tests all_reduce_perf
# (../shared/reference/llm-hardware.md): 8 GPUs on one NVSwitch with NVLink SHARP (allreduce-nvls) and
# without (rings), 2 x 8 H100 over 8 x 400 Gb/s rails per node (NCCL's NVLS_TREE: allreduce-nvls), and
# 2 x 8 A100 over 4 x 100 Gb/s EFA per node (NCCL's tree on 2 nodes), at 1, 4 and 16 GiB. Prints dtsim's
# bus bandwidth, the measured one and the difference; exits 1 when a plateau figure (every row but the
# informational 1 GiB p5 one, marked "info") is off by more than 15%.
# Usage: benchmarks/nccl_busbw.sh [path/to/dtsim]
set -euo pipefail
cd "$(dirname "$0")/.."
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$PWD}"
D="${1:-build/apps/dtsim}"
busbw() {  # platform pattern workers bytes -> busbw in GB/s
  "$D" comm --platform "$1" --pattern "$2" --workers "$3" --workers-per-node 8 --bytes "$4" --format csv |
    tail -1 | awk -F, '{printf "%.1f", $8}'
}
# case: platform pattern workers sizes measured_GBps what was measured (the plateau figure for every size)
cases=(
  "dgx-h100-superpod allreduce-nvls 8 1GiB,4GiB,16GiB 482.26 8x H200 NVSwitch, NVLS, 16 GiB"
  "dgx-h100-superpod allreduce-ring 8 1GiB,4GiB,16GiB 367.61 8x H200 NVSwitch, NVLS disabled, 16 GiB"
  "dgx-h100-superpod allreduce-nvls 16 4GiB,16GiB 487.09 2x p5.48xlarge (EFA 3.2 Tb/s), 16 GiB"
  "dgx-h100-superpod allreduce-nvls 16 16GiB 464.57 2x OCI BM.GPU.H100.8 (RoCE 3.2 Tb/s), 16 GiB"
  "dgx-h100-superpod allreduce-nvls 16 1GiB 436.95 info: 2x p5.48xlarge (EFA 3.2 Tb/s), 1 GiB (below the plateau)"
  "aws-p4de allreduce-tree 16 1GiB,2GiB,16GiB 78.33 2x p4de (EFA 400 Gb/s), 2 GiB"
)
printf "%-18s %-15s %3s %6s %9s %9s %7s  %s\n" platform pattern gpu bytes "dtsim" "nccl" "diff" "measured on"
worst=0
for c in "${cases[@]}"; do
  set -- $c
  platform=$1 pattern=$2 workers=$3 sizes=$4 measured=$5
  shift 5
  for bytes in ${sizes//,/ }; do
    got=$(busbw "$platform" "$pattern" "$workers" "$bytes")
    diff=$(awk -v a="$got" -v b="$measured" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }')
    printf "%-18s %-15s %3s %6s %9s %9s %7s  %s\n" "$platform" "$pattern" "$workers" "$bytes" "$got" "$measured" "$diff" "$*"
    [[ "$*" == info:* ]] && continue
    worst=$(awk -v a="$got" -v b="$measured" -v w="$worst" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; print (d > w ? d : w) }')
  done
done
awk -v w="$worst" 'BEGIN { printf "largest difference: %.1f%%\n", w * 100; exit (w > 0.15) }'
