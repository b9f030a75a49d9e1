// Platform comparison: the same scenario (model, batch, workers, strategy ...) on several platform
// files, run as a sweep over `platform` so it is parallel and resumable, summarised in one table.
#pragma once
#include <string>
#include <vector>

#include "common/table.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {

// "a,b,c" -> {a, b, c}; InputError naming `flag` for an empty list, empty items or duplicates.
std::vector<std::string> parse_platform_list(const std::string& text, const std::string& flag = "--platforms");

// One point per platform: the scenario with `platform` replaced (its own sweep block ignored).
std::vector<SweepPoint> compare_points(const YAML::Node& scenario, const std::vector<std::string>& platforms,
                                       const yaml::Origin& origin);

// The table of a finished sweep or comparison (results.jsonl in `out_dir`), one row per result row
// in point order: platform, workers, nodes, throughput, efficiency, times per iteration, bottleneck.
Table results_table(const std::string& out_dir, const std::vector<SweepPoint>& points);

}  // namespace dtsim::scenarios
