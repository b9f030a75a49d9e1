// Internal to sim/: validation of a training point against its platform and profile before any
// SimGrid object exists (xbt_die would abort the process), and the node layout it implies.
#pragma once
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// Workers per node actually used: the point's value, else the platform default, capped at workers.
int effective_workers_per_node(const platforms::Platform& platform, const TrainingPoint& point);

// Throws InputError (one line naming the flag and what was expected) for impossible set-ups;
// returns the layout: nodes = ceil(workers / workers per node), plus dedicated PS nodes.
Layout check_training_point(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                            const TrainingPoint& point);

}  // namespace dtsim::sim
