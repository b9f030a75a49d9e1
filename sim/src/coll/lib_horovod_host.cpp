// Horovod built without GPU operations (no HOROVOD_GPU_OPERATIONS / HOROVOD_GPU_ALLREDUCE) reducing GPU
// tensors through Open MPI on host buffers. The framework stages each tensor: PyTorch's DoAllreduceCudaOnCPU
// (horovod/torch/mpi_ops_v2.cc) copies it to a CPU tensor, enqueues that, and copies the result back in the
// completion callback; TensorFlow registers HorovodAllreduce for DEVICE_CPU only (horovod/tensorflow/
// mpi_ops.cc), so TF places the op on the host and copies around it. Horovod's MPIAllreduce::Execute
// (horovod/common/ops/mpi_operations.cc) then memcpys the fused tensors into the host fusion buffer
// (AllreduceOp::MemcpyInFusionBuffer, std::memcpy per entry: horovod/common/ops/collective_operations.cc),
// calls MPI_Allreduce in place on the whole buffer and memcpys the result out, one step after the other:
// nothing is pipelined within one fused buffer. The host allreduce is Open MPI's coll/tuned fixed rule
// (lib_openmpi.cpp; Intel MPI's tuning is closed and not modelled), whose ring reduces every received block
// with ompi_op_reduce before forwarding it (ompi_coll_base_allreduce_intra_ring, coll_base_allreduce.c).
// docs/collective-libraries.md "Horovod on host buffers".
#include <cmath>

#include "sim/src/coll/library.hpp"

namespace dtsim::sim {

CollectiveLibrary library_openmpi();  // lib_openmpi.cpp

namespace {

// Bytes of memory traffic per reduced byte: ompi_op_reduce reads the received block and the rank's own
// block and writes the sum (2 reads + 1 write).
constexpr double HOST_REDUCE_TRAFFIC_PER_B = 3;

// Bytes one rank reduces on the critical path of `algorithm` over `ranks`. Recursive doubling
// (ompi_coll_base_allreduce_intra_recursivedoubling) reduces the whole vector at each of its log2 steps,
// plus once where the excess ranks of a non-power of two fold in; the ring (and the reduce-scatter based
// algorithms a user may force) reduce each rank's (p-1)/p share once.
double host_reduced_B(const std::string& algorithm, double bytes, int ranks) {
  if (ranks < 2) return 0;
  if (algorithm == "rd") {
    const int steps = static_cast<int>(std::floor(std::log2(static_cast<double>(ranks))));
    const bool fold = (ranks & (ranks - 1)) != 0;
    return (steps + (fold ? 1 : 0)) * bytes;
  }
  return static_cast<double>(ranks - 1) / ranks * bytes;
}

}  // namespace

CollectiveLibrary library_horovod_host() {
  CollectiveLibrary lib{
      "horovod-host-openmpi-4.0",
      "Horovod without GPU operations: GPU tensors copied to host, fused by memcpy, Open MPI 4.0's host allreduce "
      "(fixed rule) with reductions on one host core, copied back; no pipelining within a fused buffer",
      library_openmpi().choose};
  // The framework's copies out and back are the whole buffer each, before and after the host allreduce,
  // at the GPU's DMA rate to host memory (the same timers as coll/cuda's).
  lib.stages_device_buffers = true;
  lib.framework_stages_to_host = true;
  lib.host_reduce_s = [](const LibraryCall& call, const LibraryChoice& choice) {
    if (call.host_core_Bps <= 0) return 0.0;
    return HOST_REDUCE_TRAFFIC_PER_B * host_reduced_B(choice.algorithm, call.bytes, call.ranks) / call.host_core_Bps;
  };
  return lib;
}

}  // namespace dtsim::sim
