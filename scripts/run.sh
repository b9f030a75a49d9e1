#!/usr/bin/env bash
# The main job: installs dependencies, builds dtsim, runs the default scenario as a sweep and plots it.
# Results land in results/default/ (CSV, JSON lines, PNG and SVG plots).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
out="${1:-results/default}"
build/apps/dtsim sweep scenarios/default.yaml --out "$out"
build/apps/dtsim plot "$out" --out "$out"
echo "dtsim: results and plots in $out/"
