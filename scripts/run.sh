#!/usr/bin/env bash
# The main job: installs the main job's dependencies, builds the dtsim binary (no tests), runs the
# default scenario as a sweep and plots it. scripts/test.sh installs and builds the rest.
# Results land in results/default/ (CSV, JSON lines, PNG and SVG plots).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh --main
out="${1:-results/default}"
build/apps/dtsim sweep scenarios/default.yaml --out "$out"
build/apps/dtsim plot "$out" --out "$out"
echo "dtsim: results and plots in $out/"
