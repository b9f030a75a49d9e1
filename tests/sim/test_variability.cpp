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
}

TEST_CASE("sim::Variability: synchronous training pays the expected maximum over workers", "[sim][variability]") {
  const auto prof = no_update_profile(4);
  const double step_s = 4 * (LAYER_FWD_S + LAYER_BWD_S);
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("allreduce-ring");
  p.workers = 8;
  p.overlap = false;
  p.iterations = 801;
  p.variability.jitter_cv = 0.2;
  p.variability.seed = 3;
  const auto r = sim::simulate_training(instant_network(8), prof, p);
  // 800 measured iterations: the sample mean of the maximum is within ~0.5% of its expectation.
  CHECK(r.iteration_time_s == Approx(step_s * sim::expected_max_lognormal_factor(8, 0.2)).epsilon(0.015));
  p.variability = sim::Variability{};
  CHECK(sim::simulate_training(instant_network(8), prof, p).iteration_time_s == Approx(step_s).epsilon(1e-6));
}
