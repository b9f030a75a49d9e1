#!/usr/bin/env bash
# Held-out check: Intel Caffe's published ResNet-50 throughput on 64 Stampede2 SKX nodes (2 processes
# per node, batch 32, MLSL; benchmarks/data/intel-caffe-stampede2.yaml) beside dtsim's unanchored
# prediction with the intel-caffe-mlsl profile, and dtsim's own 1-node rate. Nothing is fitted to it.
# Usage: benchmarks/predict_intel_caffe.sh [path/to/dtsim]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
[ -x "$dtsim" ] || { echo "predict_intel_caffe.sh: no dtsim binary at $dtsim (build it or pass its path)" >&2; exit 2; }
/usr/bin/python3 - "$dtsim" "$root" <<'PY'
import json, subprocess, sys, yaml
dtsim, root = sys.argv[1], sys.argv[2]
ref = yaml.safe_load(open(f"{root}/benchmarks/data/intel-caffe-stampede2.yaml"))
wpn = ref["workers_per_node"]
workers = [wpn] + [n * wpn for n, _ in ref["rows"]]
out = subprocess.run([dtsim, "predict", "--model", ref["model"], "--platform", ref["platform"],
                      "--batch", str(ref["batch_per_worker"]), "--workers-per-node", str(wpn),
                      "--framework", ref["framework"], "--strategy", "allreduce-ring",
                      "--workers", ",".join(str(w) for w in workers), "--format", "json"],
                     check=True, capture_output=True, text=True).stdout
pred = {p["workers"]: p for p in json.loads(out)["points"]}
one = pred[wpn]["throughput_samples_per_s"]
print(f"dtsim, 1 node ({wpn} processes): {one:.1f} img/s (not published)")
print(f"{'nodes':>6}{'published':>11}{'dtsim':>9}{'error':>8}{'dtsim/node':>12}{'published/node':>16}")
for nodes, img_s in ref["rows"]:
    p = pred[nodes * wpn]["throughput_samples_per_s"]
    print(f"{nodes:>6}{img_s:>11.0f}{p:>9.0f}{100 * (p - img_s) / img_s:>+7.1f}%{p / nodes:>12.1f}{img_s / nodes:>16.1f}")
PY
