// Which collective library a training point runs (resolve_collective_library) and the platform as that
// software sees it (platform_for_library): docs/collective-libraries.md "Which library".
#include "sim/src/library_resolution.hpp"

#include <fmt/format.h>

#include "sim/src/coll/library.hpp"

namespace dtsim::sim {

LibraryResolution resolve_collective_library(const platforms::Platform& platform, const TrainingPoint& point) {
  // Precedence: the point (flag > scenario, merged by the caller) > framework > platform > default rule.
  if (!point.runtime.collective_library.empty()) return {point.runtime.collective_library, "named"};
  const bool gpus = platform.has_gpus();
  const std::string& framework_library =
      gpus ? point.runtime.framework.gpu_library : point.runtime.framework.cpu_library;
  if (!framework_library.empty()) return {framework_library, "framework " + point.runtime.framework.name};
  if (!platform.collective_library.empty()) {
    check_collective_library(platform.collective_library,
                             fmt::format("{}: platform field 'collective_library'", platform.collective_library_at));
    return {platform.collective_library, "platform"};
  }
  return gpus ? LibraryResolution{DEFAULT_GPU_LIBRARY, "default rule (GPU nodes)"}
              : LibraryResolution{DEFAULT_CPU_LIBRARY, "default rule (CPU nodes)"};
}

platforms::Platform platform_for_library(const platforms::Platform& platform, const TrainingPoint& point) {
  platforms::Platform out = platform;
  auto& intra = out.node.intra;
  if (intra.kind != platforms::IntraNodeKind::PCIE || intra.p2p_level_stated || !platform.has_gpus()) return out;
  if (uses_servers(point.strategy)) {
    intra.p2p_level = CUDA_PEER_P2P_LEVEL;
    return out;
  }
  const auto& library = collective_library_by_name(resolve_collective_library(platform, point).name, "collective library");
  if (library.gpu_p2p_level) intra.p2p_level = *library.gpu_p2p_level;
  return out;
}

}  // namespace dtsim::sim
