#!/bin/bash
# install::Install: `cmake --install` into a temporary prefix, the prefix moved elsewhere, the source
# tree hidden (a private tmpfs mount over it, where user namespaces allow) and DTSIM_DATA_DIR unset:
# the installed dtsim must find its data beside itself and list platforms, check one and predict.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR (the work folder is a fresh one under $TMPDIR, outside
# the source tree that gets hidden; removed on success).
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/dtsim_install_XXXXXX")
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
mv "$work/prefix" "$work/moved"
bin="$work/moved/bin/dtsim"
unset DTSIM_DATA_DIR DTSIM_CALIBRATION_DB DTSIM_GPU_KERNELS

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect NEEDLE FILE: the file must contain the text
  grep -qF -- "$1" "$2" || { cat "$2" >&2; fail "'$1' not in the output of $(basename "$2")"; }
}

# The commands, run from an unrelated folder, with the source tree hidden when a user namespace can.
cat >"$work/run.sh" <<SCRIPT
set -e
cd "$work"
"$bin" --help >help.out
"$bin" platforms >platforms.out
"$bin" platform check ntua-vm >check.out
"$bin" predict --model lenet5 --platform ntua-vm --workers 1,2 --format json >predict.out
"$bin" sweep "$work/moved/share/dtsim/scenarios/ntua-cifar.yaml" --list >sweep.out
"$bin" predict "$work/moved/share/dtsim/scenarios/prace-dgx1-gan.yaml" --workers 1 --format csv >gan.out
"$bin" accuracy --study gtx1080ti_mxnet_resnet50 --max-rows 1 --out "$work/accuracy" >accuracy.out
test ! -e "$src/CMakeLists.txt" && echo hidden >hidden.out || true
SCRIPT
if unshare -rm true 2>/dev/null; then
  unshare -rm bash -c "mount -t tmpfs none '$src' && bash '$work/run.sh'"
  expect hidden "$work/hidden.out"
  echo "source tree hidden during the run: yes"
else
  bash "$work/run.sh"
  echo "source tree hidden during the run: no (no user namespaces here); data paths checked instead"
fi
expect "DTSIM_DATA_DIR" "$work/help.out"
expect "$work/moved/share/dtsim" "$work/help.out"
expect "piz-daint" "$work/platforms.out"
expect "$work/moved/share/dtsim/platforms/ntua-vm.yaml" "$work/check.out"
expect '"throughput_samples_per_s"' "$work/predict.out"
expect "model=lenet5" "$work/sweep.out"
expect "gtx1080ti_mxnet_resnet50" "$work/accuracy.out"  # the shipped accuracy tables, no ../shared
expect "workers" "$work/gan.out"  # its model is scenarios/models/gan_212m.yaml, relative to the scenario
if grep -qF "$src/" "$work/check.out" "$work/help.out"; then fail "the installed dtsim still names the source tree"; fi
echo "installed dtsim runs from $work/moved"
rm -rf "$work"
