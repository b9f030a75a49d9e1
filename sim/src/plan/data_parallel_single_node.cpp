// Planner: PyTorch nn.DataParallel on one node. One process drives every device: device 0 broadcasts the
// parameters and scatters the input, every replica runs forward, device 0 gathers the outputs (the loss)
// and sends the output gradients back, every replica runs backward and sends its gradients to device 0,
// which sums them and updates; the next step starts when that update is over.
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {
// Tags of the messages between device 0 and a replica, one of each per iteration.
enum Tag : int { INPUT_SLICE, OUTPUT, OUTPUT_GRADIENT, GRADIENTS, UPDATED };
}  // namespace

StepPrograms plan_data_parallel_single_node(const IterationPlan& plan, double batch, const TrainingPoint& point) {
  const int workers = point.workers;
  const double input_B = batch * point.input.scattered_bytes_per_sample;
  const double output_B = batch * point.input.gathered_bytes_per_sample;
  // The replicas' whole backward in one compute (DataParallel has no per-bucket exchange), summed in the
  // plan's order.
  double backward_s = plan.bwd_tail_s;
  for (double s : plan.bwd_segment_s) backward_s += s;

  StepPrograms out;
  out.groups.push_back(world_group(workers));
  constexpr int WORLD = 0;  // group slot 0 of every rank
  constexpr int DEVICE_0 = 0;  // a replica's peer slot 0: device 0
  const auto to_replica = [](int q) { return q - 1; };  // device 0's peer slot of replica q

  // Device 0. Its copies are the forward's (scatter, gather) and the backward's (gradient reduce_add, the
  // backward of replicate's broadcast); only the parameter broadcast counts as communication.
  RankProgram lead;
  const int input = lead.add({.kind = TaskKind::INPUT, .label = "input batch"});
  std::vector<int> forward_deps{input};
  if (workers > 1)
    forward_deps.push_back(lead.add({.kind = TaskKind::COLLECTIVE,
                                     .phase = TaskPhase::COMMUNICATION,
                                     .label = "replicate parameters",
                                     .operation = "broadcast",
                                     .group = WORLD,
                                     .bytes = plan.grad_bytes,
                                     .algorithm = "binomial"}));
  for (int q = 1; q < workers; ++q)
    lead.add({.kind = TaskKind::SEND, .label = "scatter input", .peer = to_replica(q), .bytes = input_B, .tag = INPUT_SLICE});
  const int forward =
      lead.add({.kind = TaskKind::COMPUTE, .label = "forward", .seconds = plan.fwd_s, .deps = forward_deps});
  std::vector<int> gathered{forward};
  for (int q = 1; q < workers; ++q)
    gathered.push_back(lead.add({.kind = TaskKind::RECV, .label = "gather output", .peer = to_replica(q), .bytes = output_B, .tag = OUTPUT}));
  for (int q = 1; q < workers; ++q)
    lead.add({.kind = TaskKind::SEND,
              .phase = TaskPhase::BACKWARD,
              .label = "scatter output gradient",
              .peer = to_replica(q),
              .bytes = output_B,
              .tag = OUTPUT_GRADIENT,
              .deps = gathered});
  const int backward = lead.add(
      {.kind = TaskKind::COMPUTE, .phase = TaskPhase::BACKWARD, .label = "backward", .seconds = backward_s, .deps = gathered});
  std::vector<int> reduced{backward};
  for (int q = 1; q < workers; ++q)
    reduced.push_back(lead.add({.kind = TaskKind::RECV,
                                .phase = TaskPhase::BACKWARD,
                                .label = "reduce gradients",
                                .peer = to_replica(q),
                                .bytes = plan.grad_bytes,
                                .tag = GRADIENTS}));
  const int update = lead.add(
      {.kind = TaskKind::COMPUTE, .phase = TaskPhase::UPDATE, .label = "optimizer update", .seconds = plan.update_s, .deps = reduced});
  for (int q = 1; q < workers; ++q)
    lead.add({.kind = TaskKind::SEND, .phase = TaskPhase::UPDATE, .label = "update done", .peer = to_replica(q), .tag = UPDATED, .deps = {update}});
  out.programs.push_back(std::move(lead));

  // Every other replica.
  if (workers > 1) {
    RankProgram replica;
    const int own_input = replica.add({.kind = TaskKind::INPUT, .label = "input batch"});
    const int bcast = replica.add({.kind = TaskKind::COLLECTIVE,
                                   .phase = TaskPhase::COMMUNICATION,
                                   .label = "replicate parameters",
                                   .operation = "broadcast",
                                   .group = WORLD,
                                   .bytes = plan.grad_bytes,
                                   .algorithm = "binomial"});
    const int slice =
        replica.add({.kind = TaskKind::RECV, .label = "scatter input", .peer = DEVICE_0, .bytes = input_B, .tag = INPUT_SLICE});
    const int fwd = replica.add(
        {.kind = TaskKind::COMPUTE, .label = "forward", .seconds = plan.fwd_s, .deps = {own_input, bcast, slice}});
    replica.add({.kind = TaskKind::SEND, .label = "gather output", .peer = DEVICE_0, .bytes = output_B, .tag = OUTPUT, .deps = {fwd}});
    const int grad_in = replica.add({.kind = TaskKind::RECV,
                                     .phase = TaskPhase::BACKWARD,
                                     .label = "scatter output gradient",
                                     .peer = DEVICE_0,
                                     .bytes = output_B,
                                     .tag = OUTPUT_GRADIENT});
    const int bwd = replica.add({.kind = TaskKind::COMPUTE,
                                 .phase = TaskPhase::BACKWARD,
                                 .label = "backward",
                                 .seconds = backward_s,
                                 .deps = {fwd, grad_in}});
    replica.add({.kind = TaskKind::SEND,
                 .phase = TaskPhase::BACKWARD,
                 .label = "reduce gradients",
                 .peer = DEVICE_0,
                 .bytes = plan.grad_bytes,
                 .tag = GRADIENTS,
                 .deps = {bwd}});
    replica.add({.kind = TaskKind::RECV, .phase = TaskPhase::UPDATE, .label = "update done", .peer = DEVICE_0, .tag = UPDATED});
    out.programs.push_back(std::move(replica));
  }

  out.program_of.assign(static_cast<std::size_t>(workers), 1);
  out.program_of[0] = 0;
  out.rank_groups.assign(static_cast<std::size_t>(workers), {WORLD});
  out.rank_peers.assign(static_cast<std::size_t>(workers), {0});
  out.rank_peers[0].clear();
  for (int q = 1; q < workers; ++q) out.rank_peers[0].push_back(q);
  return out;
}

}  // namespace dtsim::sim
