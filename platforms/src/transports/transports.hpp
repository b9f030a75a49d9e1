// Internal to platforms/: one function per transport row (one file each), gathered by transport.cpp.
#pragma once
#include "platforms/transport.hpp"

namespace dtsim::platforms::transport_rows {
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
