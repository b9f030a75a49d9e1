// Ring allgather: n-1 steps of bytes/n around the ring, after which every rank holds all n pieces (NCCL's
// ring allgather; ZeRO-3/FSDP parameter gathers, Megatron's sequence-parallel layers). `bytes` is the whole
// gathered buffer (nccl-tests' size for all_gather_perf), each rank contributing bytes/n.
#include "sim/src/coll/collective.hpp"

namespace dtsim::sim {

CollectiveAlgorithm allgather_ring() {
  return {
      "allgather", "ring", "n-1 steps of bytes/n around a ring; every rank ends with all n pieces (NCCL)",
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
