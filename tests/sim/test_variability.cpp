// Tests of synchronisation variance: the expected maximum of n log-normal factors in closed form and
// against the simulated iteration time of synchronous training, where every iteration waits for the slowest worker.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/training.hpp"

using namespace dtsim;

namespace {
constexpr double LAYER_FWD_S = 1e-3, LAYER_BWD_S = 2e-3;

platforms::Platform instant_network(int nodes) {
  platforms::Platform p;
  p.name = "test-instant";
  p.file = "test-instant.yaml";
  p.nodes = nodes;
  p.node.cpu = "test-cpu";
  p.node.intra.kind = platforms::IntraNodeKind::SHARED_MEMORY;
  p.node.intra.link_bandwidth_Bps = 1e18;
  p.network.technology = "test network";
  p.network.topology = platforms::TopologyKind::STAR;
  p.network.link_bandwidth_Bps = 1e18;
  p.network.latency_s = 0;
  return p;
}

calibrate::ComputeProfile no_update_profile(int layers) {
  calibrate::ComputeProfile prof;
  prof.model = "uniform";
  prof.device = "test-device";
  prof.batch = 32;
  for (int i = 0; i < layers; ++i) {
    calibrate::LayerTime l;
    l.name = "layer" + std::to_string(i);
    l.op = "conv2d";
    l.fwd_s = LAYER_FWD_S;
    l.bwd_data_s = l.bwd_weights_s = LAYER_BWD_S / 2;
    l.grad_bytes = 1000;
    prof.layers.push_back(l);
  }
  prof.update_s = 0;
  return prof;
}
}  // namespace

TEST_CASE("sim::Variability: expected maximum of log-normal factors matches closed forms", "[sim][variability]") {
  CHECK(sim::expected_max_lognormal_factor(1, 0.3) == 1.0);
  CHECK(sim::expected_max_lognormal_factor(64, 0) == 1.0);
  for (double cv : {0.05, 0.2, 0.5}) {
    // Two log-normals of mean 1: E[max] = 2 Phi(sigma / sqrt 2).
    const double sigma = std::sqrt(std::log1p(cv * cv));
    const double two = 2 * 0.5 * std::erfc(-sigma / std::sqrt(2.0) / std::sqrt(2.0));
    INFO("cv " << cv);
    CHECK(sim::expected_max_lognormal_factor(2, cv) == Approx(two).epsilon(1e-9));
    // Grows with n, and for small cv ~ 1 + cv E[max of n standard normals] (0.5642 for 2, 1.0294 for 4).
    CHECK(sim::expected_max_lognormal_factor(4, cv) > sim::expected_max_lognormal_factor(2, cv));
  }
  CHECK(sim::expected_max_lognormal_factor(4, 0.01) == Approx(1 + 0.01 * 1.0294).epsilon(1e-4));
  // With a reference device at 1: two devices pay E[max(1, X)] = 1 + E[(X - 1)+]; for a small cv that is
  // 1 + cv E[Z+] = 1 + cv / sqrt(2 pi). One device pays 1; more devices pay more, and less than n draws.
  CHECK(sim::expected_max_with_reference_factor(1, 0.3) == 1.0);
  CHECK(sim::expected_max_with_reference_factor(2, 0.001) == Approx(1 + 0.001 / std::sqrt(2 * M_PI)).epsilon(1e-6));
  CHECK(sim::expected_max_with_reference_factor(8, 0.05) > sim::expected_max_with_reference_factor(4, 0.05));
  CHECK(sim::expected_max_with_reference_factor(8, 0.05) < sim::expected_max_lognormal_factor(8, 0.05));
}

TEST_CASE("sim::Variability: synchronous training pays the expected maximum over workers", "[sim][variability]") {
  const auto prof = no_update_profile(4);
  const double step_s = 4 * (LAYER_FWD_S + LAYER_BWD_S);
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("allreduce-ring");
  p.workers = 8;
  p.runtime.overlap = false;
  p.fidelity.iterations = 801;
  p.variability.jitter_cv = 0.2;
  p.variability.seed = 3;
  const auto r = sim::simulate_training(instant_network(8), prof, p);
  // 800 measured iterations: the sample mean of the maximum is within ~0.5% of its expectation.
  CHECK(r.iteration_time_s == Approx(step_s * sim::expected_max_lognormal_factor(8, 0.2)).epsilon(0.015));
  p.variability = sim::Variability{};
  CHECK(sim::simulate_training(instant_network(8), prof, p).iteration_time_s == Approx(step_s).epsilon(1e-6));
}

TEST_CASE("sim::Variability: the device-class defaults are the published spreads in standard deviations",
          "[sim][variability]") {
  // Box-plot whiskers of a normal spread: Q3 + 1.5 IQR = 0.6745 + 1.5 x 1.349 = 2.698 sigma on each side.
  const double q3 = 0.6744897501960817;
  CHECK(sim::WHISKER_RANGE_SIGMAS == Approx(2 * (q3 + 1.5 * 2 * q3)).epsilon(1e-3));
  // The expected range of 10,000 normal draws: twice the expected maximum, from the integral (small cv).
  const double small_cv = 1e-5;
  const double max_10k = (sim::expected_max_lognormal_factor(10000, small_cv) - 1) / small_cv;
  CHECK(max_10k == Approx(3.85).epsilon(0.01));
  CHECK(sim::RANGE_10K_SIGMAS == Approx(2 * max_10k).epsilon(0.01));
  CHECK(sim::GPU_DEVICE_CV == Approx(0.08 / 5.396));
  CHECK(sim::CPU_DEVICE_CV == Approx(0.16 / 7.7));
  // What a user gets by device class, and what --no-variability and a named value give.
  auto gpu = instant_network(2);
  gpu.node.gpus = 1;
  gpu.node.gpu = "p100-pcie";
  const auto user = sim::default_training_point();
  CHECK(sim::resolve_device_spread(gpu, user).cv == sim::GPU_DEVICE_CV);
  CHECK(sim::resolve_device_spread(instant_network(2), user).cv == sim::CPU_DEVICE_CV);
  sim::TrainingPoint off = user;
  off.variability = sim::Variability::none();
  CHECK(sim::resolve_device_spread(gpu, off).cv == 0);
  CHECK(sim::resolve_device_spread(gpu, sim::TrainingPoint{}).cv == 0);  // the library API: off
  off.variability.device_cv = 0.05;
  CHECK(sim::resolve_device_spread(gpu, off).cv == 0.05);
}

TEST_CASE("sim::Variability: a persistent device spread makes every iteration wait for the slowest device",
          "[sim][variability]") {
  const auto prof = no_update_profile(4);
  const double step_s = 4 * (LAYER_FWD_S + LAYER_BWD_S);
  constexpr double CV = 0.2;
  constexpr int WORKERS = 8, SEEDS = 120;
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("allreduce-ring");
  p.workers = WORKERS;
  p.runtime.overlap = false;
  p.fidelity.iterations = 3;
  p.variability.device_cv = CV;
  // Over many device draws the slowest of 8 (device 0 at the mean, 7 drawn) averages to its expectation
  // (~1% standard error).
  double sum = 0;
  for (int seed = 1; seed <= SEEDS; ++seed) {
    p.variability.seed = static_cast<std::uint64_t>(seed);
    sum += sim::simulate_training(instant_network(WORKERS), prof, p).iteration_time_s / step_s;
  }
  CHECK(sum / SEEDS == Approx(sim::expected_max_with_reference_factor(WORKERS, CV)).epsilon(0.03));
  // Device 0, the 1-worker baseline's, is the reference device at the spread's mean, whatever the seed.
  for (std::uint64_t seed : {1, 7, 12345}) {
    p.variability.seed = seed;
    p.workers = 1;
    CHECK(sim::simulate_training(instant_network(WORKERS), prof, p).iteration_time_s == Approx(step_s).epsilon(1e-9));
  }
  // One draw: devices come in order, so adding workers never makes the slowest device faster.
  p.variability.seed = 7;
  double previous = 0;
  for (int n : {1, 2, 4, 8, 16}) {
    p.workers = n;
    const double t = sim::simulate_training(instant_network(16), prof, p).iteration_time_s;
    INFO(n << " workers");
    CHECK(t >= previous);
    previous = t;
  }
}
