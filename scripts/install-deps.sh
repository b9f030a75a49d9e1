#!/usr/bin/env bash
# Installs dtsim's dependencies from Debian 12 packages. Idempotent; run as root (or with sudo
# available) on a fresh Debian 12 machine.
#   scripts/install-deps.sh          the main job's set: build the dtsim binary, run sweeps, plot
#                                    (what scripts/run.sh needs)
#   scripts/install-deps.sh --test   that set plus the test suite's, validation's, the optional
#                                    calibrators', the benchmarks' and the fuzzers' (scripts/test.sh)
set -euo pipefail

# The main job: configure and build the `dtsim` target (CMakeLists.txt finds every one of these),
# run `dtsim sweep` and `dtsim plot`.
runtime_packages=(
  build-essential cmake ninja-build pkg-config
  libsimgrid-dev                       # discrete-event engine for the network and training replay
  libboost-graph-dev                   # layer DAG of a model (topological order, in/out edges)
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers   # oneDNN kernels timed by the calibrator
  libyaml-cpp-dev                      # platform, device, model and scenario files
  libopenmpi-dev openmpi-bin           # validation trainer (dtsim-train, built with dtsim), MPI-split sweeps
  libcli11-dev                         # command-line parsing of the dtsim subcommands
  libfmt-dev                           # formatting of tables and messages
  nlohmann-json3-dev                   # JSON output, calibration database, traces
  zlib1g-dev                           # reading the gzip'd Fashion-MNIST IDX files
  python3 python3-matplotlib           # plots (plots/plot_results.py, `dtsim plot`)
)

# Everything else: the test suite (scripts/test.sh, CI) and the optional parts it exercises.
test_packages=(
  git
  catch2                               # unit tests (Catch2 v2, run under ctest)
  dataset-fashion-mnist                # real training data for `dtsim validate` and its tests
  libjemalloc2 libtcmalloc-minimal4    # --allocator jemalloc / tcmalloc (LD_PRELOAD) of calibrate, predict, validate
  python3-yaml                         # benchmarks/*.py and calibrate/fit/*.py read the YAML data
  libtorch-dev                         # libtorch calibration backend (calibrate --backend libtorch)
  python3-torch python3-torchvision    # validate --framework pytorch (validate/pytorch/train.py)
  clang libfuzzer-14-dev               # the loaders' libFuzzer targets (fuzz/, a short run in CI)
)

packages=("${runtime_packages[@]}")
case "${1:-}" in
  "") ;;
  --test) packages+=("${test_packages[@]}") ;;
  *) echo "install-deps.sh: unknown argument '$1' (expected nothing or --test)" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
