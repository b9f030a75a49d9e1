// Names of training strategies and data modes (a CLI contract), and PointResult's JSON round trip
// used to bring results back from the simulation child process.
#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/errors.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {
constexpr std::array<std::pair<Strategy, const char*>, 8> STRATEGY_NAMES{{
    {Strategy::ALLREDUCE_RING, "allreduce-ring"},
    {Strategy::ALLREDUCE_TREE, "allreduce-tree"},
    {Strategy::ALLREDUCE_RHD, "allreduce-rhd"},
    {Strategy::ALLREDUCE_HIER, "allreduce-hier"},
    {Strategy::PS, "ps"},
    {Strategy::PS_REPLICATED, "ps-replicated"},
    {Strategy::PS_ASYNC, "ps-async"},
    {Strategy::DATA_PARALLEL_SINGLE_NODE, "data-parallel-single-node"},
}};
}  // namespace

Strategy strategy_by_name(const std::string& name) {
  std::string known;
  for (const auto& [s, n] : STRATEGY_NAMES) {
    if (name == n) return s;
    known += known.empty() ? n : std::string(", ") + n;
  }
  throw InputError(fmt::format("--strategy: unknown strategy '{}' (expected one of: {})", name, known));
}

std::string to_string(Strategy s) {
  for (const auto& [k, n] : STRATEGY_NAMES)
    if (k == s) return n;
  return "unknown";
}

DataMode data_mode_by_name(const std::string& name) {
  if (name == "synthetic") return DataMode::SYNTHETIC;
  if (name == "real") return DataMode::REAL;
  throw InputError(fmt::format("--data: unknown data mode '{}' (expected synthetic or real)", name));
}

std::string to_json_text(const PointResult& r) {
  nlohmann::json j{{"workers", r.workers},
                   {"nodes", r.nodes},
                   {"ps_servers", r.ps_servers},
                   {"throughput", r.throughput},
                   {"efficiency", r.efficiency},
                   {"iteration_time_s", r.iteration_time_s},
                   {"compute_s", r.breakdown.compute_s},
                   {"communication_s", r.breakdown.communication_s},
                   {"exposed_communication_s", r.breakdown.exposed_communication_s},
                   {"io_stall_s", r.breakdown.io_stall_s},
                   {"bottleneck", r.bottleneck},
                   {"wall_s", r.wall_s},
                   {"inter_node_bytes", r.inter_node_bytes},
                   {"intra_node_bytes", r.intra_node_bytes},
                   {"buckets", r.buckets},
                   {"activities", r.activities}};
  return j.dump();
}

PointResult point_result_from_json_text(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  PointResult r;
  r.workers = j.at("workers").get<int>();
  r.nodes = j.at("nodes").get<int>();
  r.ps_servers = j.at("ps_servers").get<int>();
  r.throughput = j.at("throughput").get<double>();
  r.efficiency = j.at("efficiency").get<double>();
  r.iteration_time_s = j.at("iteration_time_s").get<double>();
  r.breakdown.compute_s = j.at("compute_s").get<double>();
  r.breakdown.communication_s = j.at("communication_s").get<double>();
  r.breakdown.exposed_communication_s = j.at("exposed_communication_s").get<double>();
  r.breakdown.io_stall_s = j.at("io_stall_s").get<double>();
  r.bottleneck = j.at("bottleneck").get<std::string>();
  r.wall_s = j.at("wall_s").get<double>();
  r.inter_node_bytes = j.at("inter_node_bytes").get<double>();
  r.intra_node_bytes = j.at("intra_node_bytes").get<double>();
  r.buckets = j.at("buckets").get<int>();
  r.activities = j.at("activities").get<std::int64_t>();
  return r;
}

}  // namespace dtsim::sim
