#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${DTSIM_TEST_JOBS:-2}" --timeout 600
