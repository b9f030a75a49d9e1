// Tests of transports in the simulation (sim/src/transport.hpp, World::transfer): closed forms of the
// factor bands, the TCP per-connection cap, the host-staged pipeline, and the ideal transport.
#include <catch2/catch.hpp>

#include <string>

#include "common/child.hpp"
#include "platforms/transport.hpp"
#include "sim/src/world.hpp"
#include "tests/sim/comm_test_platforms.hpp"
#include "tests/sim/world_test_support.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using dtsim::test_platforms::in_world;

namespace {
// One flow of `bytes` from a to b on an idle world; returns its duration.
double one_flow(World& w, simgrid::s4u::Host* a, simgrid::s4u::Host* b, double bytes) {
  double end = -1;
  w.transfer(a, b, bytes, [&]() { end = w.now(); });
  w.run();
  return end;
}
}  // namespace

TEST_CASE("sim::Transport: a flow follows its transport's band (latency x factor, bandwidth x scale)", "[sim]") {
  const double bw = 10e9, lat = 2e-6, eff = 0.9;
  auto p = test_platforms::uniform_star(2, bw, lat);
  p.network.transport = "rdma";
  p.network.protocol_efficiency = eff;
  const auto& rdma = platforms::transport_by_name("rdma");
  for (double bytes : {100.0, 4096.0, 65536.0, 1e6, 64e6}) {
    const double t = in_world(p, {2, 1, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
    const double route_lat = 2 * lat;  // two switch ports, no NIC overhead
    INFO(bytes << " B");
    CHECK(t == Approx(rdma.latency_factor(bytes) * route_lat + bytes / (bw * rdma.bandwidth_factor(bytes, eff)))
                   .epsilon(1e-9));
  }
}

TEST_CASE("sim::Transport: large messages reach the protocol efficiency", "[sim]") {
  auto p = test_platforms::uniform_star(2, 10e9, 1e-6);
  p.network.transport = "tcp";
  p.network.connections_per_peer = 8;  // the cap (8 x 3.1 GB/s) stays above the link
  p.network.protocol_efficiency = 0.94;
  const double bytes = 1e9;
  const double t = in_world(p, {2, 1, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
  CHECK(bytes / t == Approx(0.94 * 10e9).epsilon(1e-4));
}

TEST_CASE("sim::Transport: a TCP connection never exceeds its cap", "[sim]") {
  const auto& tcp = platforms::transport_by_name("tcp");
  const double link_Bps = 12.5e9;  // faster than one connection
  for (int conns : {1, 2}) {
    auto p = test_platforms::uniform_star(3, link_Bps, 0);
    p.network.transport = "tcp";
    p.network.connections_per_peer = conns;
    const double cap = conns * tcp.connection_rate_Bps;
    REQUIRE(cap < link_Bps);
    const double bytes = 1e9;
    const double t = in_world(p, {3, 1, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
    INFO(conns << " connection(s)");
    CHECK(bytes / t == Approx(cap).epsilon(1e-9));
    // Two flows from one node to two others: each runs at its cap, which is its own limit (one core's
    // copy), not a share of the NIC: the NIC has room for both.
    const double t2 = in_world(p, {3, 1, 0}, [&](World& w) {
      double end = 0;
      for (int dst : {1, 2}) w.transfer(w.node_host(0), w.node_host(dst), bytes, [&]() { end = w.now(); });
      w.run();
      return end;
    });
    REQUIRE(2 * cap <= link_Bps);
    CHECK(bytes / t2 == Approx(cap).epsilon(1e-9));
  }
  // Four connections into one 12.5 GB/s NIC at half protocol efficiency: 4 x 3.1 GB/s of caps against
  // 6.25 GB/s of NIC, so the NIC is shared (each 1.56 GB/s); one or two connections run at their cap.
  // (Before the cap was a bound, SimGrid charged a capped flow rate / factor on its links: two flows
  // into the NIC got half a cap each.)
  auto p = test_platforms::uniform_star(5, link_Bps, 0);
  p.network.transport = "tcp";
  p.network.connections_per_peer = 1;
  p.network.protocol_efficiency = 0.5;
  for (int n : {1, 2, 4}) {
    const double t = in_world(p, {5, 1, 0}, [&](World& w) {
      double end = 0;
      for (int s = 1; s <= n; ++s) w.transfer(w.node_host(s), w.node_host(0), 1e9, [&]() { end = std::max(end, w.now()); });
      w.run();
      return end;
    });
    INFO(n << " connections into one NIC");
    CHECK(1e9 / t == Approx(std::min(tcp.connection_rate_Bps, 0.5 * link_Bps / n)).epsilon(1e-9));
  }
  // Inside a node no socket is involved.
  auto node = test_platforms::uniform_star(1, 1e9, 0);
  node.network.transport = "tcp";
  const double t = in_world(node, {1, 1, 0}, [&](World& w) { return one_flow(w, w.worker_host(0), w.node_host(0), 1e9); });
  CHECK(1e9 / t > tcp.connection_rate_Bps);
}

TEST_CASE("sim::Transport: a host-staged GPU transfer equals the pipelined sum of its copies", "[sim]") {
  auto p = test_platforms::gpu_fat_tree(8, 2);  // PCIe 16 GB/s, 1 us; network 12.5 GB/s, 1 us per hop
  p.network.transport = "rdma-host-staged";
  p.network.protocol_efficiency = 0.9;
  const auto& staged = platforms::transport_by_name("rdma-host-staged");
  const double bytes = 64 * staged.chunk_B;  // in the last band: factor 1 on the wire
  const double t = in_world(p, {8, 2, 0}, [&](World& w) {
    return one_flow(w, w.worker_host(0), w.worker_host(2), bytes) - w.route_latency_s(w.worker_host(0), w.worker_host(2)) *
                                                                        staged.latency_factor(bytes);
  });
  // World::message_latency_s is the part paid before bandwidth: route latency x factor + fill.
  const double before_bw = in_world(p, {8, 2, 0}, [&](World& w) {
    const double full = one_flow(w, w.worker_host(0), w.worker_host(2), bytes);
    return full - w.message_latency_s(w.worker_host(0), w.worker_host(2), bytes);
  });
  const double c = staged.chunk_B;
  const double copy_s = 1e-6 + c / 16e9, wire_s = c / (12.5e9 * 0.9);
  const double pipelined = 2 * copy_s + wire_s + (64 - 1) * std::max(copy_s, wire_s);
  CHECK(t == Approx(pipelined).epsilon(1e-9));
  CHECK(before_bw == Approx(64 * std::max(copy_s, wire_s)).epsilon(1e-9));  // n chunks at the slowest stage
  // From host memory there is nothing to stage: plain RDMA.
  auto rdma = p;
  rdma.network.transport = "rdma";
  const double host_staged = in_world(p, {8, 2, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
  const double host_rdma = in_world(rdma, {8, 2, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
  CHECK(host_staged == Approx(host_rdma).epsilon(1e-12));
}

TEST_CASE("sim::Transport: the ideal transport is dtsim without transports", "[sim]") {
  auto p = test_platforms::uniform_star(2, 1e9, 3e-6);
  p.network.protocol_efficiency = 0.5;
  REQUIRE(p.network.transport == "ideal");  // platforms built in code default to ideal
  for (double bytes : {1.0, 1e6}) {
    const double t = in_world(p, {2, 1, 0}, [&](World& w) { return one_flow(w, w.node_host(0), w.node_host(1), bytes); });
    CHECK(t == Approx(2 * 3e-6 + bytes / 0.5e9).epsilon(1e-12));
  }
}

TEST_CASE("sim::Platform builder: a CPU rank reaches the NIC without crossing the shared-memory link", "[sim]") {
  auto p = test_platforms::uniform_star(2, 10e9, 0);
  p.node.intra.link_bandwidth_Bps = 5e9;  // slower than the NIC: it must not cap inter-node flows
  const double bytes = 1e9;
  const double inter = in_world(p, {2, 2, 0}, [&](World& w) { return one_flow(w, w.worker_host(0), w.worker_host(2), bytes); });
  CHECK(bytes / inter == Approx(10e9).epsilon(1e-9));
  const double intra = in_world(p, {2, 2, 0}, [&](World& w) { return one_flow(w, w.worker_host(0), w.worker_host(1), bytes); });
  CHECK(bytes / intra == Approx(5e9).epsilon(1e-9));
}

namespace {
// 4 GPUs per node, 2 per PCIe switch, switch 0 under CPU socket 0 and switch 1 under socket 1; pcie transport.
platforms::Platform two_socket_pcie() {
  auto p = test_platforms::gpu_fat_tree(4, 4);  // PCIe 16 GB/s links and uplinks, 1 us
  p.node.cpu_sockets = 2;
  p.node.intra.transport = "pcie";
  return p;
}
}  // namespace

TEST_CASE("sim::Transport: a PCIe flow never exceeds its DMA band", "[sim]") {
  const auto& pcie = platforms::transport_by_name("pcie");
  auto p = two_socket_pcie();
  p.network.protocol_efficiency = 0.5;  // the network's efficiency does not apply inside the node
  const double bytes = 1e9;
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 2}, std::pair{3, 0}}) {
    const double rate = in_world(p, {1, 4, 0}, [&](World& w) {
      const double t = one_flow(w, w.worker_host(a), w.worker_host(b), bytes);
      return bytes / (t - w.message_latency_s(w.worker_host(a), w.worker_host(b), bytes));
    });
    INFO(a << " -> " << b);
    CHECK(rate <= 16e9 * pcie.link_efficiency * (1 + 1e-9));
  }
  // Peer to peer under one switch runs exactly at the band.
  const double t = in_world(p, {1, 4, 0}, [&](World& w) { return one_flow(w, w.worker_host(0), w.worker_host(1), bytes); });
  CHECK(t == Approx(1e-6 + bytes / (16e9 * pcie.link_efficiency)).epsilon(1e-9));
}

TEST_CASE("sim::Transport: GPUs on different sockets stage through host memory, the pipelined sum of its copies",
          "[sim]") {
  const auto& pcie = platforms::transport_by_name("pcie");
  auto p = two_socket_pcie();
  const double bytes = 64 * pcie.chunk_B;
  const double c = pcie.chunk_B;
  const double copy_Bps = 16e9 * pcie.link_efficiency, host_Bps = 16e9 * pcie.host_staging_efficiency;
  const double copy_s = 1e-6 + c / copy_Bps, host_s = c / host_Bps;
  const double slowest = std::max(copy_s, host_s);
  const double pipelined = 2 * copy_s + host_s + (64 - 1) * slowest;  // D2H, host hop, H2D; n chunks
  const double t = in_world(p, {1, 4, 0}, [&](World& w) {
    return one_flow(w, w.worker_host(1), w.worker_host(2), bytes) - w.route_latency_s(w.worker_host(1), w.worker_host(2));
  });
  CHECK(t == Approx(pipelined).epsilon(1e-9));
  // Two flows staged through one socket's memory share its host path (both land on socket 1).
  const double shared = in_world(p, {1, 4, 0}, [&](World& w) {
    double end = 0;
    w.transfer(w.worker_host(0), w.worker_host(2), bytes, [&]() { end = std::max(end, w.now()); });
    w.transfer(w.worker_host(1), w.worker_host(3), bytes, [&]() { end = std::max(end, w.now()); });
    w.run();
    return end - w.message_latency_s(w.worker_host(0), w.worker_host(2), bytes);
  });
  CHECK(shared == Approx(bytes / (host_Bps / 2)).epsilon(1e-9));
  // With P2P across sockets, or one socket, there is no staging: the plain DMA band.
  auto p2p = p;
  p2p.node.intra.p2p_level = platforms::P2pLevel::SYSTEM;
  auto one_socket = p;
  one_socket.node.cpu_sockets = 1;
  for (const auto& q : {p2p, one_socket}) {
    const double direct = in_world(q, {1, 4, 0}, [&](World& w) {
      return one_flow(w, w.worker_host(1), w.worker_host(2), bytes) - w.route_latency_s(w.worker_host(1), w.worker_host(2));
    });
    CHECK(direct == Approx(bytes / copy_Bps).epsilon(1e-9));
  }
  // One socket at p2p_level pxb (NCCL 2.7 on Intel before Skylake-SP): GPUs under different switches
  // stage through that socket's host memory, the same pipelined sum; GPUs under one switch stay direct.
  auto pxb = one_socket;
  pxb.node.intra.p2p_level = platforms::P2pLevel::SWITCH;
  const double via_host = in_world(pxb, {1, 4, 0}, [&](World& w) {
    return one_flow(w, w.worker_host(1), w.worker_host(2), bytes) - w.route_latency_s(w.worker_host(1), w.worker_host(2));
  });
  CHECK(via_host == Approx(pipelined).epsilon(1e-9));
  const double under_switch = in_world(pxb, {1, 4, 0}, [&](World& w) {
    return one_flow(w, w.worker_host(2), w.worker_host(3), bytes) - w.route_latency_s(w.worker_host(2), w.worker_host(3));
  });
  CHECK(under_switch == Approx(bytes / copy_Bps).epsilon(1e-9));
  // The ideal intra transport (platforms built in code) keeps the old route and rate.
  auto ideal = p;
  ideal.node.intra.transport = "ideal";
  const double plain = in_world(ideal, {1, 4, 0}, [&](World& w) {
    return one_flow(w, w.worker_host(1), w.worker_host(2), bytes) - w.route_latency_s(w.worker_host(1), w.worker_host(2));
  });
  CHECK(plain == Approx(bytes / 16e9).epsilon(1e-9));
}

TEST_CASE("sim::Transport: without GPUDirect RDMA a node's GPU bytes to and from the NIC share its host path",
          "[sim]") {
  const auto& pcie = platforms::transport_by_name("pcie");
  const auto& rdma = platforms::transport_by_name("rdma");
  auto p = test_platforms::gpu_fat_tree(4, 2);  // PCIe 16 GB/s device links, 1 us; one socket
  p.node.intra.transport = "pcie";
  p.network.transport = "rdma";
  p.network.link_bandwidth_Bps = 100e9;  // the wire is never the bottleneck here
  const double bytes = 1e9, f = rdma.bandwidth_factor(bytes, p.network.protocol_efficiency);
  const double host_Bps = 16e9 * pcie.nic_host_efficiency;
  REQUIRE(host_Bps < 16e9);
  auto one_way = [&](const platforms::Platform& q) {
    return in_world(q, {2, 1, 0}, [&](World& w) {
      return one_flow(w, w.worker_host(0), w.worker_host(1), bytes) -
             w.message_latency_s(w.worker_host(0), w.worker_host(1), bytes);
    });
  };
  // Alone, a flow runs at the host path (the slowest link of its route).
  CHECK(one_way(p) == Approx(bytes / (f * host_Bps)).epsilon(1e-9));
  // Sending and receiving at once (a two-rank ring), each direction gets half of it: the nccl-tests
  // figures the path was taken from (nccl #243, #465: 5.7-6 GB/s each way on 100 Gb/s InfiniBand).
  auto exchange = [&](const platforms::Platform& q, int a, int b) {
    return in_world(q, {2, 2, 0}, [&](World& w) {
      double end = 0;
      w.transfer(w.worker_host(a), w.worker_host(2 + b), bytes, [&]() { end = std::max(end, w.now()); });
      w.transfer(w.worker_host(2 + a), w.worker_host(b), bytes, [&]() { end = std::max(end, w.now()); });
      w.run();
      return end - w.message_latency_s(w.worker_host(0), w.worker_host(2), bytes);
    });
  };
  CHECK(exchange(p, 0, 0) == Approx(bytes / (f * host_Bps / 2)).epsilon(1e-9));
  // Different GPUs of the node sending and receiving share it too (one path per NIC).
  CHECK(exchange(p, 0, 1) == Approx(bytes / (f * host_Bps / 2)).epsilon(1e-9));
  // GPUDirect RDMA keeps the device link; a host-staged network transport models its copies instead.
  auto gdr = p;
  gdr.node.intra.gpudirect_rdma = true;
  CHECK(one_way(gdr) == Approx(bytes / (f * 16e9)).epsilon(1e-9));
  CHECK(!gdr.gpu_nic_via_host_memory());
  CHECK(p.gpu_nic_via_host_memory());
  auto staged = p;
  staged.network.transport = "rdma-host-staged";
  CHECK(!staged.gpu_nic_via_host_memory());
  auto ideal = p;
  ideal.node.intra.transport = "ideal";
  CHECK(!ideal.gpu_nic_via_host_memory());
}

