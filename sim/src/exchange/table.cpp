// The exchange-family table: one row per family (the parameter-server variants share one planner,
// sim/src/plan/parameter_server.cpp), with its planner (sim/src/plan/). A strategy
// name is a family name, or family-collective for families that run a collective ("allreduce-ring").
#include <fmt/format.h>

#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {
// The strategy suffix that leaves the algorithm to the collective library.
constexpr const char* AUTO_COLLECTIVE = "auto";
}  // namespace

const std::vector<ExchangeFamily>& exchange_table() {
  static const std::vector<ExchangeFamily> table{
      {"allreduce", "bucketed gradients allreduced by every worker, overlapped with backward (Horovod, DDP)",
       {.uses_collective = true, .fuses_ready_per_cycle = true},
       [](const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
          const platforms::Platform& platform, const Layout&) { return plan_allreduce_family(plan, profile, point, platform); }},
      {"ps", "TensorFlow parameter_server: every worker pushes each variable to its shard and pulls it back",
       {.uses_servers = true, .per_layer_buckets = true},
       [](const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
          const platforms::Platform& platform, const Layout& layout) -> StepPrograms {
         return plan_parameter_server(plan, profile, point, platform, layout);
       }},
      {"ps-replicated", "TensorFlow distributed_replicated: GPUs of a node sum locally, the node pushes once",
       {.uses_servers = true, .per_layer_buckets = true},
       [](const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
          const platforms::Platform& platform, const Layout& layout) -> StepPrograms {
         return plan_parameter_server(plan, profile, point, platform, layout);
       }},
      {"ps-async", "asynchronous parameter server: each worker pushes and pulls on its own, no barrier",
       {.uses_servers = true, .per_layer_buckets = true, .asynchronous = true},
       [](const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
          const platforms::Platform& platform, const Layout& layout) -> StepPrograms {
         return plan_parameter_server(plan, profile, point, platform, layout);
       }},
      {"data-parallel-single-node", "PyTorch nn.DataParallel: device 0 scatters, replicates, gathers and reduces",
       {.single_node = true},
       [](const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
          const platforms::Platform&, const Layout&) -> StepPrograms {
         return plan_data_parallel_single_node(plan, profile.batch, point);
       }},
  };
  return table;
}

const ExchangeFamily& exchange_family(const Strategy& strategy) {
  for (const auto& f : exchange_table())
    if (f.name == strategy.exchange) return f;
  throw Failure(fmt::format("unknown exchange family '{}' (internal error)", strategy.exchange));
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const auto& f : exchange_table()) {
    if (!f.properties.uses_collective) {
      names.push_back(f.name);
      continue;
    }
    for (const auto& a : collective_table())
      if (a.operation == "allreduce") names.push_back(f.name + "-" + a.name);
    names.push_back(f.name + "-" + AUTO_COLLECTIVE);
  }
  return names;
}

std::string strategy_help() {
  std::string out;
  for (const auto& f : exchange_table()) {
    if (!f.properties.uses_collective) {
      out += fmt::format("  {}: {}\n", f.name, f.description);
      continue;
    }
    for (const auto& a : collective_table())
      if (a.operation == "allreduce") out += fmt::format("  {}-{}: {}; {}\n", f.name, a.name, f.description, a.description);
    out += fmt::format("  {}-{}: {}; the collective library (--collective-library) picks per call\n", f.name,
                       AUTO_COLLECTIVE, f.description);
  }
  return out;
}

Strategy strategy_by_name(const std::string& name, const std::string& what) {
  for (const auto& f : exchange_table()) {
    if (!f.properties.uses_collective) {
      if (name == f.name) return {f.name, ""};
      continue;
    }
    const std::string prefix = f.name + "-";
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string algorithm = name.substr(prefix.size());
    if (algorithm == AUTO_COLLECTIVE || collective_or_null("allreduce", algorithm)) return {f.name, algorithm};
  }
  std::string known;
  for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("{}: unknown strategy '{}' (expected one of: {})", what, name, known));
}

std::string to_string(const Strategy& s) { return s.name(); }
bool uses_servers(const Strategy& s) { return exchange_family(s).properties.uses_servers; }
bool single_node_only(const Strategy& s) { return exchange_family(s).properties.single_node; }
bool asynchronous(const Strategy& s) { return exchange_family(s).properties.asynchronous; }

}  // namespace dtsim::sim
