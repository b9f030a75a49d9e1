// Tests of the intra-node kinds built in SimGrid (sim/src/platform_builder.cpp): NVSwitch all-to-all at
// the per-GPU NVLink bandwidth, and explicit NVLink pairs with brick counts (direct, two hops, PCIe).
#include <catch2/catch.hpp>

#include <string>

#include "common/child.hpp"
#include "sim/src/world.hpp"
#include "tests/sim/comm_test_platforms.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {

constexpr double BRICK_BPS = 25e9;
constexpr double PCIE_BPS = 16e9;

platforms::Platform gpu_node(platforms::IntraNodeKind kind, int gpus) {
  platforms::Platform p = test_platforms::uniform_star(1, 12.5e9, 0);
  p.node.gpu = "test-gpu";
  p.node.gpus = gpus;
  p.node.intra.kind = kind;
  p.node.intra.link_bandwidth_Bps = BRICK_BPS;
  p.node.intra.uplink_bandwidth_Bps = PCIE_BPS;
  p.node.intra.latency_s = 0;
  return p;
}

// Time (s) until every transfer of `flows` (src GPU, dst GPU, bytes), all started at 0, has finished.
double flows_s(const platforms::Platform& p, int gpus, std::vector<std::array<double, 3>> flows) {
  return std::stod(run_in_child([&]() {
    World w(p, {1, gpus, 0});
    double end = 0;
    for (const auto& f : flows)
      w.transfer(w.worker_host(static_cast<int>(f[0])), w.worker_host(static_cast<int>(f[1])), f[2],
                 [&]() { end = w.now(); });
    w.run();
    return test_platforms::fmt_double(end);
  }));
}

}  // namespace

TEST_CASE("sim::PlatformBuilder: NVSwitch is all-to-all at the per-GPU NVLink bandwidth", "[sim]") {
  auto p = gpu_node(platforms::IntraNodeKind::NVSWITCH, 4);
  p.node.intra.links_per_gpu = 12;  // A100: 12 bricks = 300 GB/s per direction
  const double bytes = 300e6;
  CHECK(flows_s(p, 4, {{0, 1, bytes}}) == Approx(bytes / (12 * BRICK_BPS)).epsilon(0.01));
  // Disjoint pairs do not share anything (non-blocking switch).
  CHECK(flows_s(p, 4, {{0, 1, bytes}, {2, 3, bytes}}) == Approx(bytes / (12 * BRICK_BPS)).epsilon(0.01));
  // Two senders into one GPU share its port.
  CHECK(flows_s(p, 4, {{0, 1, bytes}, {2, 1, bytes}}) == Approx(2 * bytes / (12 * BRICK_BPS)).epsilon(0.01));
}

TEST_CASE("sim::PlatformBuilder: NVLink pairs carry their bricks, two hops via a neighbour, else PCIe", "[sim]") {
  auto p = gpu_node(platforms::IntraNodeKind::NVLINK, 4);
  p.node.intra.pairs = {{0, 1, 2}, {1, 2, 1}};  // GPU 3 has no NVLink
  const double bytes = 100e6;
  CHECK(flows_s(p, 4, {{0, 1, bytes}}) == Approx(bytes / (2 * BRICK_BPS)).epsilon(0.01));
  CHECK(flows_s(p, 4, {{1, 2, bytes}}) == Approx(bytes / BRICK_BPS).epsilon(0.01));
  CHECK(flows_s(p, 4, {{0, 2, bytes}}) == Approx(bytes / BRICK_BPS).epsilon(0.01));  // 0-1-2: the 1-brick hop
  CHECK(flows_s(p, 4, {{0, 3, bytes}}) == Approx(bytes / PCIE_BPS).epsilon(0.01));   // through the CPU side
}
