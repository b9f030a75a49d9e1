// Planner: data parallelism with bucketed allreduce (PyTorch DDP's and Horovod's exchange).
#include <fmt/format.h>

#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {

StepPrograms plan_data_parallel(const IterationPlan& plan, const calibrate::ComputeProfile& profile, int workers,
                                const DataParallelOptions& options) {
  StepPrograms out;
  out.groups.push_back(world_group(workers));
  constexpr int WORLD = 0;  // group slot 0 of every rank: the world group
  RankProgram p;
  int prev = p.add({.kind = TaskKind::COMPUTE, .phase = TaskPhase::FORWARD, .label = "forward", .seconds = plan.fwd_s});
  std::vector<int> segments;
  const std::size_t buckets = plan.buckets.size();
  auto add_segment = [&](std::size_t k) {
    prev = p.add(backward_segment_task(plan, profile, k, prev));
    segments.push_back(prev);
  };
  auto add_tail = [&] {
    prev = p.add({.kind = TaskKind::COMPUTE,
                  .phase = TaskPhase::BACKWARD,
                  .label = "backward (layers without parameters)",
                  .seconds = plan.bwd_tail_s,
                  .deps = {prev}});
    return prev;
  };
  int last_collective = -1;
  std::vector<int> collectives;
  const bool fusing = options.fuse_up_to_B > 0;
  auto add_collective = [&](std::size_t k, int after_backward) {
    const auto& b = plan.buckets[k];
    Task t{.kind = TaskKind::COLLECTIVE,
           .phase = TaskPhase::COMMUNICATION,
           .label = fmt::format("allreduce bucket {}: {}", k, bucket_layer_range(profile, b)),
           .operation = "allreduce",
           .group = WORLD,
           .bytes = b.bytes,
           .cycle_s = options.cycle_s,
           .fuse_up_to_B = options.fuse_up_to_B,
           .negotiation_B = options.negotiation_B,
           .copy_s_per_B = options.copy_s_per_B,
           .copy_min_items = options.copy_min_items,
           .copy_on_cores = options.copy_on_cores,
           .items = static_cast<int>(b.layers.size()),
           .host_buffers = options.host_buffers,
           .library_threads = options.library_threads,
           .deps = {segments[k]},
           .args = {{"bucket", static_cast<double>(k)},
                    {"bytes", b.bytes},
                    {"layers", static_cast<double>(b.layers.size())}}};
    // Fusing collectives are ordered by the communication stream alone: the next one is ready (to be
    // absorbed) once its bucket is, while this one waits for its tick.
    if (last_collective >= 0 && !fusing) t.deps.push_back(last_collective);
    if (after_backward >= 0) t.deps.push_back(after_backward);
    last_collective = p.add(std::move(t));
    collectives.push_back(last_collective);
  };
  int tail = -1;
  if (options.overlap) {
    // Interleaved in the order the replay meets them: bucket k's allreduce is issued as its segment ends.
    for (std::size_t k = 0; k < buckets; ++k) {
      add_segment(k);
      add_collective(k, -1);
      prev = segments[k];
    }
    tail = add_tail();
  } else {
    for (std::size_t k = 0; k < buckets; ++k) add_segment(k);
    tail = add_tail();
    for (std::size_t k = 0; k < buckets; ++k) add_collective(k, tail);
  }
  Task update{.kind = TaskKind::COMPUTE, .phase = TaskPhase::UPDATE, .label = "optimizer update", .seconds = plan.update_s, .deps = {tail}};
  if (fusing) {
    update.deps.insert(update.deps.end(), collectives.begin(), collectives.end());
  } else if (last_collective >= 0) {
    update.deps.push_back(last_collective);
  }
  p.add(std::move(update));
  out.programs.push_back(std::move(p));
  out.program_of.assign(static_cast<std::size_t>(workers), 0);
  out.rank_groups.assign(static_cast<std::size_t>(workers), {0});
  out.rank_peers.assign(static_cast<std::size_t>(workers), {});
  out.latency_bound_bypass = options.cycle_s > 0;
  return out;
}

}  // namespace dtsim::sim
