// Gloo (PyTorch's gloo backend, Horovod over Gloo): gloo::allreduce is a ring (reduce-scatter then
// allgather, segments pipelined within each chunk) at every size and rank count (gloo/allreduce.cc).
// Its halving-doubling (AllreduceHalvingDoubling) is a separate Caffe2-era class no default path picks.
#include "sim/src/coll/library.hpp"

namespace dtsim::sim {

CollectiveLibrary library_gloo() {
  return {"gloo", "Gloo: ring allreduce at every size (gloo/allreduce.cc)",
          [](const LibraryCall&, const std::string& forced) {
            return LibraryChoice{forced.empty() ? "ring" : forced, "-", 1.0, 0};
          }};
}

}  // namespace dtsim::sim
