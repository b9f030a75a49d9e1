#!/bin/bash
# Simulated vs published osu_latency points per transport (fabric replicas), and every shipped
# platform's pingpong at the published sizes. Usage: benchmarks/transport_curves.sh [path/to/dtsim]
set -euo pipefail
cd "$(dirname "$0")/.."
export DTSIM="${1:-build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$PWD}"
python3 benchmarks/fit_transports.py | sed -n '/^## /,/^residuals/p' | grep -v '^residuals'
echo
python3 benchmarks/transport_curves.py
