#!/usr/bin/env bash
# Wall time of single predictions (targets: 128-worker ResNet-50 <= 2 s, 1,024 workers <= 5 s; data
# parallelism at 1,024-16,384 workers, below;
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

# Data parallelism at scale (issue targets): the default strategy (allreduce-auto: the collective library,
# NCCL, picks per call), the ring, Horovod's runtime; median CLI wall of DP_REPEATS runs (default 3) after
# a warm-up, with the peak RSS of the last run (/usr/bin/time). 16,384 workers: the ring only, one run.
dp_repeats="${DP_REPEATS:-3}"
speed_line() {  # kind(dp|layout) label target_s target_GB repeats predict-args...
  local kind="$1" label="$2" target="$3" target_gb="$4" reps="$5"
  shift 5
  local walls=() json="" start end i rss_file
  rss_file="$(mktemp)"
  for ((i = 0; i <= reps; i++)); do
    start=$(date +%s.%N)
    if ! json="$(/usr/bin/time -f "%M" -o "$rss_file" timeout "$limit" "$dtsim" predict --format json "$@")"; then
      echo "$label: stopped after ${limit} s or failed (target <= ${target} s, SLOW)"
      rm -f "$rss_file"
      return 0
    fi
    end=$(date +%s.%N)
    ((i > 0 || reps == 0)) && walls+=("$(python3 -c "print($end - $start)")")
  done
  python3 - "$json" "$kind" "$label" "$target" "$target_gb" "$(cat "$rss_file")" "${walls[@]}" <<'PY'
import json, statistics, sys
p = json.loads(sys.argv[1])["points"][0]
kind, label = sys.argv[2], sys.argv[3]
target, target_gb, rss_gb = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]) / 1e6
walls = [float(w) for w in sys.argv[7:]]
wall = statistics.median(walls)
ok = wall <= target and rss_gb <= target_gb
tail = (f"{p['flows']} flows, {p['throughput_samples_per_s']:.0f} img/s, efficiency {p['efficiency']:.3f}" if kind == "dp"
        else f"{p['activities']} activities, {p['tokens_per_s']:.0f} tokens/s, MFU {100 * p['mfu']:.1f}%")
print(f"{label}: CLI wall median {wall:6.2f} s of {len(walls)} (target <= {target:.0f} s), "
      f"peak RSS {rss_gb:.2f} GB (target <= {target_gb:.0f} GB), {'ok' if ok else 'SLOW'}; simulation "
      f"{p['wall_s']:.2f} s, {tail}")
PY
  rm -f "$rss_file"
}
dp_line() {  # label target_s target_GB repeats args...: ResNet-50 at batch 64 on $platform
  local label="$1" target="$2" target_gb="$3" reps="$4"
  shift 4
  speed_line dp "resnet50 $label" "$target" "$target_gb" "$reps" --model resnet50 --platform "$platform" --batch 64 "$@"
}
limit="${PS_TIMEOUT_S:-120}"
echo "load average before the data-parallel rows: $(cut -d' ' -f1-3 /proc/loadavg)"
dp_line "allreduce-auto  1024 workers" 1 4 "$dp_repeats" --workers 1024
dp_line "allreduce-auto  4096 workers" 3 4 "$dp_repeats" --workers 4096
dp_line "allreduce-ring  4096 workers" 2 4 "$dp_repeats" --workers 4096 --strategy allreduce-ring
dp_line "horovod         1024 workers" 5 4 "$dp_repeats" --workers 1024 --framework horovod
# 16,384 workers exceed Piz Daint's 5,320 nodes: the same system grown to 16 dragonfly groups of 16 chassis
# (16,384 node slots), a speed test of the simulator, not a machine that exists. Groups are widened rather
# than added: SimGrid's dragonfly routes at most routers_per_chassis (16) groups (docs/simgrid-notes.md).
big="$(mktemp --suffix=.yaml)"
sed -e 's/^nodes: 5320/nodes: 16384/' -e 's/^name: piz-daint/name: piz-daint-16k/' \
    -e 's/groups: 14 /groups: 16 /' -e 's/chassis_per_group: 6 /chassis_per_group: 16 /' \
    "$here/platforms/piz-daint.yaml" > "$big"
platform_saved="$platform"
platform="$big"
dp_line "allreduce-ring 16384 workers (Piz Daint grown to 16 groups x 16 chassis)" 30 4 0 --workers 16384 --strategy allreduce-ring
platform="$platform_saved"
rm -f "$big"
echo "load average after the data-parallel rows: $(cut -d' ' -f1-3 /proc/loadavg)"

# Transformer layouts at scale (issue targets; docs/parallel-layouts.md, folds on): median CLI wall of
# LAYOUT_REPEATS runs (default 3) after a warm-up, with the peak RSS of the last run.
layout_repeats="${LAYOUT_REPEATS:-3}"
layout_line() {  # label target_s target_GB repeats predict-args...
  speed_line layout "$@"
}
limit="${LAYOUT_TIMEOUT_S:-120}"
echo "load average before the layout rows: $(cut -d' ' -f1-3 /proc/loadavg)"
layout_line "GPT-3 175B (gpt3-175b.json) on 1,024 A100 (selene), tp 8 pp 16, global batch 1536" 2 8 "$layout_repeats" \
  --model "$here/benchmarks/data/models/gpt3-175b.json" --platform selene --workers 1024 --seq-len 2048 \
  --micro-batch 1 --global-batch 1536 --tp 8 --pp 16 --precision fp16-mixed
layout_line "1T (megatron_1t) on 3,072 A100 (selene), tp 8 pp 64, global batch 3072" 10 8 "$layout_repeats" \
  --model megatron_1t --platform selene --workers 3072 --seq-len 2048 --micro-batch 1 --global-batch 3072 \
  --tp 8 --pp 64 --precision fp16-mixed --recompute full
layout_line "Llama 3 405B on 16,384 H100 (meta-llama3-roce), tp 8 pp 16 vp 8, global batch 2048" 30 8 0 \
  --model llama3_405b --platform meta-llama3-roce --workers 16384 --seq-len 8192 --micro-batch 1 \
  --global-batch 2048 --tp 8 --pp 16 --vp 8 --sequence-parallel --zero 1 --precision bf16-mixed
echo "load average after the layout rows: $(cut -d' ' -f1-3 /proc/loadavg)"

# Parameter servers: median CLI wall of PS_REPEATS runs (default 3) after one warm-up run; a run
# past PS_TIMEOUT_S (default 120 s) is stopped and reported as such. Coarse PS traffic above 64
# workers; with dedicated servers the worker nodes are also folded, per switch (exact) or, above a flow
# budget, in groups of switches with load-scaled links (docs/simulation-training.md "Folded workers");
# with colocated servers only the switches that host no server, their flows weighted (exact). ps-async
# folds only above the flow budget, each group at its devices' mean pace (approximate), and simulates
# 6 iterations by default (docs/simulation-training.md "Asynchronous steady state").
repeats="${PS_REPEATS:-3}"
limit="${PS_TIMEOUT_S:-120}"
ps_line() {  # label target_s strategy args...
  local label="$1" target="$2" strat="$3"
  shift 3
  local walls=() json="" start end i
  for ((i = 0; i <= repeats; i++)); do
    start=$(date +%s.%N)
    if ! json="$(timeout "$limit" "$dtsim" predict --model resnet50 --platform "$platform" --batch 64 \
        --strategy "$strat" --format json "$@")"; then
      echo "resnet50 $label: stopped after ${limit} s (target <= ${target} s, SLOW)"
      return 0
    fi
    end=$(date +%s.%N)
    ((i > 0)) && walls+=("$(python3 -c "print($end - $start)")")
  done
  python3 - "$json" "$label" "$target" "${walls[@]}" <<'PY'
import json, statistics, sys
p = json.loads(sys.argv[1])["points"][0]
target, walls = float(sys.argv[3]), [float(w) for w in sys.argv[4:]]
wall = statistics.median(walls)
print(f"resnet50 {sys.argv[2]}: CLI wall median {wall:6.2f} s of {len(walls)} (target <= {target:.0f} s, "
      f"{'ok' if wall <= target else 'SLOW'}), simulation {p['wall_s']:.2f} s, {p['flows']} flows, "
      f"{p['ps_servers']} servers, {p['throughput_samples_per_s']:.0f} img/s, efficiency {p['efficiency']:.3f}")
PY
}
ps_line "ps            1024 workers x 256 servers, colocated" 5 ps --workers 1024 --ps 256
ps_line "ps            1024 workers x 256 servers, dedicated" 5 ps --workers 1024 --ps 256 --ps-placement dedicated
ps_line "ps-async      1024 workers x  64 servers, dedicated" 5 ps-async --workers 1024 --ps 64 --ps-placement dedicated
ps_line "ps-replicated 1024 workers x  64 servers, dedicated" 5 ps-replicated --workers 1024 --ps 64 --ps-placement dedicated
ps_line "ps-async      1024 workers x  64 servers, colocated" 5 ps-async --workers 1024 --ps 64
ps_line "ps-replicated 1024 workers x  64 servers, colocated" 5 ps-replicated --workers 1024 --ps 64

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

# Layout search (issue 39: every layout of a 175B model on 1,024 GPUs <= 2 minutes): `dtsim plan` over GPT-3
# 175B (benchmarks/data/models/gpt3-175b.json; global batch 1536, sequence 2048 as Narayanan et al. SC'21
# train it) on dgx-h100-superpod with --jobs 2, stopped at PLAN_TIMEOUT_S (default 600); reports how far it got.
plan_limit="${PLAN_TIMEOUT_S:-600}"
plan_dir="$(mktemp -d)"
start=$(date +%s.%N)
plan_status=0
timeout "$plan_limit" "$dtsim" plan --model "$here/benchmarks/data/models/gpt3-175b.json" --platform dgx-h100-superpod \
  --workers 1024 --global-batch 1536 --seq-len 2048 --precision bf16-mixed --jobs 2 --max-candidates 5000 --quiet \
  --out "$plan_dir" --top 1 >"$plan_dir/out.txt" 2>&1 || plan_status=$?
end=$(date +%s.%N)
plan_wall=$(python3 -c "print(f'{$end - $start:.1f}')")
plan_done=$(cat "$plan_dir"/results.jsonl "$plan_dir"/parts/* 2>/dev/null | wc -l)
if [[ $plan_status -eq 0 ]]; then
  echo "gpt3-175b plan 1024 GPUs: CLI wall ${plan_wall} s (target <= 120 s, $(python3 -c "print('ok' if $plan_wall <= 120 else 'SLOW')")); $(head -1 "$plan_dir/out.txt")"
else
  echo "gpt3-175b plan 1024 GPUs: stopped after ${plan_wall} s (target <= 120 s, SLOW) with ${plan_done} layouts simulated"
fi
rm -rf "$plan_dir"
