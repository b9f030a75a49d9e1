// Internal to sim/: playing step programs directly. simulate_training plays the programs of a point's
// strategy (its family's planner); this plays given ones, for tests and for planners whose layouts the
// point does not name yet.
#pragma once
#include "calibrate/profile.hpp"
#include "platforms/platform.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {

// Plays `programs` (one per worker, point.workers of them) on `platform` in a child process, with the
// point's iterations, variability, interference, collective library and accounting. The profile gives
// the batch (throughput = batch x workers / iteration). InputError for impossible set-ups, Failure for
// programs that do not pass check_programs.
PointResult simulate_programs(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                              const TrainingPoint& point, const StepPrograms& programs);

}  // namespace dtsim::sim
