// Platform comparison: platform list parsing, the one-axis sweep it runs, and the summary table.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "scenarios/compare.hpp"
#include "scenarios/src/result_store.hpp"

namespace dtsim::scenarios {

std::vector<std::string> parse_platform_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty())
      throw InputError(fmt::format("{}: expected a comma-separated list of platform names or files, got '{}'", flag,
                                   text));
    if (!seen.insert(item).second) throw InputError(fmt::format("{}: platform '{}' is listed twice", flag, item));
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<SweepPoint> compare_points(const YAML::Node& scenario, const std::vector<std::string>& platforms,
                                       const yaml::Origin& origin) {
  if (platforms.empty()) throw InputError("--platforms: at least one platform is needed");
  SweepSpec spec;
  SweepAxis axis;
  axis.field = "platform";
  for (const auto& p : platforms) axis.values.emplace_back(p);
  spec.product.push_back(std::move(axis));
  return expand_sweep(scenario, spec, origin);
}

Table results_table(const std::string& out_dir, const std::vector<SweepPoint>& points) {
  std::map<std::string, nlohmann::json> by_id;
  std::ifstream in(std::filesystem::path(out_dir) / "results.jsonl");
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    nlohmann::json j;
    try {  // the sweep that just ran wrote the file; a line it cannot have written is skipped
      j = parse_json(line, fmt::format("results.jsonl, line {}", line_number), "sweep result record",
                     {SWEEP_RECORD_MAX_BYTES});
    } catch (const InputError&) {
      continue;
    }
    if (j.is_object() && j.contains("id") && j["id"].is_string()) by_id[j["id"].get<std::string>()] = j;
  }
  Table t({"point", "platform", "workers", "nodes", "ps", "throughput_samples_per_s", "efficiency_pct",
           "iteration_ms", "compute_ms", "exposed_comm_ms", "io_stall_ms", "bottleneck"});
  for (const auto& p : points) {
    const auto it = by_id.find(p.id);
    if (it == by_id.end()) continue;
    const auto& rec = it->second;
    const std::string platform = rec.value("labels", nlohmann::json::object()).value("platform", "");
    if (rec.value("status", "") != "ok") {
      t.add_row({p.key, platform, "", "", "", "", "", "", "", "", "", "error: " + rec.value("error", "")});
      continue;
    }
    for (const auto& r : rec["rows"]) {
      auto ms = [&](const char* k) { return fmt::format("{:.1f}", 1000.0 * r.value(k, 0.0)); };
      t.add_row({p.key, platform, std::to_string(r.value("workers", 0)), std::to_string(r.value("nodes", 0)),
                 std::to_string(r.value("ps_servers", 0)), fmt::format("{:.1f}", r.value("throughput_samples_per_s", 0.0)),
                 fmt::format("{:.1f}", 100.0 * r.value("efficiency", 0.0)), ms("iteration_time_s"), ms("compute_s"),
                 ms("exposed_communication_s"), ms("io_stall_s"), r.value("bottleneck", "")});
    }
  }
  return t;
}

}  // namespace dtsim::scenarios
