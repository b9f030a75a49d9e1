// Tests of the standalone communication patterns (sim/comm.hpp): closed forms on uniform networks,
// coarse vs fine agreement, monotonicity in bandwidth, determinism and input checking.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/errors.hpp"
#include "sim/comm.hpp"
#include "tests/sim/comm_test_platforms.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
constexpr double BW = 1.25e9;   // 10 Gb/s ports
constexpr double LAT = 5e-6;    // per port, so 2 x LAT between two nodes
constexpr double S = 25e6;

CommResult run(const platforms::Platform& p, const std::string& pattern, int workers, double bytes, CommMode mode,
               int servers = 1, PsPlacement placement = PsPlacement::COLOCATED, int wpn = 0) {
  CommRequest r;
  r.pattern = pattern;
  r.workers = workers;
  r.bytes = bytes;
  r.mode = mode;
  r.ps_servers = servers;
  r.ps_placement = placement;
  r.workers_per_node = wpn;
  return simulate_comm(p, r);
}
}  // namespace

TEST_CASE("sim::comm: ring allreduce closed form 2(n-1)/n S/B + 2(n-1) L", "[sim]") {
  for (int n : {4, 32}) {
    auto p = test_platforms::uniform_star(n, BW, LAT);
    const double expected = 2.0 * (n - 1) / n * S / BW + 2.0 * (n - 1) * 2 * LAT;
    for (auto mode : {CommMode::FINE, CommMode::COARSE}) {
      const auto r = run(p, "allreduce-ring", n, S, mode);
      INFO("n=" << n << " mode=" << to_string(mode));
      CHECK(r.time_s == Approx(expected).epsilon(0.02));
      CHECK(r.algbw_Bps == Approx(S / r.time_s));
      CHECK(r.busbw_Bps == Approx(r.algbw_Bps * 2 * (n - 1) / n));
    }
  }
}

TEST_CASE("sim::comm: recursive halving-doubling closed form 2 log2(n) L + 2(n-1)/n S/B", "[sim]") {
  for (int n : {8, 16}) {
    auto p = test_platforms::uniform_star(n, BW, LAT);
    const double expected = 2.0 * std::log2(n) * 2 * LAT + 2.0 * (n - 1) / n * S / BW;
    CHECK(run(p, "allreduce-rhd", n, S, CommMode::FINE).time_s == Approx(expected).epsilon(0.02));
  }
  // 6 ranks: 2 excess ranks fold in and out (one full-buffer message each way) around a 4-rank core.
  auto p = test_platforms::uniform_star(6, BW, LAT);
  const double expected = 2 * (2 * LAT + S / BW) + 2.0 * 2 * 2 * LAT + 2.0 * 3 / 4 * S / BW;
  CHECK(run(p, "allreduce-rhd", 6, S, CommMode::FINE).time_s == Approx(expected).epsilon(0.02));
}

TEST_CASE("sim::comm: binomial broadcast closed form ceil(log2 n) (L + S/B)", "[sim]") {
  auto p = test_platforms::uniform_star(8, BW, LAT);
  CHECK(run(p, "broadcast-binomial", 8, S, CommMode::FINE).time_s == Approx(3 * (2 * LAT + S / BW)).epsilon(0.02));
}

TEST_CASE("sim::comm: parameter server is bounded by the server NIC", "[sim]") {
  const int n = 8;
  auto p = test_platforms::uniform_star(n + 2, BW, LAT);
  // Dedicated server: all n pushes share its port, then all n pulls: 2 (n S / B + L).
  for (auto mode : {CommMode::FINE, CommMode::COARSE}) {  // the training PS exchange: one flow per rank either way
    const double one = run(p, "ps", n, S, mode, 1, PsPlacement::DEDICATED).time_s;
    CHECK(one == Approx(2 * (n * S / BW + 2 * LAT)).epsilon(0.02));
    // Two shards on two nodes halve the bytes through each server port.
    const double two = run(p, "ps", n, S, mode, 2, PsPlacement::DEDICATED).time_s;
    CHECK(two == Approx(2 * (n * S / 2 / BW + 2 * LAT)).epsilon(0.02));
  }
  // Colocated on node 0: that node's own worker does not cross the port.
  const double colocated = run(p, "ps", n, S, CommMode::FINE, 1, PsPlacement::COLOCATED).time_s;
  CHECK(colocated == Approx(2 * ((n - 1) * S / BW + 2 * LAT)).epsilon(0.02));
}

TEST_CASE("sim::comm: protocol efficiency scales large-message bandwidth", "[sim]") {
  auto p = test_platforms::uniform_star(2, BW, 0);
  p.network.protocol_efficiency = 0.5;
  CHECK(run(p, "allreduce-ring", 2, S, CommMode::FINE).time_s == Approx(S / (0.5 * BW)).epsilon(0.01));
}

TEST_CASE("sim::comm: coarse and fine agree within 3% on a multi-GPU fat tree", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  for (std::string pattern : {"allreduce-ring", "allreduce-hier"}) {
    for (int n : {8, 32, 64}) {
      for (double bytes : {1e6, 25e6}) {
        const auto fine = run(p, pattern, n, bytes, CommMode::FINE);
        const auto coarse = run(p, pattern, n, bytes, CommMode::COARSE);
        INFO(pattern << " n=" << n << " bytes=" << bytes);
        CHECK(coarse.time_s == Approx(fine.time_s).epsilon(0.03));
        CHECK(coarse.flows < fine.flows);
      }
    }
  }
}

TEST_CASE("sim::comm: more bandwidth is never slower", "[sim]") {
  for (std::string pattern : {"allreduce-ring", "allreduce-tree", "allreduce-rhd",
                       "allreduce-hier", "broadcast-binomial", "ps"}) {
    double previous = INFINITY;
    for (double scale : {1.0, 2.0, 8.0}) {
      auto p = test_platforms::gpu_fat_tree(8, 4);
      p.network.link_bandwidth_Bps *= scale;
      p.node.intra.link_bandwidth_Bps *= scale;
      p.node.intra.uplink_bandwidth_Bps *= scale;
      const double t = run(p, pattern, 24, 10e6, CommMode::AUTO).time_s;
      INFO(pattern << " x" << scale);
      CHECK(t <= previous * (1 + 1e-9));
      previous = t;
    }
  }
}

TEST_CASE("sim::comm: identical inputs give identical outputs", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  for (auto mode : {CommMode::FINE, CommMode::COARSE}) {
    const auto a = run(p, "allreduce-ring", 48, 7e6, mode);
    const auto b = run(p, "allreduce-ring", 48, 7e6, mode);
    CHECK(a.time_s == b.time_s);
    CHECK(a.flows == b.flows);
  }
}

TEST_CASE("sim::comm: auto mode is coarse above the documented size", "[sim]") {
  CHECK(resolve_mode(CommMode::AUTO, COARSE_ABOVE_RANKS) == CommMode::FINE);
  CHECK(resolve_mode(CommMode::AUTO, COARSE_ABOVE_RANKS + 1) == CommMode::COARSE);
  CHECK(resolve_mode(CommMode::FINE, 4096) == CommMode::FINE);
}

TEST_CASE("sim::comm: impossible requests are input errors", "[sim]") {
  auto p = test_platforms::uniform_star(4, BW, LAT);
  CHECK_THROWS_AS(run(p, "allreduce-ring", 5, S, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "allreduce-ring", 1, S, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "allreduce-ring", 4, 0, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "allreduce-ring", 4, -5, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "allreduce-ring", 4, 1e300, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "ps", 4, S, CommMode::FINE, 0), InputError);
  CHECK_THROWS_AS(run(p, "ps", 4, S, CommMode::FINE, 1, PsPlacement::DEDICATED), InputError);
  auto zero = p;
  zero.network.link_bandwidth_Bps = 0;
  CHECK_THROWS_AS(run(zero, "allreduce-ring", 4, S, CommMode::FINE), InputError);
  auto nan = p;
  nan.network.latency_s = NAN;
  CHECK_THROWS_AS(run(nan, "allreduce-ring", 4, S, CommMode::FINE), InputError);
  CHECK_THROWS_AS(simulate_pingpong(test_platforms::uniform_star(1, BW, LAT), {1e6}), InputError);
  CHECK_THROWS_AS(run(p, "allreduce-magic", 4, S, CommMode::FINE), InputError);
  CHECK_THROWS_AS(run(p, "broadcast", 4, S, CommMode::FINE), InputError);  // an operation is not an algorithm
}

TEST_CASE("sim::comm: byte sizes take decimal and binary suffixes", "[sim]") {
  CHECK(parse_byte_size("25MB", "--bytes") == 25e6);
  CHECK(parse_byte_size("1000KB", "--bytes") == 1e6);
  CHECK(parse_byte_size("4MiB", "--bytes") == 4194304);
  CHECK(parse_byte_size("1.5 GB", "--bytes") == 1.5e9);
  CHECK(parse_byte_size("512", "--bytes") == 512);
  CHECK_THROWS_AS(parse_byte_size("12 parsecs", "--bytes"), InputError);
  CHECK_THROWS_AS(parse_byte_size("MB", "--bytes"), InputError);
  CHECK_THROWS_AS(parse_byte_size("-1MB", "--bytes"), InputError);
  CHECK_THROWS_AS(parse_byte_size("0", "--bytes"), InputError);
  CHECK_THROWS_AS(parse_byte_size("5000TB", "--bytes"), InputError);
}

TEST_CASE("sim::comm: pingpong bandwidth rises with size towards the link rate", "[sim]") {
  auto p = test_platforms::uniform_star(2, BW, LAT);
  const auto points = simulate_pingpong(p, {1e3, 1e6, 1e8});
  REQUIRE(points.size() == 3);
  CHECK(points[0].time_s == Approx(2 * LAT + 1e3 / BW).epsilon(0.01));
  CHECK(points[0].bandwidth_Bps < points[1].bandwidth_Bps);
  CHECK(points[1].bandwidth_Bps < points[2].bandwidth_Bps);
  CHECK(points[2].bandwidth_Bps == Approx(BW).epsilon(0.01));
}
