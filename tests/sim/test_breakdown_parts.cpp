// The parts of rank 0's compute (sim/training.hpp Breakdown): the calibrated kernels, what the device
// factor adds (compute_variability_s) and what overlapped collectives add (overlap_slowdown_s).
#include <catch2/catch.hpp>

#include "platforms/platform.hpp"
#include "sim/training.hpp"

using namespace dtsim;

namespace {

// 4 layers: 10 ms forward, 20 ms backward each, 4 MB of gradient each; 10 ms update (0.13 s in all).
calibrate::ComputeProfile uniform_profile() {
  calibrate::ComputeProfile prof;
  prof.model = "uniform";
  prof.device = "test-device";
  prof.batch = 32;
  for (int i = 0; i < 4; ++i) {
    calibrate::LayerTime l;
    l.name = "layer" + std::to_string(i);
    l.op = "conv2d";
    l.fwd_s = 10e-3;
    l.bwd_data_s = 10e-3;
    l.bwd_weights_s = 10e-3;
    l.grad_bytes = 4e6;
    prof.layers.push_back(l);
  }
  prof.update_s = 10e-3;
  return prof;
}

constexpr double KERNELS_S = 0.13;

}  // namespace

TEST_CASE("sim::Breakdown: a straggler factor of 2 on every step is half of rank 0's compute", "[sim]") {
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("allreduce-ring");
  p.workers = 2;
  p.fidelity.iterations = 3;
  p.variability.straggler_probability = 1;  // every worker, every iteration: exactly 2x
  p.variability.straggler_slowdown = 2;
  const auto r = sim::simulate_training(platforms::load_platform("ntua-vm"), uniform_profile(), p);  // CPU nodes
  CHECK(r.breakdown.compute_s == Approx(2 * KERNELS_S).epsilon(1e-6));
  CHECK(r.breakdown.compute_variability_s == Approx(KERNELS_S).epsilon(1e-6));
  CHECK(r.breakdown.overlap_slowdown_s == Approx(0).margin(1e-9));  // no interference on CPUs
}

TEST_CASE("sim::Breakdown: on GPUs the compute overlapped with collectives is the overlap slowdown", "[sim]") {
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("allreduce-ring");
  p.workers = 4;
  p.workers_per_node = 1;
  p.fidelity.iterations = 3;
  p.runtime.fusion_bytes =
      4e6;  // one bucket per layer: three of them overlap the backward of the layers before
  const auto platform = platforms::load_platform("gtx1080ti-cluster");
  const auto r = sim::simulate_training(platform, uniform_profile(), p);
  CHECK(r.breakdown.compute_variability_s == Approx(0).margin(1e-9));  // no device spread in a TrainingPoint{}
  CHECK(r.breakdown.overlap_slowdown_s > 0);
  CHECK(r.breakdown.compute_s - r.breakdown.overlap_slowdown_s == Approx(KERNELS_S).epsilon(1e-6));
  // The slowdown is at most what OVERLAP_COMPUTE_SLOWDOWN makes of the overlappable backward (3 layers).
  CHECK(r.breakdown.overlap_slowdown_s <= 0.06 * (sim::OVERLAP_COMPUTE_SLOWDOWN - 1) + 1e-9);
  p.fidelity.interference = false;
  CHECK(sim::simulate_training(platform, uniform_profile(), p).breakdown.overlap_slowdown_s ==
        Approx(0).margin(1e-9));
}
