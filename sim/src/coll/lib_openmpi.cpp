// Open MPI's coll/tuned fixed decision for allreduce (ompi_coll_tuned_allreduce_intra_dec_fixed,
// coll_tuned_decision_fixed.c, unchanged from Open MPI 1.3 to 4.0; 4.1 replaced it with larger tables):
// below 10,000 bytes recursive doubling; else, for a commutative op with more elements than ranks, the
// ring when ranks x 1 MiB >= bytes, otherwise the segmented ring (1 MiB segments); else reduce + bcast.
// On GPU buffers the coll/cuda component wraps it (ompi/mca/coll/cuda/coll_cuda_allreduce.c): the send
// (or in-place receive) buffer is copied to a host buffer with opal_cuda_memcpy_sync, the host
// allreduce runs, and the result is copied back: stages_device_buffers.
#include "sim/src/coll/library.hpp"

namespace dtsim::sim {
namespace {

constexpr double INTERMEDIATE_MESSAGE_B = 10000;  // "intermediate_message" in the decision function

LibraryChoice openmpi_choose(const LibraryCall& call, const std::string& forced) {
  if (!forced.empty()) return {forced, "-", 1.0, 0};
  if (call.bytes < INTERMEDIATE_MESSAGE_B) return {"rd", "-", 1.0, 0};
  // Segmented ring (bytes > ranks x 1 MiB) pipelines each ring step in 1 MiB segments to overlap the
  // reduction with the transfer; on the wire it moves the ring's bytes in the ring's steps, so it runs
  // as the ring. The reduce + bcast branch (elements <= ranks: >= 2,500 ranks at >= 10 kB) is not in
  // the collective table and runs as the ring too (docs/collective-libraries.md).
  return {"ring", "-", 1.0, 0};
}

}  // namespace

CollectiveLibrary library_openmpi() {
  return {"openmpi-4.0",
          "Open MPI 1.3-4.0 coll/tuned fixed rule: recursive doubling below 10,000 B, ring (segmented) above; GPU "
          "buffers copied to host memory and back (coll/cuda)",
          openmpi_choose, CUDA_PEER_P2P_LEVEL, /*stages_device_buffers=*/true};
}

}  // namespace dtsim::sim
