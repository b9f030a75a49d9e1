// Parameter servers at scale: coarse PS traffic agrees with per-layer traffic, and 512 / 1,024 workers
// with many servers simulate without SimGrid's max-min abort (flows weighted alike, latency paid
// outside the solver: docs/simgrid-notes.md).
#include <catch2/catch.hpp>

#include <string>

#include "sim/comm.hpp"
#include "sim/training.hpp"

using namespace dtsim;

namespace {

constexpr double NIC_BPS = 10e9;
constexpr double HOP_LATENCY_S = 1e-7;  // Aries-like per-hop latency: the abort needed 1 / latency weights
constexpr double LAYER_FWD_S = 1e-3, LAYER_BWD_S = 2e-3;

platforms::Platform fat_tree(int nodes) {
  platforms::Platform p;
  p.name = "test-fat-tree";
  p.file = "test-fat-tree.yaml";
  p.nodes = nodes;
  p.node.cpu = "test-cpu";
  p.node.gpus = 1;
  p.node.gpu = "test-gpu";
  p.node.intra.kind = platforms::IntraNodeKind::PCIE;
  p.node.intra.link_bandwidth_Bps = 16e9;
  p.node.intra.latency_s = 1e-6;
  p.network.technology = "test network";
  p.network.topology = platforms::TopologyKind::FAT_TREE;
  p.network.fat_tree.levels = 2;
  p.network.fat_tree.down = {32, nodes / 32 > 0 ? nodes / 32 : 1};
  p.network.fat_tree.up = {1, 32};  // full bisection
  p.network.fat_tree.parallel = {1, 1};
  p.network.link_bandwidth_Bps = NIC_BPS;
  p.network.latency_s = HOP_LATENCY_S;
  p.network.protocol_efficiency = 1.0;
  return p;
}

// Layers of unequal gradient sizes (a few large, many small), as in convolutional networks.
calibrate::ComputeProfile profile(int layers) {
  calibrate::ComputeProfile prof;
  prof.model = "mixed";
  prof.device = "test-device";
  prof.batch = 32;
  for (int i = 0; i < layers; ++i) {
    calibrate::LayerTime l;
    l.name = "layer" + std::to_string(i);
    l.op = "conv2d";
    l.fwd_s = LAYER_FWD_S;
    l.bwd_data_s = LAYER_BWD_S / 2;
    l.bwd_weights_s = LAYER_BWD_S / 2;
    l.grad_bytes = (i % 8 == 7 ? 8'000'000 : 200'000);
    prof.layers.push_back(l);
  }
  prof.update_s = 1e-3;
  return prof;
}

sim::TrainingPoint point(const std::string& strategy, int workers, int servers, sim::CommMode mode, int iterations) {
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name(strategy);
  p.workers = workers;
  p.ps_servers = servers;
  p.comm_mode = mode;
  p.iterations = iterations;
  return p;
}

}  // namespace

TEST_CASE("sim::PsExchange: coarse traffic agrees with per-layer traffic within 3%", "[sim][ps]") {
  const auto plat = fat_tree(64);
  const auto prof = profile(48);
  for (const char* strategy : {"ps", "ps-async"}) {
    for (int servers : {1, 4, 16}) {
      INFO(strategy << " servers=" << servers);
      const auto fine = sim::simulate_training(plat, prof, point(strategy, 32, servers, sim::CommMode::FINE, 3));
      const auto coarse = sim::simulate_training(plat, prof, point(strategy, 32, servers, sim::CommMode::COARSE, 3));
      CHECK(coarse.throughput == Approx(fine.throughput).epsilon(0.03));
      CHECK(coarse.inter_node_bytes == Approx(fine.inter_node_bytes).epsilon(1e-9));
      // Merging saves flows where a group spans several layers of one server; with 16 servers and
      // 48 layers each layer sits alone on its server and the counts are equal.
      CHECK(coarse.flows <= fine.flows);
      if (servers <= 4) CHECK(coarse.flows < fine.flows);
    }
  }
}

TEST_CASE("sim::PsExchange: coarse pushes are bounded per worker-server pair", "[sim][ps]") {
  const auto plat = fat_tree(64);
  const auto prof = profile(96);
  const auto r = sim::simulate_training(plat, prof, point("ps", 16, 4, sim::CommMode::COARSE, 1));
  // Per worker and iteration: at most one pull per server and 8 push groups per server.
  CHECK(r.flows <= 16 * 4 * (1 + 8));
  const auto fine = sim::simulate_training(plat, prof, point("ps", 16, 4, sim::CommMode::FINE, 1));
  CHECK(fine.flows == 16 * (4 + 96));
}

TEST_CASE("sim::PsExchange: 512 and 1024 workers with many servers do not abort", "[.][sim][ps-scale]") {
  const auto plat = fat_tree(1024);
  const auto prof = profile(16);
  for (const char* strategy : {"ps", "ps-async", "ps-replicated"}) {
    for (int workers : {512, 1024}) {
      for (int servers : {16, 64}) {
        INFO(strategy << " workers=" << workers << " servers=" << servers);
        const auto r = sim::simulate_training(plat, prof, point(strategy, workers, servers, sim::CommMode::AUTO, 1));
        CHECK(r.throughput > 0);
        CHECK(r.ps_servers == servers);
      }
    }
  }
}
