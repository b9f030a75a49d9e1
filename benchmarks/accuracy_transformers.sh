#!/usr/bin/env bash
# Held-out checks of transformer training: published single-GPU, one-node and large-scale throughputs
# (benchmarks/data/llm-*.yaml: Megatron-LM SC'21, Korthikanti et al. 2022, Llama 3 405B, BLOOM-176B,
# NeMo 24.07, Megatron Bridge 25.11, NVIDIA's DGX Cloud recipes, MosaicML MPT, torchtitan,
# DeepLearningExamples BERT) beside dtsim's predictions, with the relative error per row and the mean absolute error per set.
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
