// Tests of the simulated World (sim/src/world.hpp): platform building, just-in-time activities and the
// ring allreduce against its closed form. Each simulation runs in a child process (one engine each).
#include <catch2/catch.hpp>

#include <cmath>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <string>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"
#include "tests/sim/comm_test_platforms.hpp"
#include "tests/sim/world_test_support.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using dtsim::test_platforms::in_world;

TEST_CASE("sim::World: compute, transfer and after chain in simulated time", "[sim]") {
  auto p = test_platforms::uniform_star(4, 1e9, 1e-6);
  const double t = in_world(p, {4, 1, 0}, [](World& w) {
    double end = -1;
    w.compute(0, 2.0, [&]() {
      w.after(0.5, [&]() {
        w.transfer(w.worker_host(0), w.worker_host(1), 1e9, [&]() { end = w.now(); });
      });
    });
    w.run();
    return end;
  });
  // 2 s compute + 0.5 s wait + 1e9 B at 1e9 B/s + latency (2 ports of 1 us)
  CHECK(t == Approx(3.5 + 2e-6).epsilon(1e-6));
}

TEST_CASE("sim::World: two flows into one port share it", "[sim]") {
  auto p = test_platforms::uniform_star(3, 1e9, 0);
  const double t = in_world(p, {3, 1, 0}, [](World& w) {
    double end = 0;
    for (int src : {1, 2}) w.transfer(w.worker_host(src), w.worker_host(0), 1e9, [&]() { end = w.now(); });
    w.run();
    return end;
  });
  CHECK(t == Approx(2.0).epsilon(1e-6));
}

TEST_CASE("sim::World: ring allreduce matches its closed form in both modes", "[sim]") {
  const double bw = 1.25e9, lat = 5e-6, bytes = 25e6;
  for (int n : {2, 5, 16}) {
    auto p = test_platforms::uniform_star(n, bw, lat);
    for (CommMode mode : {CommMode::FINE, CommMode::COARSE}) {
      const double t = in_world(p, {n, 1, 0}, [&](World& w) {
        std::vector<int> ranks;
        for (int i = 0; i < n; ++i) ranks.push_back(i);
        double end = 0;
        start_collective(w, *collective_or_null("allreduce", "ring"), ranks, bytes, mode, [&]() { end = w.now(); });
        w.run();
        return end;
      });
      const double expected = 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * (2 * lat);
      INFO("n=" << n << " mode=" << to_string(mode));
      CHECK(t == Approx(expected).epsilon(0.02));
    }
  }
}

TEST_CASE("sim::World: fat-tree platform builds with node-major ranks", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  const double n = in_world(p, {8, 4, 0}, [](World& w) {
    REQUIRE(w.workers() == 32);
    CHECK(w.node_of(5) == 1);
    double end = 0;
    std::vector<int> ranks(32);
    for (int i = 0; i < 32; ++i) ranks[i] = i;
    start_collective(w, *collective_or_null("allreduce", "ring"), ranks, 1e6, CommMode::COARSE, [&]() { end = w.now(); });
    w.run();
    return end;
  });
  CHECK(n > 0);
}

namespace {

// Two groups of two single-node routers: nodes 0, 1 in group 0, nodes 2, 3 in group 1.
platforms::Platform two_group_dragonfly(double global_link_bandwidth_Bps) {
  auto p = test_platforms::uniform_star(4, 1e9, 0);
  p.network.topology = platforms::TopologyKind::DRAGONFLY;
  p.network.dragonfly.groups = 2;
  p.network.dragonfly.routers_per_chassis = 2;
  p.network.dragonfly.global_link_bandwidth_Bps = global_link_bandwidth_Bps;
  return p;
}

double dragonfly_transfer_s(const platforms::Platform& p, int dst) {
  return in_world(p, {4, 1, 0}, [dst](World& w) {
    double end = 0;
    w.transfer(w.worker_host(0), w.worker_host(dst), 1e9, [&]() { end = w.now(); });
    w.run();
    return end;
  });
}

}  // namespace

TEST_CASE("sim::World: dragonfly global links run at global_link_bandwidth_Bps x group_links", "[sim]") {
  // 1e9 B: 1 s at the 1e9 B/s links; across groups the 0.25e9 B/s global link is the bottleneck.
  CHECK(dragonfly_transfer_s(two_group_dragonfly(0.25e9), 2) == Approx(4.0).epsilon(1e-6));
  CHECK(dragonfly_transfer_s(two_group_dragonfly(0.25e9), 1) == Approx(1.0).epsilon(1e-6));
  auto two_links = two_group_dragonfly(0.25e9);
  two_links.network.dragonfly.group_links = 2;
  CHECK(dragonfly_transfer_s(two_links, 2) == Approx(2.0).epsilon(1e-6));
  // Without the field the global links run at link_bandwidth_Bps like every other level.
  CHECK(dragonfly_transfer_s(two_group_dragonfly(0), 2) == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("sim::World: a dragonfly is built with only the groups the job needs; routes are unchanged", "[sim]") {
  // Five groups declared, four nodes placed: groups 0 and 1 are built, joined by one global link
  // (split-duplex: an up and a down link; all five groups would have ten pairs, twenty links).
  auto five = two_group_dragonfly(0.25e9);
  five.network.dragonfly.groups = 5;
  five.nodes = 10;
  const auto global_links = [](World&) {
    return static_cast<double>(simgrid::s4u::Engine::get_instance()
                                   ->get_filtered_links([](simgrid::s4u::Link* l) {
                                     return l->get_name().rfind("blue_link_between_group_", 0) == 0;
                                   })
                                   .size());
  };
  CHECK(in_world(five, {4, 1, 0}, global_links) == 2);
  CHECK(dragonfly_transfer_s(five, 2) == Approx(4.0).epsilon(1e-6));  // still across the global link
  CHECK(dragonfly_transfer_s(five, 1) == Approx(1.0).epsilon(1e-6));
  // A job inside one group builds no global link at all.
  CHECK(in_world(five, {2, 1, 0}, global_links) == 0);
}

TEST_CASE("sim::World: impossible layouts are input errors", "[sim]") {
  auto p = test_platforms::uniform_star(4, 1e9, 1e-6);
  CHECK_THROWS_AS(in_world(p, {5, 1, 0}, [](World&) { return 0.0; }), InputError);
  p.network.link_bandwidth_Bps = -1;
  CHECK_THROWS_AS(in_world(p, {2, 1, 0}, [](World&) { return 0.0; }), InputError);
}

TEST_CASE("sim::World: coarse ring reuses the duration of an identical ring that ran alone", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  const double flows = in_world(p, {16, 4, 0}, [](World& w) {
    std::vector<int> ranks(64);
    for (int i = 0; i < 64; ++i) ranks[i] = i;
    std::vector<double> durations;
    // Three identical rings back to back, then one with a competing flow in flight.
    std::function<void(int)> next = [&](int k) {
      const double t0 = w.now();
      if (k == 3) w.transfer(w.worker_host(0), w.worker_host(63), 50e6, []() {});
      if (k == 4) return;
      start_collective(w, *collective_or_null("allreduce", "ring"), ranks, 25e6, CommMode::COARSE, [&, k, t0]() {
        durations.push_back(w.now() - t0);
        next(k + 1);
      });
    };
    next(0);
    w.run();
    REQUIRE(durations.size() == 4);
    CHECK(durations[1] == Approx(durations[0]));
    CHECK(durations[2] == Approx(durations[0]));
    CHECK(durations[3] > durations[0] * 1.01);  // the competing flow is simulated, not reused away
    return static_cast<double>(w.flows_started());
  });
  CHECK(flows == 64 + 1 + 64);  // first ring, the competing flow, the last ring
}
