// Hierarchical allreduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE, Baidu's two-level scheme): each node
// reduces to its first rank, the node leaders run a ring allreduce, and each leader broadcasts the result
// back inside its node.
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace {

void hier_start(World& w, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
  auto groups = std::make_shared<std::vector<std::vector<int>>>(coll::group_by_node(w, ranks));
  std::vector<int> leaders;
  int members = 0;
  for (auto& g : *groups) {
    leaders.push_back(g.front());
    members += static_cast<int>(g.size()) - 1;
  }
  auto broadcast_phase = [&w, groups, bytes, members, done = std::move(done)]() {
    if (members == 0) {
      w.after(0, done);
      return;
    }
    auto all = coll::countdown(members, done);
    for (auto& g : *groups)
      for (std::size_t i = 1; i < g.size(); ++i) w.transfer(w.worker_host(g[0]), w.worker_host(g[i]), bytes, all);
  };
  auto inter_phase = [&w, leaders, bytes, mode, broadcast_phase]() {
    start_collective(w, *collective_or_null("allreduce", "ring"), leaders, bytes, mode, broadcast_phase);
  };
  if (members == 0) {
    inter_phase();
    return;
  }
  auto reduced = coll::countdown(members, inter_phase);
  for (auto& g : *groups)
    for (std::size_t i = 1; i < g.size(); ++i) w.transfer(w.worker_host(g[i]), w.worker_host(g[0]), bytes, reduced);
}

ByteSplit hier_bytes(const RankGeometry& g, double bytes) {
  // Leaders' ring: 2(nodes-1)/nodes x bytes each; reduce and broadcast: bytes per non-leader each way.
  return {2.0 * (g.nodes - 1) * bytes, 2.0 * (g.ranks - g.nodes) * bytes};
}

}  // namespace

CollectiveAlgorithm allreduce_hier() {
  return {
      "allreduce", "hier",
      "intra-node reduce to a leader, ring allreduce among node leaders, intra-node broadcast (Horovod)",
      hier_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      hier_bytes,
      [](const UniformNetwork& net, int n, double bytes) {  // one rank per node: the leaders' ring alone
        return collective_or_null("allreduce", "ring")->closed_form_s(net, n, bytes);
      },
  };
}

}  // namespace dtsim::sim
