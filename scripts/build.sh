#!/usr/bin/env bash
# Configures and builds dtsim into build/ (Release with debug info, Ninja).
#   scripts/build.sh          everything: dtsim, its plugins and the test suite (scripts/test.sh)
#   scripts/build.sh --main   only the `dtsim` target, what scripts/run.sh runs: the binary and what it
#                             builds with it (dtsim-train; libdtsim_torch.so where libtorch is
#                             installed), no test executables, so Catch2 is not needed
# DTSIM_BUILD_JOBS sets the parallel jobs (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DTSIM_BUILD_JOBS:-$(nproc)}"
case "${1:-}" in
  "")
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTSIM_BUILD_TESTS=ON >/dev/null
    cmake --build build -j "$jobs" ;;
  --main)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTSIM_BUILD_TESTS=OFF >/dev/null
    cmake --build build -j "$jobs" --target dtsim ;;
  *) echo "build.sh: unknown argument '$1' (expected nothing or --main)" >&2; exit 2 ;;
esac
