// Internal to platforms/: one function per transport row (one file each), gathered by transport.cpp.
#pragma once
#include "platforms/transport.hpp"

namespace dtsim::platforms::transport_rows {
// MVAPICH2 user guide, MV2_CUDA_BLOCK_SIZE (default 262144): the chunk its GPU-to-GPU pipeline copies
// through pinned host buffers; dtsim's chunk for every device buffer staged through host memory.
inline constexpr double STAGING_CHUNK_B = 262144;
Transport ideal();
Transport rdma();
Transport rdma_host_staged();
Transport tcp();
Transport shm();
Transport pcie();
Transport nvlink();
Transport grpc();
Transport grpc_2016();
Transport zeromq();
}  // namespace dtsim::platforms::transport_rows
