// Tests of the simulated World (sim/src/world.hpp): platform building, just-in-time activities and the
// ring allreduce against its closed form. Each simulation runs in a child process (one engine each).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <string>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/platform_builder.hpp"
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

TEST_CASE("sim::World: weighted folds share a link as the flows they stand for", "[sim]") {
  // Node 3 folds onto node 2 (its port carries 2x). Node 1 sends 1 GB and node 2 two nodes' 2 GB into
  // node 0's 1 GB/s port: as three flows, all end at 3 s. Unweighted, the representative counts as one
  // flow and node 1's ends at 2 s.
  auto p = test_platforms::uniform_star(4, 1e9, 0);
  const auto ends = [&p](bool weighted, bool of_single) {
    return in_world(p, {4, 1, 0}, [weighted, of_single](World& w) {
      if (w.fold_nodes({{2, 3}}, {w.worker_host(0)}) != 2) return -1.0;
      w.set_weighted_folds(weighted);
      double single = 0, rep = 0;
      w.transfer(w.worker_host(1), w.worker_host(0), 1e9, [&]() { single = w.now(); });
      w.transfer(w.worker_host(2), w.worker_host(0), 2e9, [&]() { rep = w.now(); });
      w.run();
      return of_single ? single : rep;
    });
  };
  CHECK(ends(true, true) == Approx(3.0).epsilon(1e-6));
  CHECK(ends(true, false) == Approx(3.0).epsilon(1e-6));
  CHECK(ends(false, true) == Approx(2.0).epsilon(1e-6));
  CHECK(ends(false, false) == Approx(3.0).epsilon(1e-6));
}

TEST_CASE("sim::World: computations are timers sharing their device max-min with its loads", "[sim]") {
  auto p = test_platforms::uniform_star(2, 1e9, 1e-6);
  // In sequence: 2 s then 0.25 s; another device computes meanwhile without slowing it.
  const double t = in_world(p, {2, 1, 0}, [](World& w) {
    double end = -1;
    w.compute(0, 2.0, [&]() { w.compute(0, 0.25, [&]() { end = w.now(); }); });
    w.compute(1, 1.0, [] {});
    w.run();
    CHECK(w.activities_started() == 3);
    CHECK(w.flows_started() == 0);
    return end;
  });
  CHECK(t == Approx(2.25).epsilon(1e-12));
  // Two at once on one device: half its speed each until the shorter ends (1 s of work each at 0.5,
  // then the longer's last 1 s alone): 2 s and 3 s.
  const auto end_of = [&](int which) {
    return in_world(p, {2, 1, 0}, [=](World& w) {
      double ends[2] = {-1, -1};
      w.compute(0, 1.0, [&]() { ends[0] = w.now(); });
      w.compute(0, 2.0, [&]() { ends[1] = w.now(); });
      w.run();
      return ends[which];
    });
  };
  CHECK(end_of(0) == Approx(2.0).epsilon(1e-12));
  CHECK(end_of(1) == Approx(3.0).epsilon(1e-12));
  // A load of 0.25 from 0 to 1 s: 0.75 s of a 2 s computation done by then, the rest at full speed,
  // so it ends at 2.25 s. A load of 0.7 is above the fair half: the computation gets 0.5 (max-min).
  const auto loaded = [&](double share) {
    return in_world(p, {2, 1, 0}, [=](World& w) {
      double end = -1;
      const std::int64_t load = w.start_load(0, share);
      w.after(1.0, [&w, load] { w.stop_load(load); });
      w.compute(0, 2.0, [&]() { end = w.now(); });
      w.run();
      return end;
    });
  };
  CHECK(loaded(0.25) == Approx(2.25).epsilon(1e-12));
  CHECK(loaded(0.7) == Approx(2.5).epsilon(1e-12));
  // A load started and stopped in one instant (a collective with nothing to move) slows nothing.
  const double instant = in_world(p, {2, 1, 0}, [](World& w) {
    double end = -1;
    w.compute(0, 1.0, [&]() { end = w.now(); });
    w.after(0.5, [&w] { w.stop_load(w.start_load(0, 0.5)); });
    w.run();
    return end;
  });
  CHECK(instant == Approx(1.0).epsilon(1e-12));
  // A load never stopped is an internal error at the end of the run, not a hang.
  const int unstopped = in_world(p, {2, 1, 0}, [](World& w) {
    w.start_load(1, 0.5);
    w.compute(1, 1.0, [] {});
    try {
      w.run();
    } catch (const Failure&) {
      return 1;
    }
    return 0;
  });
  CHECK(unstopped == 1);
}

TEST_CASE("sim::World: a message within its route's bandwidth-delay product skips the solver at its share", "[sim]") {
  // Star of 1 GB/s ports, 1 us each: a route of two ports has 2 us latency, so 2,000 bytes in flight.
  auto p = test_platforms::uniform_star(3, 1e9, 1e-6);
  const double lat = 2e-6, bw = 1e9;
  const auto send = [&](bool bypass, double bytes, bool busy) {
    return in_world(p, {3, 1, 0}, [=](World& w) {
      w.set_latency_bound_bypass(bypass);
      double end = -1;
      if (busy) w.transfer(w.worker_host(2), w.worker_host(0), 1e9, [] {});  // holds node 0's port for ~1 s
      w.after(0.1, [&]() { w.transfer(w.worker_host(1), w.worker_host(0), bytes, [&]() { end = w.now() - 0.1; }); });
      w.run();
      CHECK(w.latency_bound_flows() == (bypass && bytes <= lat * bw ? 1 : 0));
      return end;
    });
  };
  CHECK(send(true, 1000, false) == Approx(lat + 1000 / bw).epsilon(1e-9));
  CHECK(send(true, 1000, true) == Approx(lat + 1000 / (bw / 2)).epsilon(1e-9));  // shares the port with one flow
  CHECK(send(true, 3000, false) == Approx(lat + 3000 / bw).epsilon(1e-6));       // above it: an ordinary flow
  CHECK(send(false, 1000, true) == Approx(lat + 1000 / (bw / 2)).epsilon(1e-6));  // off: the solver's share
}

TEST_CASE("sim::World: a latency-bound message counts a folded flow as the nodes' flows it stands for", "[sim]") {
  // Star of 1 GB/s ports, 1 us each; node 3 folds onto node 2. Unfolded, nodes 2 and 3 would each hold
  // node 0's port with a flow, so a small message into node 0 gets a third of it; folded, node 2's one
  // flow (two nodes' bytes) must count twice. Likewise the representative's own small message stands
  // for two, each with a third of the port beside node 1's flow.
  auto p = test_platforms::uniform_star(4, 1e9, 1e-6);
  const double lat = 2e-6, bw = 1e9, node_B = 1000;
  const auto message_s = [&](bool weighted, int busy_src, int msg_src) {
    return in_world(p, {4, 1, 0}, [=](World& w) {
      if (w.fold_nodes({{2, 3}}, {w.worker_host(0)}) != 2) return -1.0;
      w.set_weighted_folds(weighted);
      w.set_latency_bound_bypass(true);
      const double busy_B = busy_src == 2 ? 2e9 : 1e9;  // a representative's flow carries both nodes' bytes
      w.transfer(w.worker_host(busy_src), w.worker_host(0), busy_B, [] {});
      double end = -1;
      const double msg_B = msg_src == 2 ? 2 * node_B : node_B;
      w.after(0.1, [&]() { w.transfer(w.worker_host(msg_src), w.worker_host(0), msg_B, [&]() { end = w.now() - 0.1; }); });
      w.run();
      CHECK(w.latency_bound_flows() == 1);
      return end;
    });
  };
  for (bool weighted : {false, true}) {
    INFO("weighted folds: " << weighted);
    CHECK(message_s(weighted, 2, 1) == Approx(lat + node_B / (bw / 3)).epsilon(1e-9));
    CHECK(message_s(weighted, 1, 2) == Approx(lat + node_B / (bw / 3)).epsilon(1e-9));
  }
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

TEST_CASE("sim::World: every host of every topology is sealed once", "[sim]") {
  // The topology is built out of the root's reach (build_platform), where SimGrid's zone seal finds no
  // hosts: the builder seals the node zones' hosts itself. A host sealed twice fires on_creation twice.
  static int sealed = 0;
  static bool registered = false;
  if (!registered) simgrid::s4u::Host::on_creation_cb([](simgrid::s4u::Host&) { ++sealed; });
  registered = true;
  const auto sealed_per_host = [](World&) {
    return static_cast<double>(sealed) / static_cast<double>(simgrid::s4u::Engine::get_instance()->get_host_count());
  };
  auto five = two_group_dragonfly(0.25e9);
  five.network.dragonfly.groups = 5;
  five.nodes = 10;
  auto torus = test_platforms::uniform_star(8, 1e9, 1e-6);
  torus.network.topology = platforms::TopologyKind::TORUS;
  torus.network.torus.dims = {2, 4};
  CHECK(in_world(test_platforms::uniform_star(4, 1e9, 1e-6), {4, 1, 0}, sealed_per_host) == 1.0);
  CHECK(in_world(test_platforms::gpu_fat_tree(4, 4), {4, 4, 0}, sealed_per_host) == 1.0);
  CHECK(in_world(five, {3, 1, 0}, sealed_per_host) == 1.0);  // with a spare leaf in the zone
  CHECK(in_world(torus, {6, 1, 0}, sealed_per_host) == 1.0);
}

TEST_CASE("sim::World: a dragonfly job over more groups than routers per chassis is an input error", "[sim]") {
  // SimGrid's dragonfly leaves a group through the router whose index in its chassis is the target group:
  // with 2 routers per chassis, 3 groups would read past its link table (a crash, not a number).
  auto five = two_group_dragonfly(0.25e9);
  five.network.dragonfly.groups = 5;
  five.nodes = 10;
  CHECK(in_world(five, {4, 1, 0}, [](World&) { return 1.0; }) == 1.0);  // 2 groups of 2 nodes
  CHECK_THROWS_WITH(in_world(five, {6, 1, 0}, [](World&) { return 0.0; }),
                    Catch::Contains("network.dragonfly") && Catch::Contains("routers_per_chassis (2)"));
  CHECK_THROWS_AS(in_world(five, {6, 1, 0}, [](World&) { return 0.0; }), InputError);
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

TEST_CASE("sim::World: a reused coarse ring charges its links the bytes the ring it reuses moved", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  // Two identical rings back to back: the second is a reuse (no flows), yet every link's meter must
  // count it, and only the flows' part is what flow_link_bytes reports.
  const double ratio = in_world(p, {16, 4, 0}, [](World& w) {
    std::vector<int> ranks(64);
    for (int i = 0; i < 64; ++i) ranks[i] = i;
    const auto& ring = *collective_or_null("allreduce", "ring");
    start_collective(w, ring, ranks, 25e6, CommMode::COARSE, [&]() {
      start_collective(w, ring, ranks, 25e6, CommMode::COARSE, []() {});
    });
    w.run();
    if (w.flows_started() != 64) return -1.0;  // the second ring was not reused
    const auto all = w.link_bytes(), flows = w.flow_link_bytes();
    double lo = 1e300, hi = 0;
    for (std::size_t id = 0; id < all.size(); ++id)
      if (flows[id] > 0) {
        lo = std::min(lo, all[id] / flows[id]);
        hi = std::max(hi, all[id] / flows[id]);
      }
    return hi - lo < 1e-9 ? lo : -2.0;  // the same factor on every link
  });
  CHECK(ratio == Approx(2.0));
}

namespace {
// Bytes a world's link meter measured on the link named `name` (0 when the link carried nothing).
double measured_bytes(World& w, const std::string& name) {
  const auto bytes = w.link_bytes();
  for (int id = 0; id < w.links_used(); ++id)
    if (w.link_name(id) == name) return bytes[static_cast<std::size_t>(id)];
  return 0;
}
}  // namespace

TEST_CASE("sim::World: the link meter gives the bytes each link carried, in flight too", "[sim]") {
  auto p = test_platforms::uniform_star(3, 1e9, 0);
  // Two 1e9 B flows into node 0 share its port for 2 s: node 0's receiving NIC carries 2e9 B, each
  // sender's NIC 1e9 B; a flow started later, after an idle second, adds its bytes only.
  const double node0_in = in_world(p, {3, 1, 0}, [](World& w) {
    for (int src : {1, 2}) w.transfer(w.worker_host(src), w.worker_host(0), 1e9, [] {});
    w.after(3.0, [&w] { w.transfer(w.worker_host(1), w.worker_host(0), 0.5e9, [] {}); });
    w.run();
    return measured_bytes(w, "node0-nic_DOWN");
  });
  CHECK(node0_in == Approx(2.5e9).epsilon(1e-9));
  const double node1_out = in_world(p, {3, 1, 0}, [](World& w) {
    for (int src : {1, 2}) w.transfer(w.worker_host(src), w.worker_host(0), 1e9, [] {});
    w.run();
    return measured_bytes(w, "node1-nic_UP") + measured_bytes(w, "node1-nic_DOWN");
  });
  CHECK(node1_out == Approx(1e9).epsilon(1e-9));
  // Read while flows are in flight (as the replay does at its window's ends): the bytes sent so far.
  const double mid = in_world(p, {3, 1, 0}, [](World& w) {
    double at_half = -1;
    for (int src : {1, 2}) w.transfer(w.worker_host(src), w.worker_host(0), 1e9, [] {});
    w.after(0.5, [&] { at_half = measured_bytes(w, "node0-nic_DOWN"); });
    w.run();
    return at_half;
  });
  CHECK(mid == Approx(0.5e9).epsilon(1e-9));
  // The bytes are SimGrid's own charge: at a protocol efficiency of 0.5 (bandwidth factor 0.5) the
  // link carries twice the payload, as its usage over time (the trace's recorded changes) integrates to.
  auto half = p;
  half.network.transport = "rdma";
  half.network.protocol_efficiency = 0.5;
  const double agree = in_world(half, {3, 1, 0}, [](World& w) {
    w.record_link_usage(true);
    for (int src : {1, 2}) w.transfer(w.worker_host(src), w.worker_host(0), 1e9, [] {});
    w.after(1.5, [&w] { w.transfer(w.worker_host(1), w.worker_host(0), 0.25e9, [] {}); });
    w.run();
    int id = -1;
    for (int l = 0; l < w.links_used(); ++l)
      if (w.link_name(l) == "node0-nic_DOWN") id = l;
    double integral = 0, t = 0, rate = 0;
    for (const auto& c : w.link_usage_changes()) {
      if (c.link != id) continue;
      integral += rate * (c.time_s - t);
      t = c.time_s;
      rate = c.usage_Bps;
    }
    const double bytes = w.link_bytes()[static_cast<std::size_t>(id)];
    return std::abs(bytes - 2 * 2.25e9) < 1e-6 * bytes && std::abs(integral - bytes) < 1e-6 * bytes ? 1.0 : 0.0;
  });
  CHECK(agree == 1.0);
}

TEST_CASE("sim::World: recorded usage changes give each link's rate over time", "[sim]") {
  auto p = test_platforms::uniform_star(3, 1e9, 0);
  // Flow A (1e9 B) alone for 1 s at 1e9 B/s, then B joins: both at 0.5e9 B/s until A ends at 2 s...
  // node 0's receiving NIC runs at 1e9 B/s from 0 until B ends, then drops to 0.
  const double changes_ok = in_world(p, {3, 1, 0}, [](World& w) {
    w.record_link_usage(true);
    w.transfer(w.worker_host(1), w.worker_host(0), 1.5e9, [] {});
    w.after(1.0, [&w] { w.transfer(w.worker_host(2), w.worker_host(0), 1e9, [] {}); });
    w.run();
    int id = -1;
    for (int l = 0; l < w.links_used(); ++l)
      if (w.link_name(l) == "node0-nic_DOWN") id = l;
    std::vector<World::UsageChange> mine;
    for (const auto& c : w.link_usage_changes())
      if (c.link == id) mine.push_back(c);
    // Rate 1e9 from t=0, never changed while both flows share it, 0 at t=2.5 (all 2.5e9 B delivered).
    return mine.size() == 2 && mine[0].time_s == 0 && std::abs(mine[0].usage_Bps - 1e9) < 1 &&
                   std::abs(mine[1].time_s - 2.5) < 1e-9 && mine[1].usage_Bps == 0
               ? 1.0
               : 0.0;
  });
  CHECK(changes_ok == 1.0);
}

TEST_CASE("sim::World: a split node's server and devices send through NICs of their own", "[sim]") {
  // Node 0's server (its node host) sends 1 GB to node 1's device while node 0's device sends 1 GB to
  // node 2's: through one shared 1 GB/s NIC both take 2 s; split, each has its NIC and the node's
  // switch port is twice as wide, so both end at 1 s.
  auto p = test_platforms::uniform_star(3, 1e9, 0);
  const auto last_end = [&p](int split_nodes) {
    return in_world(p, {3, 1, 0, split_nodes}, [](World& w) {
      double end = 0;
      w.transfer(w.node_host(0), w.worker_host(1), 1e9, [&]() { end = std::max(end, w.now()); });
      w.transfer(w.worker_host(0), w.worker_host(2), 1e9, [&]() { end = std::max(end, w.now()); });
      w.run();
      return end;
    });
  };
  CHECK(last_end(0) == Approx(2.0).epsilon(1e-6));
  CHECK(last_end(1) == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("sim::World: flows solved together end when SimGrid's sharing ends them", "[sim]") {
  // 1 GB flows between single-GPU nodes on a 2-level fat tree (4 nodes per leaf, one uplink each): flows
  // of a leaf's nodes to other leaves share its uplink, others only their ports. The last end of the
  // flows solved in closed form against the same flows run by SimGrid, and the bytes each link carried.
  auto p = test_platforms::gpu_fat_tree(16, 1);
  const std::vector<std::pair<int, int>> pairs{{0, 5}, {1, 6}, {2, 3}, {3, 2}, {4, 12}, {5, 0}, {6, 7},
                                               {7, 15}, {8, 9}, {9, 13}, {10, 1}, {12, 4}, {13, 14}, {15, 8}};
  const auto run = [&](bool together, bool of_bytes) {
    return in_world(p, {16, 1, 0}, [&](World& w) {
      std::vector<std::pair<simgrid::s4u::Host*, simgrid::s4u::Host*>> flows;
      for (auto [a, b] : pairs) flows.emplace_back(w.worker_host(a), w.worker_host(b));
      double end = 0;
      w.set_solve_together(true);
      if (together) {
        if (!w.transfer_together(flows, std::vector<int>(flows.size(), 0), 1e9, {[&]() { end = w.now(); }})) return -1.0;
      } else {
        for (auto [a, b] : flows) w.transfer(a, b, 1e9, [&]() { end = std::max(end, w.now()); });
      }
      w.run();
      if (!of_bytes) return end;
      double sum_sq = 0;  // one number that changes if any link's bytes do
      const auto bytes = w.link_bytes();
      for (std::size_t i = 0; i < bytes.size(); ++i) sum_sq += bytes[i] * bytes[i] * static_cast<double>(i + 1);
      return sum_sq;
    });
  };
  const double simgrid_s = run(false, false);
  REQUIRE(simgrid_s > 0);
  // Exact but for the spread of the flows' start latencies (a few microseconds here).
  CHECK(run(true, false) == Approx(simgrid_s).epsilon(1e-4));
  CHECK(run(true, true) == Approx(run(false, true)).epsilon(1e-9));
}

TEST_CASE("sim::World: a coarse double binary tree alone on the network is solved together", "[sim]") {
  // 16 single-GPU nodes: 2 trees x 15 edges x 2 directions = 60 flows, none of them a SimGrid activity,
  // ending when the same flows run by SimGrid end.
  auto p = test_platforms::gpu_fat_tree(16, 1);
  const auto run = [&p](bool together, bool of_in_flight) {
    World::allow_solving_together(together);
    const double out = in_world(p, {16, 1, 0}, [of_in_flight](World& w) {
      w.set_solve_together(true);
      std::vector<int> ranks(16);
      for (int r = 0; r < 16; ++r) ranks[static_cast<std::size_t>(r)] = r;
      double end = -1;
      start_collective(w, *collective_or_null("allreduce", "tree"), ranks, 25e6, CommMode::COARSE, [&]() { end = w.now(); });
      const double in_flight = static_cast<double>(w.transfers_in_flight());
      const double started = static_cast<double>(w.flows_started());
      w.run();
      return of_in_flight ? in_flight * 1000 + started : end;
    });
    World::allow_solving_together(true);
    return out;
  };
  CHECK(run(true, true) == 60);            // no flow in flight, 60 counted
  CHECK(run(false, true) == 60 * 1000 + 60);  // SimGrid's: 60 in flight
  CHECK(run(true, false) == Approx(run(false, false)).epsilon(1e-6));
}

TEST_CASE("sim::World: bounded flows, or flows beside one in flight, are not solved together", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(16, 2);
  // Over TCP each connection's cap bounds its flow: left to SimGrid.
  auto tcp = p;
  tcp.network.transport = "tcp";
  const auto solved = [](World& w, bool on = true) {
    w.set_solve_together(on);
    return w.transfer_together({{w.worker_host(0), w.worker_host(2)}}, {0}, 1e9, {[] {}});
  };
  CHECK(in_world(tcp, {16, 2, 0}, [&](World& w) { return solved(w) ? 1.0 : 0.0; }) == 0.0);
  CHECK(in_world(p, {16, 2, 0}, [&](World& w) {
          w.transfer(w.worker_host(4), w.worker_host(6), 1e9, [] {});
          const bool s = solved(w);
          w.run();
          return s ? 1.0 : 0.0;
        }) == 0.0);
  CHECK(in_world(p, {16, 2, 0}, [&](World& w) { return solved(w, false) ? 1.0 : 0.0; }) == 0.0);  // not asked for
  CHECK(in_world(p, {16, 2, 0}, [&](World& w) {
          const bool s = solved(w);
          w.run();
          return s ? 1.0 : 0.0;
        }) == 1.0);
  // A flow over their links while they are in flight breaks the promise set_solve_together made.
  CHECK_THROWS_AS(in_world(p, {16, 2, 0}, [&](World& w) {
                    solved(w);
                    w.transfer(w.worker_host(0), w.worker_host(4), 1e9, [] {});
                    w.run();
                    return 0.0;
                  }),
                  Failure);
}

TEST_CASE("sim::describe_link: names the builder's links in words", "[sim]") {
  CHECK(describe_link("node3-nic-dev_UP").label == "node 3 devices' NIC (sending)");
  CHECK(describe_link("node3-nic-dev_DOWN").kind == "nic");
  CHECK(describe_link("node3-nic_UP").label == "node 3 NIC (sending)");
  CHECK(describe_link("node3-nic_DOWN").kind == "nic");
  CHECK(describe_link("node12-sw1-up_UP").label == "node 12 PCIe switch 1 uplink (to host)");
  CHECK(describe_link("node2-w5-link_DOWN").kind == "device-link");
  CHECK(describe_link("port7_UP").label == "node 7 switch port (sending)");
  CHECK(describe_link("port7_UP").node == 7);
  CHECK(describe_link("backbone").kind == "fabric");
  CHECK(describe_link("cluster_limiter_3").label == "fabric link cluster_limiter_3");
}
