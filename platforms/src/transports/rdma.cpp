// Transport "rdma": MPI/NCCL over RDMA verbs (InfiniBand, Omni-Path, Aries, RoCE), with GPUDirect RDMA
// where the GPU and NIC allow it, so device buffers go straight to the NIC over PCIe.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {

// Fitted by benchmarks/fit_transports.py on the published osu_latency curve of Open MPI + UCX rc over
// HDR InfiniBand (benchmarks/data/transports/osu_points.csv, converged-computing/usernetes-azure);
// residuals in docs/transports.md (mean 1.6%, worst 7.4%). Band edges: UCX short -> bcopy near 256 B,
// zero-copy near 16 KiB, rendezvous near 256 KiB.
constexpr double BCOPY_MIN_B = 256;
constexpr double ZCOPY_MIN_B = 16384;
constexpr double RENDEZVOUS_MIN_B = 262144;
const std::vector<FactorBand> RDMA_BANDS = {
    {0, 1.005, 0.022},
    {BCOPY_MIN_B, 1.450, 0.177},
    {ZCOPY_MIN_B, 2.594, 0.517},
    {RENDEZVOUS_MIN_B, 4.237, 1.0},
};

Transport rdma() {
  Transport t;
  t.name = "rdma";
  t.description = "RDMA verbs (GPUDirect RDMA for device buffers): 4 size bands, eager to rendezvous";
  t.model = TransportModel::DIRECT;
  t.scope = TransportScope::INTER_NODE;
  t.bands = RDMA_BANDS;
  t.source = "osu_latency one-way times, Open MPI + UCX rc on HDR InfiniBand (converged-computing/"
             "usernetes-azure experiments/README.md); fit in docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
