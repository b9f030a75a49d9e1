#!/bin/bash
# The page-fault cost of this machine (benchmarks/page_fault_cost.cpp) at 1 and 2 threads, 64 MiB regions,
# 21 repeats each, three runs: the figures of docs/validation.md ("The allocator regime").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/page_fault_cost
g++ -O2 -std=c++20 -pthread "$here/page_fault_cost.cpp" -o "$bin"
uptime
for run in 1 2 3; do
  for threads in 1 2; do "$bin" 64 "$threads" 21; done
done
