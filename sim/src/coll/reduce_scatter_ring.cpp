// Ring reduce-scatter: n-1 steps of bytes/n around the ring, after which each rank holds the reduced 1/n of
// the buffer (NCCL's ring reduce-scatter; ZeRO-2/3 and FSDP gradient sharding, Megatron's sequence-parallel
// layers). `bytes` is the whole buffer each rank contributes (nccl-tests' size for reduce_scatter_perf).
#include "sim/src/coll/collective.hpp"

namespace dtsim::sim {

CollectiveAlgorithm reduce_scatter_ring() {
  return {
      "reduce-scatter", "ring", "n-1 steps of bytes/n around a ring; each rank keeps its reduced 1/n (NCCL)",
      [](World& w, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
        coll::ring_pass(w, ranks, bytes, static_cast<int>(ranks.size()) - 1, mode, std::move(done));
      },
      [](int n) { return (n - 1.0) / n; },
      [](const RankGeometry& g, double bytes) { return coll::ring_pass_bytes(g, bytes, g.ranks - 1); },
      [](const UniformNetwork& net, int n, double bytes) {
        return (n - 1) * (net.latency_s + bytes / n / net.bandwidth_Bps);
      },
  };
}

}  // namespace dtsim::sim
