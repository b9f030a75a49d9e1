// No library model: the strategy's algorithm as named, at the fabric's own efficiency, nothing added
// (what dtsim simulated before collective libraries). `allreduce-auto` runs the ring.
#include "sim/src/coll/library.hpp"

namespace dtsim::sim {

CollectiveLibrary library_none() {
  return {"none", "no library model: the strategy's algorithm (ring for allreduce-auto), nothing added",
          [](const LibraryCall&, const std::string& forced) {
            return LibraryChoice{forced.empty() ? "ring" : forced, "-", 1.0, 0};
          }};
}

}  // namespace dtsim::sim
