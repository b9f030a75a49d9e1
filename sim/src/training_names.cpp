// Names of data modes (a CLI contract) and PointResult's JSON round trip, the one serialisation of a
// result (the simulation child process, sweeps and --format json all use it). Strategy names come from
// the exchange and collective tables (src/exchange/table.cpp).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
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
                   {"activities", r.activities},
                   {"flows", r.flows},
                   {"gradient_bytes", r.gradient_bytes},
                   {"busiest_nic_node", r.busiest_nic_node},
                   {"busiest_nic_bytes", r.busiest_nic_bytes},
                   {"busiest_nic_busy", r.busiest_nic_busy},
                   {"busiest_nic_server", r.busiest_nic_server}};
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
  r.flows = j.at("flows").get<std::int64_t>();
  r.gradient_bytes = j.at("gradient_bytes").get<double>();
  r.busiest_nic_node = j.at("busiest_nic_node").get<int>();
  r.busiest_nic_bytes = j.at("busiest_nic_bytes").get<double>();
  r.busiest_nic_busy = j.at("busiest_nic_busy").get<double>();
  r.busiest_nic_server = j.at("busiest_nic_server").get<int>();
  return r;
}

}  // namespace dtsim::sim
