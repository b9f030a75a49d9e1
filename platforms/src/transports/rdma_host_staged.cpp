// Transport "rdma-host-staged": RDMA where the NIC cannot read GPU memory: device-to-host copy, wire,
// host-to-device copy, pipelined in chunks (MVAPICH2 / Open MPI CUDA-aware pipelines, TensorFlow's copies).
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {

Transport rdma_host_staged() {
  Transport t = rdma();  // the wire part is RDMA: same factor bands
  t.name = "rdma-host-staged";
  t.description = "RDMA with device buffers staged through pinned host memory: D2H copy, wire, H2D copy, "
                  "pipelined in 256 KiB chunks";
  t.model = TransportModel::HOST_STAGED;
  t.chunk_B = STAGING_CHUNK_B;
  t.source = t.source + "; chunk: MVAPICH2 2.3 user guide MV2_CUDA_BLOCK_SIZE default 262144";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
