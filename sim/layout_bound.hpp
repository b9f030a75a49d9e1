// A lower bound on a transformer layout's simulated iteration time, computed from its step programs and
// the platform's link capacities without simulating the network: what `dtsim plan` orders and prunes its
// candidates by (docs/layout-search.md "Pruning by bound", where the argument that it is a bound is
// written out).
#pragma once
#include "calibrate/profile.hpp"
#include "platforms/platform.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// Seconds that simulate_training(platform, profile, point) can never beat as the job's iteration time
// (point.layout.samples_per_iteration / throughput) for a transformer layout point (layout active), nor
// any one measured iteration of it: the longest of rank 0's longest path (each collective, send and receive
// at the least time its bytes need on the platform's links), the busiest pipeline rank's compute stream
// (computes and inline tensor/context/expert collectives) and its communication stream (its collectives,
// one at a time). 0 when the point's variability can make a compute faster than calibrated
// (per-iteration jitter). InputError as the planner gives for a layout it cannot play.
double layout_iteration_lower_bound_s(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                                      const TrainingPoint& point);

}  // namespace dtsim::sim
