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
  p.ps.servers = servers;
  p.fidelity.comm_mode = mode;
  p.fidelity.iterations = iterations;
  return p;
}

}  // namespace

TEST_CASE("sim::ParameterServer: coarse traffic agrees with per-layer traffic within 3%", "[sim][ps]") {
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

TEST_CASE("sim::ParameterServer: coarse pushes are bounded per worker-server pair", "[sim][ps]") {
  const auto plat = fat_tree(64);
  const auto prof = profile(96);
  const auto r = sim::simulate_training(plat, prof, point("ps", 16, 4, sim::CommMode::COARSE, 1));
  // Per worker and iteration: at most one pull per server and 8 push groups per server.
  CHECK(r.flows <= 16 * 4 * (1 + 8));
  const auto fine = sim::simulate_training(plat, prof, point("ps", 16, 4, sim::CommMode::FINE, 1));
  CHECK(fine.flows == 16 * (4 + 96));
}

TEST_CASE("sim::ParameterServer: 512 and 1024 workers with many servers do not abort", "[.][sim][ps-scale]") {
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

namespace {

// A dragonfly of 4-node routers with room for dedicated servers after the workers.
platforms::Platform dragonfly(int gpus) {
  auto p = fat_tree(64);
  p.name = "test-dragonfly";
  p.node.gpus = gpus;
  p.network.topology = platforms::TopologyKind::DRAGONFLY;
  p.network.dragonfly.groups = 2;
  p.network.dragonfly.chassis_per_group = 2;
  p.network.dragonfly.routers_per_chassis = 8;
  p.network.dragonfly.nodes_per_router = 4;
  p.network.dragonfly.group_links = 4;
  p.network.dragonfly.global_link_bandwidth_Bps = NIC_BPS;
  p.nodes = 128;
  return p;
}

// Asynchronous workers fold only where their own flows would exceed the budget: these tests' 64 workers
// start 4,096 (16 shards, 48 layers) or 1,536 (12 layers) per iteration, their representatives a
// quarter. This budget folds them one router at a time, as synchronous ones fold at any size.
constexpr double ASYNC_ROUTER_FOLD_BUDGET = 1'200;

// Nodes per fold group on the test dragonfly (4-node routers, 64 one-GPU nodes): a router, or for
// asynchronous workers a pair, which keeps 32 groups drifting apart (ASYNC_MIN_PACES in plan/parameter_server.cpp).
int async_aware_fold(const std::string& strategy) { return strategy == "ps-async" ? 2 : 4; }

sim::TrainingPoint dedicated(const std::string& strategy, int workers, int servers, sim::CommMode mode, bool fold) {
  auto p = point(strategy, workers, servers, mode, 3);
  p.ps.placement = sim::PsPlacement::DEDICATED;
  p.fidelity.ps_fold = fold;
  if (strategy == "ps-async") p.fidelity.ps_fold_max_flows = ASYNC_ROUTER_FOLD_BUDGET;
  return p;
}

// A coarse point with colocated servers, simulated folded and with folding off. Split roles (one-device
// nodes) only where asked: without them the switches holding a server stay unfolded.
struct FoldedAndPlain {
  sim::PointResult folded, plain;
};
FoldedAndPlain colocated_folded_and_plain(const platforms::Platform& plat, const calibrate::ComputeProfile& prof,
                                          const std::string& strategy, int workers, int servers,
                                          bool split_roles = false) {
  auto colocated = dedicated(strategy, workers, servers, sim::CommMode::COARSE, true);
  colocated.ps.placement = sim::PsPlacement::COLOCATED;
  colocated.fidelity.ps_split_roles = split_roles;
  auto plain = colocated;
  plain.fidelity.ps_fold = false;
  return {sim::simulate_training(plat, prof, colocated), sim::simulate_training(plat, prof, plain)};
}

}  // namespace

TEST_CASE("sim::ParameterServer: folded workers give the unfolded max-min result", "[sim][ps]") {
  // Every flow on a shared link stands for 4 workers and the representatives' own links carry 4x:
  // the max-min rates are exactly 4x those of one worker, so the timeline is the same.
  const auto prof = profile(48);
  for (const char* strategy : {"ps", "ps-async", "ps-replicated"}) {
    const int gpus = std::string(strategy) == "ps-replicated" ? 2 : 1;
    const auto plat = dragonfly(gpus);
    INFO(strategy);
    const auto folded = sim::simulate_training(plat, prof, dedicated(strategy, 64, 16, sim::CommMode::COARSE, true));
    const auto plain = sim::simulate_training(plat, prof, dedicated(strategy, 64, 16, sim::CommMode::COARSE, false));
    CHECK(folded.throughput == Approx(plain.throughput).epsilon(1e-6));
    CHECK(folded.iteration_time_s == Approx(plain.iteration_time_s).epsilon(1e-6));
    CHECK(folded.inter_node_bytes == Approx(plain.inter_node_bytes).epsilon(1e-9));
    CHECK(folded.flows * async_aware_fold(strategy) == plain.flows);  // one node in four (two) sends flows
  }
}

TEST_CASE("sim::ParameterServer: folded coarse traffic agrees with per-layer traffic within 3%", "[sim][ps]") {
  const auto prof = profile(48);
  for (const char* strategy : {"ps", "ps-async", "ps-replicated"}) {
    const int gpus = std::string(strategy) == "ps-replicated" ? 2 : 1;
    const auto plat = dragonfly(gpus);
    INFO(strategy);
    const auto fine = sim::simulate_training(plat, prof, dedicated(strategy, 64, 16, sim::CommMode::FINE, true));
    const auto folded = sim::simulate_training(plat, prof, dedicated(strategy, 64, 16, sim::CommMode::COARSE, true));
    CHECK(folded.throughput == Approx(fine.throughput).epsilon(0.03));
    CHECK(folded.inter_node_bytes == Approx(fine.inter_node_bytes).epsilon(1e-9));
    CHECK(folded.flows * async_aware_fold(strategy) <= fine.flows);  // 48 layers on 16 servers: only the fold
  }
}

TEST_CASE("sim::ParameterServer: groups of switches folded with load-scaled links stay within 3% of the exact fold",
          "[sim][ps]") {
  // A flow budget of one asks for the largest grouping: all worker nodes in one group (several routers
  // and chassis), whose routes differ beyond private links; links are scaled by the flows they carry
  // folded over those they carry unfolded. With router and chassis links 8x the NIC, the links only
  // some members use are never the bottleneck, and the fold applies.
  const auto prof = profile(48);
  for (const char* strategy : {"ps", "ps-replicated"}) {
    const int gpus = std::string(strategy) == "ps-replicated" ? 2 : 1;
    auto plat = dragonfly(gpus);
    plat.network.dragonfly.router_links = 8;
    plat.network.dragonfly.chassis_links = 8;
    INFO(strategy);
    const int nodes = 64 / gpus;
    const auto exact = sim::simulate_training(plat, prof, dedicated(strategy, 64, 16, sim::CommMode::COARSE, true));
    auto budget = dedicated(strategy, 64, 16, sim::CommMode::COARSE, true);
    budget.fidelity.ps_fold_max_flows = 1;
    const auto scaled = sim::simulate_training(plat, prof, budget);
    CHECK(scaled.throughput == Approx(exact.throughput).epsilon(0.03));
    CHECK(scaled.inter_node_bytes == Approx(exact.inter_node_bytes).epsilon(1e-9));
    CHECK(scaled.flows * (nodes / 4) == exact.flows);  // one representative instead of one per router
  }
}

TEST_CASE("sim::ParameterServer: a load-scaled fold is refused where links only some workers use are busy",
          "[sim][ps]") {
  // Router and chassis links at the NIC's rate: the links into each chassis are as busy as the servers'
  // NICs, so all 64 nodes folded into one would hide the slower workers behind them. The grouping is
  // refused and halved until the links that differ between members are quiet enough.
  const auto prof = profile(48);
  const auto plat = dragonfly(1);
  const auto exact = sim::simulate_training(plat, prof, dedicated("ps", 64, 16, sim::CommMode::COARSE, true));
  auto budget = dedicated("ps", 64, 16, sim::CommMode::COARSE, true);
  budget.fidelity.ps_fold_max_flows = 1;
  const auto refused = sim::simulate_training(plat, prof, budget);
  CHECK(refused.flows > exact.flows / 16);  // not one representative for all 64 nodes
  CHECK(refused.flows < exact.flows);       // a smaller grouping was accepted
  CHECK(refused.throughput == Approx(exact.throughput).epsilon(1e-3));
}

TEST_CASE("sim::ParameterServer: colocated servers: the switches without one are folded, weighted, exactly",
          "[sim][ps]") {
  // 16 servers on nodes 0-15 (routers 0-3); routers 4-15 fold onto one node each. Their flows share the
  // servers' NICs with the unfolded nodes' flows, each weighted as the 4 flows it stands for.
  const auto prof = profile(48);
  for (const char* strategy : {"ps", "ps-async", "ps-replicated"}) {
    const int gpus = std::string(strategy) == "ps-replicated" ? 2 : 1;
    const auto plat = dragonfly(gpus);
    INFO(strategy);
    const auto [folded_r, plain_r] = colocated_folded_and_plain(plat, prof, strategy, 64, 16);
    CHECK(folded_r.throughput == Approx(plain_r.throughput).epsilon(1e-6));
    CHECK(folded_r.iteration_time_s == Approx(plain_r.iteration_time_s).epsilon(1e-6));
    CHECK(folded_r.inter_node_bytes == Approx(plain_r.inter_node_bytes).epsilon(1e-9));
    CHECK(folded_r.flows < plain_r.flows * 3 / 4);
  }
}

TEST_CASE("sim::ParameterServer: colocated servers on one-device nodes split roles and fold every switch", "[sim][ps]") {
  // 16 servers on nodes 0-15 (routers 0-3). With split roles each of those nodes' devices has a NIC of
  // its own and the node's router link is twice as wide: every router folds onto one node, as with
  // dedicated servers. Against every worker simulated, with roles split and not. A member's flows to
  // the server on its own node stay inside it: its representative's flows to its group's servers carry
  // one node fewer (and the local bytes count as intra-node), so the network bytes are the same; what
  // is not simulated is the local flow's own early arrival.
  const auto prof = profile(48);
  const auto plat = dragonfly(1);
  const auto [split_folded, split_plain] = colocated_folded_and_plain(plat, prof, "ps", 64, 16, true);
  const auto [partly_folded, shared_plain] = colocated_folded_and_plain(plat, prof, "ps", 64, 16, false);
  CHECK(split_folded.flows * 4 == split_plain.flows);  // one node in four sends flows
  CHECK(split_folded.flows < partly_folded.flows);     // the servers' routers fold too
  CHECK(split_plain.throughput == Approx(shared_plain.throughput).epsilon(0.01));
  CHECK(split_folded.throughput == Approx(split_plain.throughput).epsilon(0.01));
  CHECK(split_folded.throughput == Approx(shared_plain.throughput).epsilon(0.01));
  CHECK(split_folded.inter_node_bytes == Approx(split_plain.inter_node_bytes).epsilon(1e-9));
}

TEST_CASE("sim::ParameterServer: beyond the budget, split roles group server-less routers by route class", "[sim][ps]") {
  // A budget of one asks for the largest groups. Routers 0-3 hold the servers and fold alone; the other
  // routers are grouped only with routers whose nodes cross the same busy links (World::route_classes),
  // beside them, in groups of different sizes (weighted flows): the busy links keep their loads exactly.
  const auto prof = profile(48);
  const auto plat = dragonfly(1);
  auto exact = dedicated("ps", 64, 16, sim::CommMode::COARSE, true);
  exact.ps.placement = sim::PsPlacement::COLOCATED;
  exact.fidelity.ps_split_roles = true;
  auto budget = exact;
  budget.fidelity.ps_fold_max_flows = 1;
  const auto exact_r = sim::simulate_training(plat, prof, exact);
  const auto grouped_r = sim::simulate_training(plat, prof, budget);
  CHECK(grouped_r.flows < exact_r.flows);
  CHECK(grouped_r.throughput == Approx(exact_r.throughput).epsilon(0.01));
  CHECK(grouped_r.inter_node_bytes == Approx(exact_r.inter_node_bytes).epsilon(1e-9));
}

TEST_CASE("sim::ParameterServer: colocated servers left empty do not keep their switches unfolded", "[sim][ps]") {
  // 12 variables on 32 servers: servers 0-11 (routers 0-2) hold them, servers 12-31 (routers 3-7) hold
  // nothing, send and receive nothing, and their nodes fold like server-less ones: 12 nodes plus 13
  // representatives send flows (26 asynchronous ones, in pairs), where counting every server kept
  // routers 0-7 (32 nodes) unfolded.
  const auto prof = profile(12);
  const auto plat = dragonfly(1);
  for (const char* strategy : {"ps", "ps-async"}) {
    INFO(strategy);
    const auto [folded_r, plain_r] = colocated_folded_and_plain(plat, prof, strategy, 64, 32);
    CHECK(folded_r.throughput == Approx(plain_r.throughput).epsilon(1e-6));
    CHECK(folded_r.inter_node_bytes == Approx(plain_r.inter_node_bytes).epsilon(1e-9));
    CHECK(folded_r.flows * 64 == plain_r.flows * (12 + 52 / async_aware_fold(strategy)));  // every node alike
  }
}

TEST_CASE("sim::ParameterServer: asynchronous workers on devices of their own speed fold at their mean pace",
          "[sim][ps]") {
  // Each device keeps its own factor (log-normal spread); asynchronous workers run at it. A folded
  // router's representative runs at its members' harmonic-mean factor (their mean compute rate); the
  // other groups keep their own, so the groups still drift apart as the workers would. Dedicated and
  // colocated servers, with a server CPU that applies each push in turn.
  const auto prof = profile(48);
  const auto plat = dragonfly(1);
  for (const auto placement : {sim::PsPlacement::DEDICATED, sim::PsPlacement::COLOCATED}) {
    auto spread = dedicated("ps-async", 64, 16, sim::CommMode::COARSE, true);
    spread.ps.placement = placement;
    spread.variability.device_cv = sim::GPU_DEVICE_CV;
    spread.fidelity.iterations = 6;
    spread.ps.apply_s_per_B = 1e-11;
    auto plain = spread;
    plain.fidelity.ps_fold = false;
    auto budget = spread;  // under the default budget: every worker simulated
    budget.fidelity.ps_fold_max_flows = sim::PS_FOLD_MAX_FLOWS;
    const auto folded_r = sim::simulate_training(plat, prof, spread);
    const auto plain_r = sim::simulate_training(plat, prof, plain);
    INFO(sim::to_string(placement));
    CHECK(folded_r.flows < plain_r.flows * 3 / 4);  // folded, where the spread used to keep every worker apart
    // In step, a group's flows and pushes contend together: slower than workers drifting apart, here by
    // 5.0% dedicated and 2.3% colocated (32 pairs; TensorFlow's greedy placement in creation order leaves
    // one shard heavier, where groups in step queue together; 8-11% with 16 routers in step,
    // docs/simulation-training.md).
    CHECK(folded_r.throughput < plain_r.throughput);
    CHECK(folded_r.throughput == Approx(plain_r.throughput).epsilon(0.06));
    CHECK(folded_r.inter_node_bytes == Approx(plain_r.inter_node_bytes).epsilon(1e-9));
    CHECK(sim::simulate_training(plat, prof, budget).throughput == Approx(plain_r.throughput).epsilon(1e-12));
  }
}

TEST_CASE("sim::ParameterServer: workers with their own compute variation are not folded", "[sim][ps]") {
  const auto prof = profile(48);
  const auto plat = dragonfly(1);
  auto jitter = dedicated("ps", 64, 16, sim::CommMode::COARSE, true);
  jitter.variability.jitter_cv = 0.05;
  auto jitter_plain = jitter;
  jitter_plain.fidelity.ps_fold = false;
  CHECK(sim::simulate_training(plat, prof, jitter).flows == sim::simulate_training(plat, prof, jitter_plain).flows);
}

TEST_CASE("sim::ParameterServer: beyond 128 asynchronous workers fold even under the flow budget", "[sim][ps]") {
  // One server: 192 workers (48 four-GPU nodes) start far fewer flows per iteration than the budget,
  // but their flows queue at the server, so every event re-solves nearly all of them (the cost grows
  // with the square of the workers: ASYNC_MAX_UNFOLDED_WORKERS in plan/parameter_server.cpp). 128 workers stay unfolded.
  const auto prof = profile(12);
  const auto plat = dragonfly(4);
  for (const int workers : {128, 192}) {
    auto p = dedicated("ps-async", workers, 1, sim::CommMode::COARSE, true);
    p.fidelity.ps_fold_max_flows = sim::PS_FOLD_MAX_FLOWS;
    auto plain = p;
    plain.fidelity.ps_fold = false;
    const auto folded_r = sim::simulate_training(plat, prof, p);
    const auto plain_r = sim::simulate_training(plat, prof, plain);
    INFO(workers << " workers");
    if (workers == 128) {
      CHECK(folded_r.flows == plain_r.flows);
      continue;
    }
    CHECK(folded_r.flows * 4 == plain_r.flows);  // one representative node per 4-node router
    CHECK(folded_r.throughput == Approx(plain_r.throughput).epsilon(0.03));
    CHECK(folded_r.inter_node_bytes == Approx(plain_r.inter_node_bytes).epsilon(1e-9));
  }
}
