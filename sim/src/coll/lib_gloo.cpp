// Gloo (PyTorch's gloo backend, Horovod over Gloo): gloo::allreduce is a ring (reduce-scatter then
// allgather, segments pipelined within each chunk) at every size and rank count (gloo/allreduce.cc).
// Its halving-doubling (AllreduceHalvingDoubling) is a separate Caffe2-era class no default path picks.
// The collective runs in gloo's own thread of the worker process (ProcessGroupGloo's worker threads, the
// tcp transport's socket reads and writes), so its copies and reductions take the worker's cores.
#include "sim/src/coll/library.hpp"

namespace dtsim::sim {

CollectiveLibrary library_gloo() {
  CollectiveLibrary gloo{"gloo", "Gloo: ring allreduce at every size (gloo/allreduce.cc)",
                         [](const LibraryCall&, const std::string& forced) {
                           return LibraryChoice{forced.empty() ? "ring" : forced, "-", 1.0, 0};
                         }};
  gloo.runs_on_worker_cores = true;
  return gloo;
}

}  // namespace dtsim::sim
