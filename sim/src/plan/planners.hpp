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
