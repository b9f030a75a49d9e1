// Internal to sim/: validation of a training point against its platform and profile before any
// SimGrid object exists (xbt_die would abort the process), and the node layout it implies.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// Workers per node actually used: the point's value, else the platform default, capped at workers.
int effective_workers_per_node(const platforms::Platform& platform, const TrainingPoint& point);

// The persistent compute factor of each of `devices` devices (the device spread, variability.cpp): log-normal
// of mean 1 and coefficient of variation `cv` (0: all 1) drawn in device order from `seed`'s own stream,
// device 0 the reference at 1. The executor runs a synchronous point's ranks at the largest of them.
std::vector<double> persistent_device_factors(int devices, double cv, std::uint64_t seed);

// Throws InputError (one line naming the flag and what was expected) for impossible set-ups;
// returns the layout: nodes = ceil(workers / workers per node), plus dedicated PS nodes.
Layout check_training_point(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                            const TrainingPoint& point);

}  // namespace dtsim::sim
