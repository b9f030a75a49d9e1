#!/usr/bin/env bash
# Wall time of single predictions (targets: 128-worker ResNet-50 <= 2 s, 1,024 workers <= 5 s;
# parameter servers: 1,024 workers x 256 servers <= 5 s, `--ps auto` at 128 workers <= 10 s).
# Prints the CLI wall time and the simulation's own wall_s per point. Run on a quiet machine.
#   benchmarks/predict_speed.sh [path/to/dtsim] [platform] [strategy]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-$here/build/apps/dtsim}"
platform="${2:-piz-daint}"
strategy="${3:-allreduce-ring}"
for w in 128 1024; do
  start=$(date +%s.%N)
  json="$("$dtsim" predict --model resnet50 --platform "$platform" --batch 64 --strategy "$strategy" \
    --workers "$w" --format json)"
  end=$(date +%s.%N)
  python3 - "$json" "$start" "$end" "$w" <<'PY'
import json, sys
p = json.loads(sys.argv[1])["points"][0]
wall = float(sys.argv[3]) - float(sys.argv[2])
target = 2.0 if int(sys.argv[4]) <= 128 else 5.0
print(f"resnet50 {p['workers']:>5} workers: CLI wall {wall:5.2f} s (target <= {target:.0f} s, "
      f"{'ok' if wall <= target else 'SLOW'}), simulation {p['wall_s']:.2f} s, {p['buckets']} buckets, "
      f"{p['throughput_samples_per_s']:.0f} img/s, efficiency {p['efficiency']:.3f}")
PY
done

# Parameter servers (strategy ps, coarse traffic above 64 workers): 1,024 x 256, and the server search.
ps_line() {  # label target_s args...
  local label="$1" target="$2"
  shift 2
  local start end json
  start=$(date +%s.%N)
  json="$("$dtsim" predict --model resnet50 --platform "$platform" --batch 64 --strategy ps --format json "$@")"
  end=$(date +%s.%N)
  python3 - "$json" "$start" "$end" "$label" "$target" <<'PY'
import json, sys
p = json.loads(sys.argv[1])["points"][0]
wall, target = float(sys.argv[3]) - float(sys.argv[2]), float(sys.argv[5])
print(f"resnet50 {sys.argv[4]}: CLI wall {wall:6.2f} s (target <= {target:.0f} s, "
      f"{'ok' if wall <= target else 'SLOW'}), {p['ps_servers']} servers, {p['throughput_samples_per_s']:.0f} img/s, "
      f"efficiency {p['efficiency']:.3f}")
PY
}
ps_line "ps  1024 workers x 256 servers" 5 --workers 1024 --ps 256

# --ps auto at 128 workers (target <= 10 s): the search's candidates run --jobs at a time in child
# processes (DTSIM_PS_AUTO_JOBS, default the machine's cores); the progress line on stderr counts them.
auto_jobs="${DTSIM_PS_AUTO_JOBS:-$(nproc)}"
auto_err="$(mktemp)"
trap 'rm -f "$auto_err"' EXIT
start=$(date +%s.%N)
json="$("$dtsim" predict --model resnet50 --platform "$platform" --batch 64 --strategy ps --format json \
  --workers 128 --ps auto --jobs "$auto_jobs" 2>"$auto_err")"
end=$(date +%s.%N)
python3 - "$json" "$start" "$end" "$auto_jobs" "$(grep 'server counts done' "$auto_err" | tail -1)" <<'PY'
import json, re, sys
p = json.loads(sys.argv[1])["points"][0]
wall, jobs = float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4]
m = re.search(r"(\d+)/\d+ server counts done", sys.argv[5])
print(f"resnet50 ps   128 workers, --ps auto: CLI wall {wall:6.2f} s (target <= 10 s, "
      f"{'ok' if wall <= 10 else 'SLOW'}), --jobs {jobs}, {m.group(1) if m else '?'} server counts simulated, "
      f"chose {p['ps_servers']} servers, {p['throughput_samples_per_s']:.0f} img/s, efficiency {p['efficiency']:.3f}")
PY
