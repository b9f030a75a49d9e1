#!/usr/bin/env bash
# Held-out checks of transformer training: the published single-GPU, one-node and large-scale
# throughputs of benchmarks/data/llm-*.yaml (sources: each file's header; list: benchmarks/README.md)
# beside dtsim's predictions, with the relative error per row and the mean absolute error per set.
# Rows needing a predict flag this dtsim lacks are skipped with the reason. Options go to
# benchmarks/accuracy_transformers.py (--set single|large, --only REGEX, --jobs N, --timeout S, --check,
# --dry-run).
# Usage: benchmarks/accuracy_transformers.sh [path/to/dtsim] [options]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${DTSIM:-$root/build/apps/dtsim}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then dtsim="$1"; shift; fi
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
[ -x "$dtsim" ] || { echo "accuracy_transformers.sh: no dtsim binary at $dtsim (build it or pass its path)" >&2; exit 2; }
exec /usr/bin/python3 "$root/benchmarks/accuracy_transformers.py" "$@" "$dtsim" "$root"/benchmarks/data/llm-*.yaml
