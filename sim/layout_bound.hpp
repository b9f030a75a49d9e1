// A lower bound on a transformer layout's simulated iteration time, computed from its step programs
// without the network: what `dtsim plan` orders and prunes its candidates by (docs/layout-search.md
// "Pruning by bound", where the argument that it is a bound is written out).
#pragma once
#include "calibrate/profile.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// Seconds that simulate_training(platform, profile, point) can never beat as the job's iteration time
// (point.layout.samples_per_iteration / throughput) for a transformer layout point (layout active): the
// longest path through rank 0's pipeline with every collective, send and receive taking no time, or the
// busiest rank's compute, whichever is longer. 0 when the point's variability can make a compute faster
// than calibrated (per-iteration jitter). InputError as the planner gives for a layout it cannot play.
double layout_iteration_lower_bound_s(const calibrate::ComputeProfile& profile, const TrainingPoint& point);

}  // namespace dtsim::sim
