// Names of data modes (a CLI contract) and PointResult's field list with its JSON round trip, the one
// serialisation of a result (the simulation child process, sweeps and --format json all use it). Strategy names come from
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

// The busiest resources travel as an array of objects (nlohmann's conversion hooks, found by ADL).
void to_json(nlohmann::json& j, const ResourceUse& u) {
  j = {{"name", u.name},   {"kind", u.kind},
       {"node", u.node},   {"server", u.server},
       {"bytes", u.bytes}, {"capacity_Bps", u.capacity_Bps},
       {"utilisation", u.utilisation}};
}

void from_json(const nlohmann::json& j, ResourceUse& u) {
  u = {j.at("name").get<std::string>(), j.at("kind").get<std::string>(), j.at("node").get<int>(),
       j.at("server").get<int>(),       j.at("bytes").get<double>(),      j.at("capacity_Bps").get<double>(),
       j.at("utilisation").get<double>()};
}

namespace {

// A field whose value is the member reached through `Path` (e.g. &PointResult::breakdown,
// &Breakdown::compute_s): its reader and writer are generated from the member's type.
template <auto... Path>
ResultField field(const char* name, bool in_csv = true) {
  return {name, [](const PointResult& r) { return nlohmann::json((r .* ... .* Path)); },
          [](PointResult& r, const nlohmann::json& v) {
            auto& member = (r .* ... .* Path);
            member = v.get<std::remove_reference_t<decltype(member)>>();
          },
          in_csv};
}

}  // namespace

const std::vector<ResultField>& result_fields() {
  static const std::vector<ResultField> fields = {
      field<&PointResult::workers>("workers"),
      field<&PointResult::nodes>("nodes"),
      field<&PointResult::ps_servers>("ps_servers"),
      field<&PointResult::throughput>("throughput_samples_per_s"),
      field<&PointResult::efficiency>("efficiency"),
      field<&PointResult::iteration_time_s>("iteration_time_s"),
      field<&PointResult::breakdown, &Breakdown::compute_s>("compute_s"),
      field<&PointResult::breakdown, &Breakdown::communication_s>("communication_s"),
      field<&PointResult::breakdown, &Breakdown::exposed_communication_s>("exposed_communication_s"),
      field<&PointResult::breakdown, &Breakdown::io_stall_s>("io_stall_s"),
      field<&PointResult::bottleneck>("bottleneck"),
      field<&PointResult::wall_s>("wall_s"),
      field<&PointResult::inter_node_bytes>("inter_node_bytes"),
      field<&PointResult::intra_node_bytes>("intra_node_bytes"),
      field<&PointResult::buckets>("buckets"),
      field<&PointResult::activities>("activities"),
      // Measured quantities behind the explanation: in results.jsonl and --format json only.
      field<&PointResult::flows>("flows", false),
      field<&PointResult::gradient_bytes>("gradient_bytes", false),
      field<&PointResult::busiest_nic_node>("busiest_nic_node", false),
      field<&PointResult::busiest_nic_bytes>("busiest_nic_bytes", false),
      field<&PointResult::busiest_nic_busy>("busiest_nic_busy", false),
      field<&PointResult::busiest_nic_server>("busiest_nic_server", false),
      field<&PointResult::breakdown, &Breakdown::exposed_before_forward_s>("exposed_before_forward_s", false),
      field<&PointResult::breakdown, &Breakdown::exposed_after_backward_s>("exposed_after_backward_s", false),
      field<&PointResult::breakdown, &Breakdown::compute_variability_s>("compute_variability_s", false),
      field<&PointResult::breakdown, &Breakdown::overlap_slowdown_s>("overlap_slowdown_s", false),
      field<&PointResult::resources>("resources", false),
      field<&PointResult::breakdown, &Breakdown::local_collectives_s>("local_collectives_s", false),
      field<&PointResult::breakdown, &Breakdown::bubble_s>("bubble_s", false),
      field<&PointResult::breakdown, &Breakdown::recompute_s>("recompute_s", false),
      field<&PointResult::tokens_per_s>("tokens_per_s", false),
      field<&PointResult::model_tflops_per_device>("model_tflops_per_device", false),
      field<&PointResult::hardware_tflops_per_device>("hardware_tflops_per_device", false),
      field<&PointResult::mfu>("mfu", false),
      field<&PointResult::hfu>("hfu", false),
      field<&PointResult::memory_per_device_B>("memory_per_device_B", false),
  };
  return fields;
}

nlohmann::json to_json(const PointResult& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : result_fields()) j[f.name] = f.get(r);
  return j;
}

PointResult point_result_from_json(const nlohmann::json& j) {
  PointResult r;
  for (const auto& f : result_fields()) {
    if (!j.is_object() || !j.contains(f.name)) throw Failure(fmt::format("result record: field '{}' is missing", f.name));
    try {
      f.set(r, j.at(f.name));
    } catch (const nlohmann::json::exception&) {
      throw Failure(fmt::format("result record: field '{}' has the wrong type ({})", f.name, j.at(f.name).dump()));
    }
  }
  return r;
}

}  // namespace dtsim::sim
