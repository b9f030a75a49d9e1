// Shared by the layout tests (test_layout.cpp, test_layout_bound.cpp): a profile of uniform transformer
// blocks and a training point that runs a parallel layout on it.
#pragma once
#include <cstdint>
#include <string>

#include "calibrate/profile.hpp"
#include "sim/training.hpp"

namespace dtsim::sim::test_layouts {

inline constexpr double MS = 1e-3;

// `blocks` transformer blocks, each one layer of 1 ms forward and 2 ms backward with `grad` gradient bytes;
// the optimizer step `update_s` over the whole model. `alternate`: even blocks are attention layers, odd
// ones linear (else all linear).
inline calibrate::ComputeProfile blocks_profile(int blocks, std::int64_t grad, double update_s = 0,
                                                bool alternate = false) {
  calibrate::ComputeProfile p;
  p.model = "blocks";
  p.device = "test-cpu";
  p.batch = 1;
  for (int b = 0; b < blocks; ++b) {
    calibrate::LayerTime l;
    l.name = "layers." + std::to_string(b);
    l.op = alternate && b % 2 == 0 ? "attention" : "linear";
    l.block = b;
    l.fwd_s = 1 * MS;
    l.bwd_data_s = 1 * MS;
    l.bwd_weights_s = 1 * MS;
    l.grad_bytes = grad;
    p.layers.push_back(l);
  }
  p.update_s = update_s;
  return p;
}

// `workers` ranks, one per node, on the ring, `iterations` simulated; the layout's samples per iteration
// set from its micro-batches and data-parallel size.
inline TrainingPoint layout_point(int workers, ParallelLayout layout, int iterations, bool interference) {
  TrainingPoint p;
  p.workers = workers;
  p.workers_per_node = 1;
  p.fidelity.iterations = iterations;
  p.fidelity.interference = interference;
  p.strategy = strategy_by_name("allreduce-ring");
  layout.samples_per_iteration = layout.micro_batches * (workers / layout.model_parallel());
  p.layout = layout;
  return p;
}

}  // namespace dtsim::sim::test_layouts
