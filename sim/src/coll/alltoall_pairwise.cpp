// All-to-all as NCCL runs it (ncclAllToAll is a group of ncclSend/ncclRecv to every peer): each rank sends
// bytes/n to every other rank, all at once; the flows share each rank's links max-min. `bytes` is one
// rank's send buffer (nccl-tests' size for alltoall_perf). Expert parallelism's token dispatch and combine.
#include <algorithm>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace {

void pairwise_start(World& w, const std::vector<int>& ranks, double bytes, CommMode /*mode*/, Done done) {
  const int n = static_cast<int>(ranks.size());
  auto all = coll::countdown(n * (n - 1), std::move(done));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) w.transfer(w.worker_host(ranks[static_cast<std::size_t>(i)]), w.worker_host(ranks[static_cast<std::size_t>(j)]), bytes / n, all);
}

ByteSplit pairwise_bytes(const RankGeometry& g, double bytes) {
  ByteSplit out;
  const double piece = bytes / g.ranks;
  // Node-major placement: every node full but perhaps the last. A node of m ranks sends m(m-1) pieces
  // inside and m(n-m) across.
  for (int first = 0; first < g.ranks; first += g.ranks_per_node) {
    const double m = std::min(g.ranks_per_node, g.ranks - first);
    out.intra_node_B += m * (m - 1) * piece;
    out.inter_node_B += m * (g.ranks - m) * piece;
  }
  return out;
}

}  // namespace

CollectiveAlgorithm alltoall_pairwise() {
  return {
      "alltoall", "pairwise", "every rank sends bytes/n to each other rank at once (NCCL's grouped send/recv)",
      pairwise_start,
      [](int n) { return (n - 1.0) / n; },
      pairwise_bytes,
      // Each rank's link carries (n-1)/n x bytes out and in; the n-1 flows start together.
      [](const UniformNetwork& net, int n, double bytes) { return net.latency_s + (n - 1.0) / n * bytes / net.bandwidth_Bps; },
  };
}

}  // namespace dtsim::sim
