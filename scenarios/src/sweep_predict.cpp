// The real point function of a sweep: parse the edited scenario node, predict it, label the rows; and
// the stamp of what each point's figures depend on, so that a resumed sweep recomputes stale points.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "calibrate/database.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/gpu_kernel_model.hpp"
#include "common/build_id.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"
#include "platforms/platform.hpp"
#include "scenarios/config.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
namespace {

Scenario parse_point(const SweepPoint& point, const yaml::Origin& origin) {
  try {
    return parse_scenario_node(point.node, origin);
  } catch (const InputError& e) {
    throw InputError(fmt::format("sweep point {} ({}): {}", point.index, point.key, e.what()));
  }
}

}  // namespace

PointOutcome predict_point(const SweepPoint& point, const yaml::Origin& origin) {
  const Scenario scenario = parse_point(point, origin);
  PointOutcome outcome;
  outcome.labels["model"] = scenario.model;
  outcome.labels["platform"] = platform_label(scenario.platform);  // its name:, not the file path
  outcome.labels["strategy"] = sim::to_string(scenario.point.strategy);
  outcome.labels["batch"] = std::to_string(scenario.batch);
  outcome.labels["data"] = scenario.point.input.data == sim::DataMode::REAL ? "real" : "synthetic";
  outcome.rows = predict_scenario(scenario);
  return outcome;
}

void validate_points(const std::vector<SweepPoint>& points, const yaml::Origin& origin) {
  for (const auto& p : points) (void)parse_point(p, origin);
}

void stamp_points(std::vector<SweepPoint>& points, const yaml::Origin& origin) {
  // Each file's content hash, read once however many points name it.
  std::map<std::string, std::string> file_hash;
  const auto content = [&file_hash](const std::string& path) -> const std::string& {
    auto it = file_hash.find(path);
    if (it != file_hash.end()) return it->second;
    std::error_code ec;
    std::string h = "absent";
    if (std::filesystem::is_regular_file(path, ec)) {
      std::ifstream in(path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      h = in.bad() ? "unreadable" : fnv1a64_hex(text);
    }
    return file_hash.emplace(path, std::move(h)).first->second;
  };
  const std::string common = fmt::format("build {}\ndevices {}\ngpu-kernels {}\nthread-scaling {}\n", build_id(),
                                         content(platforms::DeviceCatalog::builtin_path()),
                                         content(calibrate::GpuKernelModel::builtin_path()),
                                         content(calibrate::ThreadScaling::builtin_path()));
  const std::vector<std::string> zoo_names = models::zoo_names();
  for (auto& p : points) {
    const Scenario s = parse_point(p, origin);
    std::error_code ec;
    // A zoo model is code (the build id); a model file is its content (models::load_model's order).
    const bool zoo = std::find(zoo_names.begin(), zoo_names.end(), s.model) != zoo_names.end();
    const std::string model = !zoo && std::filesystem::is_regular_file(s.model, ec) ? content(s.model) : "zoo " + s.model;
    std::string platform;
    try {
      platform = content(platforms::platform_path(s.platform));
    } catch (const InputError&) {  // an unknown platform: the point's own run reports it
      platform = "unknown " + s.platform;
    }
    p.inputs = fnv1a64_hex(fmt::format("{}platform {}\nmodel {}\ncalibration {}\n", common, platform, model,
                                       content(s.db_path.empty() ? calibrate::default_db_path() : s.db_path)));
  }
}

}  // namespace dtsim::scenarios
