#!/usr/bin/env bash
# Builds (clang, ASan+UBSan, libFuzzer) and runs dtsim's loader fuzz targets: docs/fuzzing.md.
#   scripts/fuzz.sh [--runs N] [--time S] [--seed N] [--timeout S] [--fresh] [--build-dir DIR] [--work-dir DIR]
#                    [--no-build|--build-only] [TARGET...]
# TARGET is one of: model_yaml platform_yaml device_catalog scenario_yaml calibration_db gpu_kernel_model thread_scaling
# hf_config (default: all).
# Each target starts from its seed corpus (the shipped files + fuzz/seeds/) and keeps what it learns in
# <work-dir>/<target>/corpus (default work-dir: <build-dir>/fuzz/work; --fresh empties it first). A crash,
# leak, sanitizer report, timeout or out-of-memory leaves its input in <work-dir>/<target>/artifacts/
# and makes the script exit 1.
set -euo pipefail
# The braces make bash read the whole script before running it, so editing it cannot upset a long run.
{
cd "$(dirname "$0")/.."
root=$(pwd)

all_targets=(model_yaml platform_yaml device_catalog scenario_yaml calibration_db gpu_kernel_model thread_scaling hf_config)
runs=10000
max_time=0        # seconds per target; 0 = no limit but --runs
seed=0            # 0 = libFuzzer picks one
timeout=10        # wall-clock seconds one input may take before it counts as a hang
fresh=0
build_dir=build-fuzz
work_dir=""
do_build=1
do_run=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --time) max_time="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --work-dir) work_dir="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --build-only) do_run=0; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
done

if [ "$do_build" = 1 ]; then
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTSIM_FUZZ=ON \
      -DDTSIM_BUILD_TESTS=OFF -DDTSIM_WITH_CUDNN=OFF "${launcher[@]}" >/dev/null
  fi
  build_targets=()
  for t in "${targets[@]}"; do build_targets+=("dtsim_fuzz_$t"); done
  cmake --build "$build_dir" -j "${DTSIM_BUILD_JOBS:-$(nproc)}" --target "${build_targets[@]}"
fi
[ "$do_run" = 1 ] || exit 0

# The seed files of a target: shipped data plus fuzz/seeds/<target> (and the hostile YAML for YAML targets).
seed_files() {
  case "$1" in
    model_yaml) ls models/examples/*.yaml scenarios/models/*.yaml fuzz/seeds/model_yaml/* fuzz/seeds/yaml_hostile/* ;;
    platform_yaml) ls platforms/*.yaml fuzz/seeds/platform_yaml/* fuzz/seeds/yaml_hostile/* | grep -v '/devices.yaml$' ;;
    device_catalog) ls platforms/devices.yaml fuzz/seeds/device_catalog/* fuzz/seeds/yaml_hostile/* ;;
    scenario_yaml) ls scenarios/*.yaml fuzz/seeds/scenario_yaml/* fuzz/seeds/yaml_hostile/* ;;
    calibration_db) ls fuzz/seeds/calibration_db/* ;;
    hf_config) ls models/examples/hf/*/config.json fuzz/seeds/hf_config/* ;;
    gpu_kernel_model) ls calibrate/data/gpu_kernels.json fuzz/seeds/gpu_kernel_model/* ;;
    thread_scaling) ls calibrate/data/thread_scaling.json fuzz/seeds/thread_scaling/* ;;
  esac
}
# Inputs up to this size: the largest shipped file of the kind, with room to grow; for the JSON
# readers past their size bound in the fuzz build (JSON_FUZZ_MAX_BYTES, 32 KiB), so that it is reached.
max_len() {
  case "$1" in
    device_catalog) echo 24576 ;;
    calibration_db|gpu_kernel_model|thread_scaling) echo 36864 ;;
    hf_config) echo 36864 ;;  # the ViT example's 1,000 labels are 24 KiB; past the fuzz build's 32 KiB JSON bound
    *) echo 6144 ;;
  esac
}
dict() { case "$1" in calibration_db|gpu_kernel_model|thread_scaling|hf_config) echo fuzz/json.dict ;; *) echo fuzz/yaml.dict ;; esac; }

# The scratch file each input is written to lives in memory where it can; ASan's quarantine of freed
# memory is kept small so that the allocator reuses warm pages (a fifth fewer page faults per input).
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
asan_options="${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=32}"
ubsan_options="${UBSAN_OPTIONS:-print_stacktrace=1}"

status=0
summary=()
for t in "${targets[@]}"; do
  bin="$build_dir/fuzz/dtsim_fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (run without --no-build)" >&2; exit 2; }
  work="${work_dir:-$build_dir/fuzz/work}/$t"
  corpus="$work/corpus"
  seeds="$work/seeds"
  artifacts="$work/artifacts/"
  [ "$fresh" = 1 ] && rm -rf "$corpus"
  rm -rf "$seeds"
  mkdir -p "$corpus" "$seeds" "$artifacts"
  while read -r f; do cp "$f" "$seeds/$(echo "$f" | tr '/' '_')"; done < <(seed_files "$t")
  log="$work/last-run.log"
  args=(-runs="$runs" -max_total_time="$max_time" -seed="$seed" -max_len="$(max_len "$t")" -dict="$(dict "$t")"
        -timeout="$timeout" -rss_limit_mb=2048 -malloc_limit_mb=1024 -close_fd_mask=3 -print_final_stats=1
        -artifact_prefix="$artifacts")
  echo "fuzz.sh: $t: $bin ${args[*]} $corpus $seeds"
  set +e
  ASAN_OPTIONS="$asan_options" UBSAN_OPTIONS="$ubsan_options" "$bin" "${args[@]}" "$corpus" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz.sh: $t: FINDING (exit $rc); log: $log, input(s): $artifacts" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*terminate called|.*what\(\))' "$log" | head -5 >&2 || true
    summary+=("$t: FINDING after ${execs:-?} executions (exit $rc), see $log")
  else
    summary+=("$t: ${execs:-?} executions, ${rate:-?} exec/s, coverage ${cov:-?} edges, corpus $(ls "$corpus" | wc -l) inputs, no finding")
  fi
done
printf 'fuzz.sh: %s\n' "${summary[@]}"
exit $status
}
