#!/bin/bash
# The memory copy bandwidth of this machine (benchmarks/copy_bandwidth.cpp): 1 GiB arrays, 7 repeats, three
# runs of 1 thread, one thread per core in one process, and one single-thread process per core at once (as
# DDP's ranks run; each prints its own rate, their sum is the node's); the source of the `host` device's
# mem_bandwidth_Bps (platforms/devices.yaml). Run it on a quiet machine: the load average is printed first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/copy_bandwidth
g++ -O3 -march=native -std=c++20 -pthread "$here/copy_bandwidth.cpp" -o "$bin"
cores=$(nproc)
uptime
for run in 1 2 3; do
  "$bin" 1024 1 7
  "$bin" 1024 "$cores" 7
  echo "$cores processes of 1 thread at once:"
  for ((p = 0; p < cores; ++p)); do "$bin" 1024 1 7 & done
  wait
done
uptime
