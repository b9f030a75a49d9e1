#!/usr/bin/env bash
# Configures and builds dtsim into build/ (Ninja, -O2 without debug information: the same code as
# RelWithDebInfo, whose -g costs 30% of the compile time, measured on apps/cmd_predict.cpp; configure a
# build of your own with -DCMAKE_BUILD_TYPE=RelWithDebInfo to debug).
#   scripts/build.sh          everything: dtsim, its plugins and the test suite (scripts/test.sh)
#   scripts/build.sh --main   only what scripts/run.sh runs and `cmake --install` installs: the `dtsim`
#                             target (the binary, dtsim-train, and libdtsim_torch.so where libtorch is
#                             installed) and, where CUDA and cuDNN are, the module libdtsim_cudnn.so it
#                             loads for `--backend cudnn`; no test executables, so Catch2 is not needed
# DTSIM_BUILD_JOBS sets the parallel jobs (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DTSIM_BUILD_JOBS:-$(nproc)}"
build_type=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG")
case "${1:-}" in
  "")
    cmake -S . -B build -G Ninja "${build_type[@]}" -DDTSIM_BUILD_TESTS=ON >/dev/null
    cmake --build build -j "$jobs" ;;
  --main)
    cmake -S . -B build -G Ninja "${build_type[@]}" -DDTSIM_BUILD_TESTS=OFF >/dev/null
    targets=(dtsim)
    if grep -q '^build dtsim_cudnn: ' build/build.ninja; then targets+=(dtsim_cudnn); fi
    cmake --build build -j "$jobs" --target "${targets[@]}" ;;
  *) echo "build.sh: unknown argument '$1' (expected nothing or --main)" >&2; exit 2 ;;
esac
