// Tests of the bottleneck sentence (scenarios/explain.hpp) on results whose answer is known.
#include <catch2/catch.hpp>

#include "scenarios/explain.hpp"

using namespace dtsim;

namespace {
sim::PointResult result(double compute_s, double exposed_s, double io_s) {
  sim::PointResult r;
  r.breakdown.compute_s = compute_s;
  r.breakdown.exposed_communication_s = exposed_s;
  r.breakdown.io_stall_s = io_s;
  r.iteration_time_s = compute_s + exposed_s + io_s;
  r.buckets = 4;
  r.gradient_bytes = 100e6;
  return r;
}
}  // namespace

TEST_CASE("scenarios::explain: names input I/O when workers wait for data", "[scenarios]") {
  const auto s = scenarios::explain_point(result(0.1, 0, 0.3), {false, 32e6, "10 GbE", "v100"});
  CHECK(s.find("input I/O: worker 0 waits 75%") == 0);
  CHECK(s.find("32.0 MB per batch") != std::string::npos);
}

TEST_CASE("scenarios::explain: names the parameter-server shard whose NIC is busiest", "[scenarios]") {
  auto r = result(0.1, 0.9, 0);
  r.busiest_nic_node = 3;
  r.busiest_nic_server = 1;
  r.busiest_nic_busy = 0.95;
  r.busiest_nic_bytes = 2e9;
  const auto s = scenarios::explain_point(r, {true, 0, "10 GbE", "v100"});
  CHECK(s.find("PS shard 1's NIC (node 3) is busy 95%") == 0);
  CHECK(s.find("90% of the iteration is exposed communication") != std::string::npos);
}

TEST_CASE("scenarios::explain: allreduce exchange and compute-bound points", "[scenarios]") {
  const auto comm = scenarios::explain_point(result(0.5, 0.5, 0), {false, 0, "EDR InfiniBand", "v100"});
  CHECK(comm.find("gradient exchange: 50%") == 0);
  CHECK(comm.find("over EDR InfiniBand") != std::string::npos);
  const auto compute = scenarios::explain_point(result(0.95, 0.05, 0), {false, 0, "EDR InfiniBand", "v100"});
  CHECK(compute == "compute: forward, backward and update fill 95% of the iteration on v100");
}
