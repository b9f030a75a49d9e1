// Internal to sim/: planners, each building the step programs of one parallel training family from the
// iteration's compute plan, without SimGrid (tested in tests/sim/test_planners.cpp). One file per planner.
#pragma once
#include "calibrate/profile.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/src/workload.hpp"
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
