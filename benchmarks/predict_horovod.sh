#!/usr/bin/env bash
# Held-out check: Horovod's published scaling efficiencies (128 and 512 Pascal GPUs, 4 per server,
# 25 GbE RoCE; benchmarks/data/horovod-2017.yaml) beside dtsim's on the vendor-figure platform that
# file names. Prints each row's difference in efficiency points and their mean absolute value.
# Usage: benchmarks/predict_horovod.sh [path/to/dtsim]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-$root/build/apps/dtsim}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$root}"
[ -x "$dtsim" ] || { echo "predict_horovod.sh: no dtsim binary at $dtsim (build it or pass its path)" >&2; exit 2; }
/usr/bin/python3 - "$dtsim" "$root" <<'PY'
import json, subprocess, sys, time, yaml
dtsim, root = sys.argv[1], sys.argv[2]
ref = yaml.safe_load(open(f"{root}/benchmarks/data/horovod-2017.yaml"))
models = sorted({m for m, _, _ in ref["rows"]})
gpus = sorted({n for _, n, _ in ref["rows"]})
pred = {}
start = time.time()
for m in models:
    out = subprocess.run([dtsim, "predict", "--model", m, "--platform", f"{root}/{ref['platform']}",
                          "--batch", str(ref["batch_per_gpu"]), "--framework", ref["framework"],
                          "--workers", ",".join(str(n) for n in gpus), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    for p in json.loads(out)["points"]:
        pred[(m, p["workers"])] = p["efficiency"]
print(f"{'model':<14}{'GPUs':>6}{'published':>11}{'dtsim':>8}{'points':>8}")
diffs = []
for m, n, eff in ref["rows"]:
    d = 100 * (pred[(m, n)] - eff)
    diffs.append(abs(d))
    print(f"{m:<14}{n:>6}{100 * eff:>10.0f}%{100 * pred[(m, n)]:>7.1f}%{d:>+8.1f}")
print(f"mean absolute difference over {len(diffs)} rows: {sum(diffs) / len(diffs):.1f} points "
      f"({time.time() - start:.1f} s)")
PY
