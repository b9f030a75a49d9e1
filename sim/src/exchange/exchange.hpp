// Internal to sim/: how gradients are exchanged during an iteration. Every family (allreduce, the parameter
// servers, nn.DataParallel) is listed once in table.cpp with its name, description, properties and planner
// (sim/src/plan/), from which names, --help and errors come; the executor (training.cpp) plays the planner's
// step programs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sim/src/plan/program.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// What a strategy's exchange family needs from the replay and the checks.
struct ExchangeProperties {
  bool uses_collective = false;   // strategy name is family-collective ("allreduce-ring")
  bool uses_servers = false;      // --ps, placement and balance apply
  bool single_node = false;       // all workers on one node
  bool per_layer_buckets = false; // one bucket per parameter layer (fusion does not apply)
  // With a framework cycle (Horovod), the plan cuts buckets of about one cycle of backward and their
  // allreduces fuse, at each cycle tick, the ready ones up to the fusion threshold (Task::fuse_up_to_B).
  bool fuses_ready_per_cycle = false;
  bool asynchronous = false;      // no barrier: a worker never waits for the slowest
};

struct ExchangeFamily {
  std::string name;
  std::string description;
  ExchangeProperties properties;
  // The ranks' step programs for a point (sim/src/plan/).
  std::function<StepPrograms(const IterationPlan&, const calibrate::ComputeProfile&, const TrainingPoint&,
                             const platforms::Platform&, const Layout&)>
      plan;
};

const std::vector<ExchangeFamily>& exchange_table();
const ExchangeFamily& exchange_family(const Strategy& strategy);  // Failure for an unchecked strategy

// The allreduce family's step programs (plan_data_parallel, or plan_layout for a parallel layout), with the
// framework's runtime around each allreduce as task data (Task::cycle_s, fuse_up_to_B, negotiation_B,
// copy_s_per_B: Horovod's cycle, tensor fusion, negotiation and fusion-buffer copies).
StepPrograms plan_allreduce_family(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                   const TrainingPoint& point, const platforms::Platform& platform);

}  // namespace dtsim::sim
