// Internal to sim/: planners, each building the step programs of one parallel training family from the
// iteration's compute plan, without SimGrid (tested in tests/sim/test_planners.cpp). One file per planner.
#pragma once
#include "calibrate/profile.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

struct DataParallelOptions {
  bool overlap = true;  // allreduce each bucket during the remaining backward; false: after backward
};

// Data parallelism with allreduce (DDP, Horovod without its cycle): every rank runs forward, backward cut at
// the plan's buckets, one allreduce of each bucket over all ranks in backward order on the communication
// stream (started once the bucket's gradients are ready on every rank), and the optimizer update once the
// last allreduce and backward are over.
StepPrograms plan_data_parallel(const IterationPlan& plan, const calibrate::ComputeProfile& profile, int workers,
                                const DataParallelOptions& options);

// PyTorch nn.DataParallel on one node (data-parallel-single-node): device 0 broadcasts the parameters (a
// binomial broadcast of copies, no collective library) and scatters each replica's input slice of
// batch x input.scattered_bytes_per_sample; replicas run forward; device 0 gathers their outputs (batch x
// input.gathered_bytes_per_sample each) and sends the output gradients back; replicas run their whole
// backward and send their gradients to device 0, which updates once it has them all; the other replicas' step
// ends with that update. `batch`: samples per replica.
StepPrograms plan_data_parallel_single_node(const IterationPlan& plan, double batch, const TrainingPoint& point);

// A parameter server's traffic per iteration (sim/src/plan/parameter_server.cpp): per shard its bytes and
// RPC calls (one per variable) of a pull; the plan's buckets merged into push groups (every bucket alone,
// or in coarse mode at most 8 of about equal bytes), each pushed when its last bucket's gradient is ready,
// with its bytes and calls per shard.
struct PsTraffic {
  std::vector<double> shard_B, shard_calls;                  // [server]
  std::vector<std::vector<double>> group_B, group_calls;     // [push group][server]
  std::vector<double> group_total_B;                         // [push group]: its gradient bytes
  std::vector<std::size_t> group_of;                         // [bucket] -> push group
  std::vector<bool> closes_group;                            // [bucket]: its group's last (the push starts here)
};
PsTraffic ps_traffic(const calibrate::ComputeProfile& profile, const IterationPlan& plan, const TrainingPoint& point);

// The worker nodes under one switch (leaf switch, dragonfly router; a star's single switch): the unit the
// parameter servers' folds keep alike. 1 on a torus, whose nodes route through each other.
int nodes_per_switch(const platforms::Platform& platform, int nodes);

// The parameter-server families (`ps`, `ps-replicated`, `ps-async`; sim/src/plan/parameter_server.cpp):
// every worker (ps-replicated: every node's first GPU, after the node's other GPUs copied their gradients
// to it) pulls each shard, computes, pushes each push group to the shards as backward produces it (client
// RPC time, the flow, the server's serving threads, its CPU's apply); synchronous families wait at a
// barrier of all workers (then, without server apply, the busiest shard's one update), ps-async workers
// go on alone. Coarse mode folds whole switches (StepPrograms::fold). `layout`: the point's nodes
// (Layout::server_nic_nodes: split server nodes).
StepPrograms plan_parameter_server(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                   const TrainingPoint& point, const platforms::Platform& platform, const Layout& layout);

// Layout::server_nic_nodes for a point: the colocated servers' nodes when the parameter-server family
// will fold them (coarse, one device per node, whole switches), else 0.
int ps_split_server_nodes(const platforms::Platform& platform, const TrainingPoint& point, const Layout& layout);

// A transformer's parallel layout (point.layout, active): every pipeline rank's schedule of micro-batch
// forwards and backwards with its tensor/context/expert collectives, activations sent between stages,
// gradients reduced over the data-parallel group (ZeRO 0-3) and the optimizer step; `profile` is one
// tensor-parallel rank's shard of the whole model (layers with their block indices).
StepPrograms plan_layout(const calibrate::ComputeProfile& profile, const TrainingPoint& point);

// plan_layout's programs with every collective, send and receive free: rank 0's longest path (its
// iteration starting at 0, the other ranks' whenever) and the busiest pipeline rank's compute
// (sim/layout_bound.hpp), computed on the schedules without building the programs.
struct LayoutScheduleBound {
  double rank0_path_s = 0, busiest_s = 0;
};
LayoutScheduleBound layout_schedule_bound(const calibrate::ComputeProfile& profile, const TrainingPoint& point);

// The same two figures from any step programs (rank 0's pipeline found through its peers): the
// reference layout_schedule_bound is tested against.
LayoutScheduleBound programs_schedule_bound(const StepPrograms& programs);

}  // namespace dtsim::sim
