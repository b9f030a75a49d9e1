// NVLink SHARP allreduce (NCCL's NVLS and, across nodes, NVLS_TREE; NCCL 2.17+ on Hopper with third-generation
// NVSwitch): each GPU reduces its 1/k shard in the switch (multimem load-reduce: the switch reads that shard
// from all k GPUs of the node) and stores the result once, which the switch multicasts to every GPU. A GPU's
// NVSwitch port so carries bytes (k+1)/k each way, where a ring moves 2(k-1)/k. Across nodes each GPU's
// reduced shard goes through its own rail NIC in a double binary tree with the same GPU of the other nodes
// (one tree per shard), between the reduce and the multicast. NCCL pipelines the three parts in chunks:
// they run here at once (their flows share the links), in fine and coarse mode alike.
#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace {

// Fraction of the NVLink port rate NVLS reaches on Hopper: NCCL's own model of its in-switch reduction
// (NVIDIA/nccl src/graph/tuning.cc, nvlsEfficiency[] = {Volta 0, Ampere 0, Hopper 0.85}, NCCL 2.19+).
constexpr double NVLS_EFFICIENCY_HOPPER = 0.85;

// Bytes one GPU's port carries each way for an allreduce of `bytes` over k GPUs of a node.
double port_bytes(double bytes, int k) { return bytes * (k + 1.0) / k; }

void nvls_start(World& w, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
  const auto groups = coll::group_by_node(w, ranks);
  std::size_t per_node = groups.front().size();
  for (const auto& g : groups) {
    if (w.nvswitch_host(w.node_of(g.front())) == nullptr)
      throw InputError("allreduce-nvls: the platform's nodes do not reduce in their NVSwitch (NVLink SHARP needs "
                       "node.intra kind nvswitch with Hopper GPUs)");
    per_node = std::min(per_node, g.size());
  }
  int flows = 0;
  for (const auto& g : groups) flows += g.size() > 1 ? 2 * static_cast<int>(g.size()) : 0;
  const int trees = groups.size() > 1 ? static_cast<int>(per_node) : 0;
  auto all = coll::countdown(flows + trees, std::move(done));
  for (const auto& g : groups) {
    if (g.size() < 2) continue;
    auto* sw = w.nvswitch_host(w.node_of(g.front()));
    const double wire_B = port_bytes(bytes, static_cast<int>(g.size())) / NVLS_EFFICIENCY_HOPPER;
    for (int r : g) {
      w.transfer(w.worker_host(r), sw, wire_B, all);
      w.transfer(sw, w.worker_host(r), wire_B, all);
    }
  }
  // One tree per shard over the nodes, each through the shard's GPU (and so its rail NIC) on every node.
  const auto& tree = *collective_or_null("allreduce", "tree");
  for (int i = 0; i < trees; ++i) {
    std::vector<int> peers;
    for (const auto& g : groups) peers.push_back(g[static_cast<std::size_t>(i)]);
    start_collective(w, tree, peers, bytes / static_cast<double>(per_node), mode, all);
  }
}

ByteSplit nvls_bytes(const RankGeometry& g, double bytes) {
  // Through the switch: every rank's port both ways; across nodes: the shards' trees, 2 (nodes - 1) x bytes.
  const double intra = 2.0 * g.ranks * port_bytes(bytes, std::max(1, g.ranks_per_node));
  return {g.nodes > 1 ? 2.0 * (g.nodes - 1) * bytes : 0.0, g.ranks_per_node > 1 ? intra : 0.0};
}

}  // namespace

CollectiveAlgorithm allreduce_nvls() {
  return {
      "allreduce", "nvls",
      "NVLink SHARP: reduce and multicast in the NVSwitch, bytes (k+1)/k per GPU port; a tree per shard across nodes "
      "over rail NICs (NCCL NVLS / NVLS_TREE)",
      nvls_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      nvls_bytes,
      [](const UniformNetwork& net, int n, double bytes) {  // one node: the ports are the uniform links
        return net.latency_s + port_bytes(bytes, n) / NVLS_EFFICIENCY_HOPPER / net.bandwidth_Bps;
      },
  };
}

}  // namespace dtsim::sim
