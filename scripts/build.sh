#!/usr/bin/env bash
# Configures and builds dtsim into build/ (Release with debug info, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DTSIM_BUILD_JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
