#!/usr/bin/env bash
# Wall time and peak memory of a 25 MB coarse ring allreduce simulation for 16, 128, 1,024 and 4,096
# workers (target: 1,024 workers <= 0.5 s). Platform: taiwania2-ib (8 V100 per node, EDR fat tree);
# for 4,096 workers (512 nodes, more than Taiwania 2's 252) a copy with 512 nodes and 128 leaf
# switches is generated. Usage: benchmarks/comm_scaling.sh [path/to/dtsim] [bytes] [mode]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dtsim="${1:-$here/build/apps/dtsim}"
bytes="${2:-25MB}"
mode="${3:-coarse}"
export DTSIM_DATA_DIR="${DTSIM_DATA_DIR:-$here}"
[ -x "$dtsim" ] || { echo "comm_scaling.sh: no dtsim binary at $dtsim (build it or pass its path)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "comm_scaling.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
big="$tmp/taiwania2-ib-512.yaml"
sed -e 's/^nodes: 252/nodes: 512/' -e 's/down: \[4, 63\]/down: [4, 128]/' \
  "$here/platforms/taiwania2-ib.yaml" > "$big"
grep -q '^nodes: 512' "$big" || { echo "comm_scaling.sh: could not derive the 512-node platform" >&2; exit 1; }

printf '%-8s %-10s %-14s %-12s %-10s %-10s %-12s\n' workers flows sim_time_s busbw_GBps child_s wall_s peak_rss_MB
for n in 16 128 1024 4096; do
  platform=taiwania2-ib
  [ "$n" -gt 2016 ] && platform="$big"
  /usr/bin/time -f '%e %M' -o "$tmp/time" \
    "$dtsim" comm --platform "$platform" --pattern allreduce-ring --workers "$n" --bytes "$bytes" \
    --mode "$mode" --format json > "$tmp/out.json"
  read -r wall rss_kb < "$tmp/time"
  python3 - "$tmp/out.json" "$n" "$wall" "$rss_kb" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n, wall, rss_kb = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
print(f"{n:<8} {j['flows']:<10} {j['time_s']:<14.6g} {j['busbw_Bps']/1e9:<12.4g} {j['wall_s']:<10.3f} {wall:<10.2f} {rss_kb/1024:<12.1f}")
PY
done
echo "child_s: simulation incl. platform build, in the child process; wall_s: whole command; peak RSS of the largest process."
