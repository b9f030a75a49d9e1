// Binomial-tree broadcast from the first rank of the list: ceil(log2 n) rounds; O(n) messages, so both
// modes send every message (MPICH's short-message broadcast; PyTorch DataParallel's replicate).
#include <memory>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace {

void binomial_start(World& world, const std::vector<int>& order, double bytes, CommMode /*mode*/, Done done) {
  const int n = static_cast<int>(order.size());
  auto all = coll::countdown(n - 1, std::move(done));
  // Relative rank v holding the data sends to v + 2^j for every j above its highest bit, in order.
  auto send_from = std::make_shared<std::function<void(int, int)>>();
  *send_from = [&world, order, n, bytes, all, weak = std::weak_ptr<std::function<void(int, int)>>(send_from)](int v,
                                                                                                          int j) {
    auto self = weak.lock();
    if (!self || v + (1 << j) >= n) return;
    const int child = v + (1 << j);
    world.transfer(world.worker_host(order[v]), world.worker_host(order[child]), bytes, [self, all, v, j, child]() {
      (*self)(v, j + 1);
      (*self)(child, j + 1);
      all();
    });
  };
  (*send_from)(0, 0);  // the transfer callbacks keep the function alive until the last one
}

ByteSplit binomial_bytes(const RankGeometry& g, double bytes) {
  ByteSplit out;
  const auto node = [&](int r) { return r / g.ranks_per_node; };
  for (int v = 1; v < g.ranks; ++v) {
    int high = 1;
    while (high * 2 <= v) high *= 2;
    (node(v - high) == node(v) ? out.intra_node_B : out.inter_node_B) += bytes;
  }
  return out;
}

}  // namespace

CollectiveAlgorithm broadcast_binomial() {
  return {
      "broadcast", "binomial", "binomial tree from the first rank, ceil(log2 n) rounds (MPICH short messages)",
      binomial_start,
      [](int) { return 1.0; },
      binomial_bytes,
      [](const UniformNetwork& net, int n, double bytes) {
        int rounds = 0;
        while ((1 << rounds) < n) ++rounds;
        return rounds * (net.latency_s + bytes / net.bandwidth_Bps);
      },
  };
}

}  // namespace dtsim::sim
