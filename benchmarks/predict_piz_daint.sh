#!/usr/bin/env bash
# Accuracy of `dtsim predict` against the CSCS 2017 Piz Daint table (InceptionV3, batch 64 per GPU,
# TensorFlow parameter servers, synthetic data): per-row error and MAPE. Usage:
#   benchmarks/predict_piz_daint.sh [path/to/dtsim] [extra predict flags...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-$here/build/apps/dtsim}"
shift || true
ref="${DTSIM_REFERENCE_DIR:-$here/benchmarks/data}/open-measurements.yaml"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
"$dtsim" predict --model inception_v3 --platform piz-daint --batch 64 --strategy ps \
  --workers 1,2,4,8,16,32,64,128 --ps 1,1,3,2,4,12,40,116 --anchor 138.23 --format json --explain "$@" >"$out"
end=$(date +%s.%N)
python3 - "$out" "$ref" "$start" "$end" <<'PY'
import json, sys, yaml
pred = json.load(open(sys.argv[1]))["points"]
rows = yaml.safe_load(open(sys.argv[2]))["piz_daint_inception_v3"]["rows"]
# Synthetic-data rows: the published best per worker count (variable update as published).
measured = {w: (ps, upd, thr) for w, ps, upd, real, thr in rows if not real}
print(f"{'workers':>7} {'ps':>4} {'published':>10} {'update':>22} {'predicted':>10} {'error%':>7}  bottleneck")
errs = []
for p in pred:
    w = p["workers"]
    if w not in measured:
        continue
    ps, upd, thr = measured[w]
    e = 100.0 * (p["throughput_samples_per_s"] - thr) / thr
    if w != 1:  # the 1-GPU row is the anchor: its error is 0 by construction
        errs.append(abs(e))
    print(f"{w:>7} {p['ps_servers']:>4} {thr:>10.1f} {upd:>22} {p['throughput_samples_per_s']:>10.1f} {e:>+7.1f}  {p['bottleneck']}")
print(f"MAPE over the {len(errs)} predicted rows (anchor excluded): {sum(errs)/len(errs):.1f}%")
print(f"wall time of the prediction: {float(sys.argv[4]) - float(sys.argv[3]):.1f} s")
PY
