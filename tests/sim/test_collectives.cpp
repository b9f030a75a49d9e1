// Tests of the collective table (sim/src/coll/): every algorithm against its own closed form on a
// uniform network, coarse against fine, byte accounting, the double binary tree's shape, and names.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>

#include "common/errors.hpp"
#include "sim/comm.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/training.hpp"
#include "tests/sim/comm_test_platforms.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace dtsim::sim {
std::array<std::vector<int>, 2> double_binary_trees(int nodes);  // allreduce_tree.cpp, for shape tests
}

namespace {
constexpr double BW = 1.25e9;  // 10 Gb/s ports
constexpr double LAT = 5e-6;   // per port: 2 x LAT between two nodes
constexpr double S = 25e6;

double simulate(const CollectiveAlgorithm& a, int n, double bytes, CommMode mode) {
  CommRequest r;
  r.pattern = a.full_name();
  r.workers = n;
  r.bytes = bytes;
  r.mode = mode;
  return simulate_comm(test_platforms::uniform_star(n, BW, LAT), r).time_s;
}
}  // namespace

TEST_CASE("sim::Collective: every algorithm matches its closed form on a uniform network", "[sim][coll]") {
  for (const auto& a : collective_table()) {
    if (a.name == "nvls") continue;  // needs NVSwitch nodes: its own closed-form test below
    for (int n : {4, 6, 16}) {
      const double expected = a.closed_form_s({2 * LAT, BW}, n, S);
      INFO(a.full_name() << " n=" << n);
      // The pipelined tree keeps one chunk in flight per edge: each chunk also pays a hop latency.
      CHECK(simulate(a, n, S, CommMode::FINE) == Approx(expected).epsilon(a.name == "tree" ? 0.06 : 0.02));
    }
  }
}

TEST_CASE("sim::Collective: coarse mode agrees with fine mode (tree: pipeline fill in closed form)", "[sim][coll]") {
  auto p = test_platforms::gpu_fat_tree(16, 4);
  for (const char* name : {"allreduce-ring", "allreduce-tree", "allreduce-hier"}) {
    for (int n : {8, 32}) {
      CommRequest r;
      r.pattern = name;
      r.workers = n;
      r.bytes = 25e6;
      r.mode = CommMode::FINE;
      const auto fine = simulate_comm(p, r);
      r.mode = CommMode::COARSE;
      const auto coarse = simulate_comm(p, r);
      INFO(name << " n=" << n);
      CHECK(coarse.time_s == Approx(fine.time_s).epsilon(std::string(name) == "allreduce-tree" ? 0.15 : 0.05));
      CHECK(coarse.flows < fine.flows);
    }
  }
}

TEST_CASE("sim::Collective: the double binary tree is two complementary spanning trees", "[sim][coll]") {
  for (int n : {2, 3, 8, 13, 64}) {
    const auto trees = double_binary_trees(n);
    int interior_in_both = 0;
    for (const auto& t : trees) {
      int roots = 0;
      for (int v = 0; v < n; ++v) {
        if (t[static_cast<std::size_t>(v)] < 0) ++roots;
        int hops = 0;  // every position reaches the root in at most log2 n + 1 hops (no cycles)
        for (int q = v; t[static_cast<std::size_t>(q)] >= 0 && hops <= n; q = t[static_cast<std::size_t>(q)]) ++hops;
        CHECK(hops <= static_cast<int>(std::log2(n)) + 1);
      }
      CHECK(roots == 1);
    }
    for (int v = 0; v < n; ++v) {
      bool interior[2] = {false, false};
      for (int t = 0; t < 2; ++t)
        for (int c : trees[static_cast<std::size_t>(t)]) interior[t] = interior[t] || c == v;
      if (interior[0] && interior[1]) ++interior_in_both;
    }
    INFO("n=" << n);
    CHECK(interior_in_both <= n / 2);  // most ranks are a leaf in one of the trees
  }
}

TEST_CASE("sim::Collective: rhd exchanges the largest half at distance 1 (inside a node)", "[sim][coll]") {
  const auto& rhd = *collective_or_null("allreduce", "rhd");
  const auto& ring = *collective_or_null("allreduce", "ring");
  // 64 ranks, 8 per node: distance 1, 2, 4 stay inside a node; only the small pieces cross.
  const RankGeometry g{64, 8, 8};
  const auto split = rhd.bytes_moved(g, 1e6);
  CHECK(split.inter_node_B + split.intra_node_B == Approx(ring.bytes_moved(g, 1e6).inter_node_B +
                                                         ring.bytes_moved(g, 1e6).intra_node_B));
  // Steps at distance 8, 16, 32 carry 1/16 + 1/32 + 1/64 of the buffer each way, per rank.
  CHECK(split.inter_node_B == Approx(2 * 64 * 1e6 * (1.0 / 16 + 1.0 / 32 + 1.0 / 64)));
}

TEST_CASE("sim::Collective: names come from the tables; unknown names are errors", "[sim][coll]") {
  CHECK(collective_names("allreduce") == "ring, tree, rhd, hier, rd, nvls");
  const auto names = strategy_names();
  CHECK(std::find(names.begin(), names.end(), "allreduce-tree") != names.end());
  CHECK(std::find(names.begin(), names.end(), "ps-async") != names.end());
  CHECK(strategy_by_name("allreduce-rhd") == Strategy{"allreduce", "rhd"});
  CHECK(strategy_by_name("ps").collective.empty());
  CHECK(strategy_help().find("allreduce-tree: ") != std::string::npos);
  CHECK_THROWS_AS(collective_by_name("allreduce", "butterfly", "--strategy"), InputError);
  CHECK_THROWS_AS(strategy_by_name("allreduce"), InputError);
  CHECK_THROWS_AS(check_comm_pattern("ps-replicated"), InputError);
}

namespace {
// `nodes` nodes of `gpus` H100s on an NVSwitch (18 x 25 GB/s ports), `nics` NIC ports of 12.5 GB/s each, on
// a star (or a 2-level fat tree), no latencies: the closed forms below hold exactly.
platforms::Platform nvswitch_nodes(int nodes, int gpus, int nics, bool fat_tree = false) {
  auto p = test_platforms::uniform_star(nodes, 12.5e9, 0);
  p.node.gpu = "h100-sxm5";
  p.node.gpus = gpus;
  p.node.nics = nics;
  p.node.intra.kind = platforms::IntraNodeKind::NVSWITCH;
  p.node.intra.link_bandwidth_Bps = 25e9;
  p.node.intra.links_per_gpu = 18;
  p.node.intra.uplink_bandwidth_Bps = 63e9;
  p.node.intra.latency_s = 0;
  if (fat_tree) {
    p.network.topology = platforms::TopologyKind::FAT_TREE;
    p.network.fat_tree.levels = 2;
    p.network.fat_tree.down = {2, 1};
    p.network.fat_tree.up = {1, 2};
    p.network.fat_tree.parallel = {nics, 1};
  }
  return p;
}
double comm_s(const platforms::Platform& p, const std::string& pattern, int workers, int per_node, double bytes,
              CommMode mode = CommMode::COARSE) {
  CommRequest r;
  r.pattern = pattern;
  r.workers = workers;
  r.workers_per_node = per_node;
  r.bytes = bytes;
  r.mode = mode;
  return simulate_comm(p, r).time_s;
}
constexpr double PORT_BPS = 18 * 25e9;
constexpr double NIC_BPS = 12.5e9;
constexpr double NVLS_EFFICIENCY = 0.85;  // allreduce_nvls.cpp (NCCL's nvlsEfficiency, Hopper)
}  // namespace

TEST_CASE("sim::Collective: nvls moves bytes (k+1)/k through each NVSwitch port at NCCL's efficiency", "[sim][coll]") {
  const auto& nvls = collective_by_name("allreduce", "nvls", "test");
  for (int k : {4, 8}) {
    INFO("k=" << k);
    const double expected = nvls.closed_form_s({0, PORT_BPS}, k, 1e9);
    CHECK(expected == Approx(1e9 * (k + 1.0) / k / NVLS_EFFICIENCY / PORT_BPS));
    CHECK(comm_s(nvswitch_nodes(1, k, 1), "allreduce-nvls", k, k, 1e9) == Approx(expected).epsilon(0.01));
    CHECK(comm_s(nvswitch_nodes(1, k, 1), "allreduce-nvls", k, k, 1e9, CommMode::FINE) == Approx(expected).epsilon(0.01));
  }
  // Against the ring's 2(k-1)/k per port: NVLS is faster at 8 GPUs by (14/8) / (9/8 / 0.85).
  const double ring = comm_s(nvswitch_nodes(1, 8, 1), "allreduce-ring", 8, 8, 1e9);
  CHECK(ring == Approx(1e9 * 14 / 8 / PORT_BPS).epsilon(0.01));
  // Without Hopper there is no in-switch reduction: a one-line input error.
  auto a100 = nvswitch_nodes(1, 8, 1);
  a100.node.gpu = "a100-sxm4-80gb";
  CHECK_THROWS_AS(comm_s(a100, "allreduce-nvls", 8, 8, 1e9), InputError);
}

TEST_CASE("sim::Collective: rings and trees across rail NICs run one channel per GPU offset", "[sim][coll]") {
  const double S = 1e9;
  const double ring_bytes = 2.0 * 15 / 16 * S;  // 16 ranks: what each ring edge carries
  for (bool fat_tree : {false, true}) {
    INFO("fat tree: " << fat_tree);
    // One NIC port: the ring's two node crossings each go through it.
    CHECK(comm_s(nvswitch_nodes(2, 8, 1, fat_tree), "allreduce-ring", 16, 8, S) == Approx(ring_bytes / NIC_BPS).epsilon(0.02));
    // 8 rails: 8 rings, each crossing through other GPUs' NICs: 1/8 of the bytes per NIC.
    CHECK(comm_s(nvswitch_nodes(2, 8, 8, fat_tree), "allreduce-ring", 16, 8, S) ==
          Approx(ring_bytes / 8 / NIC_BPS).epsilon(0.02));
    // 4 rails of 2 GPUs: 2 channels per NIC.
    CHECK(comm_s(nvswitch_nodes(2, 8, 4, fat_tree), "allreduce-ring", 16, 8, S) ==
          Approx(ring_bytes / 4 / NIC_BPS).epsilon(0.02));
    // Double binary tree over 2 nodes: each node sends and receives S in all over its head GPUs' NICs.
    CHECK(comm_s(nvswitch_nodes(2, 8, 4, fat_tree), "allreduce-tree", 16, 8, S) == Approx(S / 4 / NIC_BPS).epsilon(0.03));
  }
  // NVLS across nodes: the ports' (k+1)/k at NCCL's efficiency, and the shards' trees (S/8 each way per
  // rail) at once; here the rails (12.5 GB/s) are the slower part.
  CHECK(comm_s(nvswitch_nodes(2, 8, 8), "allreduce-nvls", 16, 8, S) == Approx(S / 8 / NIC_BPS).epsilon(0.03));
}

TEST_CASE("sim::Collective: a process-to-process message on rail nodes goes through one NIC port", "[sim][coll]") {
  // One MPI connection uses one HCA: 8 rails do not make a ping-pong 8 times faster.
  const double bytes = 1e9;
  for (int nics : {1, 8}) {
    INFO("nics=" << nics);
    const auto points = simulate_pingpong(nvswitch_nodes(2, 8, nics), {bytes});
    CHECK(points.front().bandwidth_Bps == Approx(NIC_BPS).epsilon(0.02));
  }
}
