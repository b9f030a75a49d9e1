#!/usr/bin/env bash
# Installs every build, test and plotting dependency of dtsim from Debian 12 packages.
# Idempotent; run as root (or with sudo available) on a fresh Debian 12 machine.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libsimgrid-dev                       # discrete-event engine for the network and training replay
  libboost-graph-dev                   # layer DAG of a model (topological order, in/out edges)
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers   # oneDNN kernels timed by the calibrator
  libyaml-cpp-dev                      # platform, device, model and scenario files
  catch2                               # unit tests (Catch2 v3, run under ctest)
  libopenmpi-dev openmpi-bin           # validation trainer and MPI-split sweeps
  libcli11-dev                         # command-line parsing of the dtsim subcommands
  libfmt-dev                           # formatting of tables and messages
  nlohmann-json3-dev                   # JSON output, calibration database, traces
  zlib1g-dev                           # reading the gzip'd Fashion-MNIST IDX files
  dataset-fashion-mnist                # real training data for validation
  python3 python3-matplotlib python3-yaml   # plots (plots/*.py)
  libtorch-dev                         # libtorch calibration backend (calibrate --backend libtorch)
  python3-torch python3-torchvision    # validate --framework pytorch (validate/pytorch/train.py)
  clang libfuzzer-14-dev               # the loaders' libFuzzer targets (fuzz/, a short run in CI)
)

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
