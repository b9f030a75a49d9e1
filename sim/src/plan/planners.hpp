// Internal to sim/: planners, each building the step programs of one parallel training family from the
// iteration's compute plan, without SimGrid (tested in tests/sim/test_planners.cpp). One file per planner.
#pragma once
#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

#include "calibrate/profile.hpp"
#include "platforms/platform.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// The compute of backward segment k of the plan (from the previous bucket's gradients to bucket k's), after
// task `previous`: what the data-parallel and parameter-server planners run between their bucket exchanges.
inline Task backward_segment_task(const IterationPlan& plan, const calibrate::ComputeProfile& profile, std::size_t k,
                                  int previous) {
  const Bucket& b = plan.buckets[k];
  return {.kind = TaskKind::COMPUTE,
          .phase = TaskPhase::BACKWARD,
          .label = fmt::format("backward to bucket {}: {}", k, bucket_layer_range(profile, b)),
          .seconds = plan.bwd_segment_s[k],
          .deps = {previous},
          .args = {{"bucket", static_cast<double>(k)},
                   {"bucket_bytes", b.bytes},
                   {"bucket_layers", static_cast<double>(b.layers.size())}}};
}

struct DataParallelOptions {
  bool overlap = true;  // allreduce each bucket during the remaining backward; false: after backward
  // A framework runtime around each allreduce (Horovod, DDP): Task::cycle_s, fuse_up_to_B (with a cycle, the
  // plan's buckets fuse at each tick up to this), negotiation_B, copy_s_per_B, copy_min_items and copy_on_cores
  // of every allreduce. A cycle also turns on the latency-bound bypass (hundreds of tiny exchanges per
  // iteration).
  double cycle_s = 0;
  double fuse_up_to_B = 0;
  double negotiation_B = 0;
  double copy_s_per_B = 0;
  int copy_min_items = 1;
  bool copy_on_cores = false;
  bool host_buffers = false;  // Task::host_buffers of every allreduce
  int library_threads = 1;    // Task::library_threads of every allreduce
};

// Data parallelism with allreduce (DDP, Horovod with its runtime as task data): every rank runs forward, backward cut at
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

// Where a collective's members sit: what its lower bound needs. The fullest node's count, not a given
// member's: every group of the same shape (members, nodes, most on one node) has such a node, so the bound
// also holds for the collectives the executor prices by shape (a measured call charged for the others).
struct GroupGeometry {
  int ranks = 1;          // members
  int on_node = 1;        // most members on one node
  bool spans = false;     // members on more than one node
};

// Lower bounds on the seconds the executor's collectives and transfers take on a platform, from the bytes
// each one must move through a device's links or its node's NICs (information-theoretic, whatever the
// algorithm, library or protocol) at the built platform's capacities (network_capacity). Why they hold:
// docs/layout-search.md "Pruning by bound".
class CommLowerBound {
 public:
  // `workers_per_node`: the ranks on each node (node-major placement, as the simulation builds it).
  CommLowerBound(const platforms::Platform& platform, int workers_per_node);
  int node_of(int rank) const { return rank / workers_per_node_; }
  GroupGeometry geometry(const std::vector<int>& ranks) const;
  // One call of `operation` ("allreduce", "reduce-scatter", "allgather", "alltoall", "broadcast") of `bytes`
  // (the size the executor passes: the whole buffer) over the group; 0 for one member or an unknown operation.
  double collective_s(const std::string& operation, double bytes, const GroupGeometry& group) const;
  // A send of `bytes` from rank `src` to rank `dst`.
  double p2p_s(double bytes, int src, int dst) const;

 private:
  double rank_intra_Bps_ = 0, rank_inter_Bps_ = 0, node_inter_Bps_ = 0;
  int workers_per_node_ = 1;
};

// plan_layout's programs on an idle machine: rank 0's longest path (its iteration starting at 0, the
// other ranks' whenever) with every compute at its seconds and every collective, send and receive at its
// lower bound (`comm`; nullptr: free), the busiest pipeline rank's compute stream (its computes and the
// inline collectives on it) and its communication stream (its collectives, one at a time), and the two
// streams of each pipeline rank together when a compute overlapped by one of its collectives runs
// `overlap_slowdown` times slower (overlapped_s: docs/layout-search.md "Pruning by bound")
// (sim/layout_bound.hpp), computed on the schedules without building the programs. ZeRO-3's gathers are
// left off the path (they count in the communication stream).
struct LayoutScheduleBound {
  double rank0_path_s = 0, busiest_s = 0, comm_busiest_s = 0, overlapped_s = 0;
};
LayoutScheduleBound layout_schedule_bound(const calibrate::ComputeProfile& profile, const TrainingPoint& point,
                                          const CommLowerBound* comm = nullptr, double overlap_slowdown = 1);

// The same figures from any step programs (rank 0's pipeline found through its peers): the reference
// layout_schedule_bound is tested against (equal, but for ZeRO-3's gathers, which only this one puts on
// the path).
LayoutScheduleBound programs_schedule_bound(const StepPrograms& programs, const CommLowerBound* comm = nullptr,
                                            double overlap_slowdown = 1);

// The least iteration of a rank that computes `compute_s` (at full speed), spends `inline_s` in collectives
// on its compute stream and `comm_s` in collectives on its communication stream, a compute overlapped by one
// of the latter running `overlap_slowdown` (>= 1) times slower: at least max(compute + inline, comm), more
// when overlapping is slower than not.
double streams_lower_bound_s(double compute_s, double inline_s, double comm_s, double overlap_slowdown);

}  // namespace dtsim::sim
