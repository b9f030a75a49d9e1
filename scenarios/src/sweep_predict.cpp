// The real point function of a sweep: parse the edited scenario node, predict it, label the rows.
#include <fmt/format.h>

#include "common/errors.hpp"
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
  outcome.labels["data"] = scenario.point.data == sim::DataMode::REAL ? "real" : "synthetic";
  outcome.rows = predict_scenario(scenario);
  return outcome;
}

void validate_points(const std::vector<SweepPoint>& points, const yaml::Origin& origin) {
  for (const auto& p : points) (void)parse_point(p, origin);
}

}  // namespace dtsim::scenarios
