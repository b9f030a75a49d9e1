// Internal to sim/: which collective library a training point runs and the platform as that software
// sees it. Training-side decisions (the point, its framework and strategy), kept out of coll/, which
// knows libraries and algorithms only.
#pragma once
#include "platforms/platform.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// `platform` as `point`'s software runs on it: a PCIe GPU node's unstated p2p_level becomes the CUDA
// driver's for parameter-server strategies (no collective library: the framework copies between GPUs)
// and the library's own where it has one (CUDA-aware MPI); otherwise the file's default, NCCL 2.7's
// rule. The simulation builds this platform.
platforms::Platform platform_for_library(const platforms::Platform& platform, const TrainingPoint& point);

}  // namespace dtsim::sim
