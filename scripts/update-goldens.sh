#!/usr/bin/env bash
# Regenerates the golden scenario outputs (tests/scenarios/golden/<name>.csv) from the current code.
# Run it only when a change of predictions is intended, and say why in the commit with the diff.
# Usage: scripts/update-goldens.sh [scenario-name ...]   (default: every scenarios/*.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${DTSIM_BUILD_DIR:-build}"
jobs="${DTSIM_GOLDEN_JOBS:-2}"
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] || bash scripts/build.sh
cmake --build "$build" -j "$jobs" --target dtsim dtsim_golden_check
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in scenarios/*.yaml; do names+=("$(basename "$f" .yaml)"); done
fi
mkdir -p tests/scenarios/golden
for name in "${names[@]}"; do
  [ -f "scenarios/$name.yaml" ] || { echo "update-goldens: no scenario scenarios/$name.yaml" >&2; exit 2; }
  start=$(date +%s)
  DTSIM_DATA_DIR="$PWD" "$build/tests/dtsim_golden_check" --dtsim "$build/apps/dtsim" \
    --scenario "scenarios/$name.yaml" --golden "tests/scenarios/golden/$name.csv" \
    --work "$build/tests/golden/$name" --jobs "$jobs" --update
  echo "update-goldens: $name took $(( $(date +%s) - start )) s"
done
