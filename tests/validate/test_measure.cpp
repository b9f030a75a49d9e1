// Tests of the trainer-report statistics and the MPI curve fit (validate/validate.hpp).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "validate/validate.hpp"

using nlohmann::json;

namespace {

json iteration(double total_s, double busy_s, double own_s, bool warmup = false) {
  return {{"warmup", warmup},       {"total_s", total_s},       {"data_s", 0.001},    {"forward_s", total_s * 0.3},
          {"backward_s", total_s * 0.6}, {"exchange_s", total_s * 0.05}, {"update_s", total_s * 0.05},
          {"own_cpu_s", own_s},     {"machine_busy_s", busy_s}, {"loss", 1.0}};
}

json report(const json& iters) {
  return {{"ranks", 2}, {"online_cpus", 2}, {"iterations", iters}, {"losses", {2.3, 1.1}},
          {"test_accuracy_before", 0.1}, {"test_accuracy_after", 0.6}};
}

}  // namespace

TEST_CASE("validate::summarize_report: medians over undisturbed windows, warm-up excluded", "[validate]") {
  json iters = json::array();
  iters.push_back(iteration(9.0, 18.0, 18.0, true));  // warm-up: ignored whatever it says
  for (int i = 0; i < 4; ++i) iters.push_back(iteration(0.1, 0.2, 0.2));   // clean: nobody else ran
  for (int i = 0; i < 4; ++i) iters.push_back(iteration(0.3, 0.6, 0.3));   // half the machine was someone else's
  const auto run = dtsim::validate::summarize_report("mpirun noise\n" + report(iters).dump(1));
  CHECK(run.ranks == 2);
  CHECK(run.iterations_kept == 4);
  CHECK(run.iterations_rejected == 4);
  CHECK(run.clean);
  CHECK(run.phases.at("iteration").measured_ms == Approx(100.0));
  CHECK(run.phases.at("backward").measured_ms == Approx(60.0));
  CHECK(run.loss_first == Approx(2.3));
  CHECK(run.test_accuracy_after == Approx(0.6));
}

TEST_CASE("validate::summarize_report: all disturbed keeps every iteration and says so", "[validate]") {
  json iters = json::array();
  for (int i = 0; i < 3; ++i) iters.push_back(iteration(0.2, 0.4, 0.1));
  const auto run = dtsim::validate::summarize_report(report(iters).dump(1));
  CHECK_FALSE(run.clean);
  CHECK(run.iterations_kept == 0);
  CHECK(run.phases.at("iteration").measured_ms == Approx(200.0));
  CHECK_THROWS_AS(dtsim::validate::summarize_report("not json"), dtsim::Failure);
  CHECK_THROWS_AS(dtsim::validate::summarize_report(json{{"ranks", 1}}.dump(1)), dtsim::Failure);
}

TEST_CASE("validate::fit_comm: recovers latency and bandwidth of exact curves", "[validate]") {
  const double alpha = 2e-6, beta = 5e9, pp_lat = 1e-6, pp_bw = 8e9;
  json bench{{"ranks", 2}, {"pingpong", json::array()}, {"allreduce", json::array()}};
  for (double bytes = 4; bytes <= 64.0 * 1024 * 1024; bytes *= 4) {
    bench["pingpong"].push_back({{"bytes", bytes}, {"time_s", pp_lat + bytes / pp_bw}});
    bench["allreduce"].push_back({{"bytes", bytes}, {"time_s", 2 * alpha + bytes / beta}});  // ring, p = 2
  }
  const auto fit = dtsim::validate::fit_comm(bench.dump(1));
  CHECK(fit.pingpong_bandwidth_Bps == Approx(pp_bw).epsilon(1e-6));
  CHECK(fit.allreduce_bandwidth_Bps == Approx(beta).epsilon(1e-6));
  CHECK(fit.allreduce_latency_s == Approx(alpha).epsilon(0.01));
  CHECK(fit.pingpong_latency_s == Approx(pp_lat).epsilon(0.01));
  json flat = bench;
  for (auto& e : flat["allreduce"]) e["time_s"] = 1e-3;
  CHECK_THROWS_AS(dtsim::validate::fit_comm(flat.dump(1)), dtsim::Failure);
}

TEST_CASE("validate::fit_comm: around a message size, the local regime is fitted", "[validate]") {
  // In cache (< 1 MiB) 10 GB/s, beyond it 2 GB/s: a fit around 256 KiB must see the in-cache figure.
  json bench{{"ranks", 2}, {"pingpong", json::array()}, {"allreduce", json::array()}};
  for (double bytes = 4; bytes <= 16.0 * 1024 * 1024; bytes *= 2) {
    const double bw = bytes < 1024.0 * 1024 * 1.5 ? 10e9 : 2e9;
    bench["pingpong"].push_back({{"bytes", bytes}, {"time_s", 1e-6 + bytes / bw}});
    bench["allreduce"].push_back({{"bytes", bytes}, {"time_s", 2e-6 + bytes / bw}});
  }
  const auto local = dtsim::validate::fit_comm(bench.dump(1), 128.0 * 1024);
  CHECK(local.allreduce_bandwidth_Bps == Approx(10e9).epsilon(1e-6));
  const auto global = dtsim::validate::fit_comm(bench.dump(1));
  CHECK(global.allreduce_bandwidth_Bps < 5e9);
  CHECK_THROWS_AS(dtsim::validate::fit_comm(bench.dump(1), 1e12), dtsim::Failure);
}
