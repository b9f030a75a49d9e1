// Transport "shm": intra-node copy between process buffers (CMA / XPMEM single copy). Not calibrated
// yet (no published curve in benchmarks/data/transports): Hockney with the platform's node.intra figures.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {
Transport shm() {
  Transport t;
  t.name = "shm";
  t.description = "intra-node copy between process buffers (CMA / XPMEM single copy)";
  t.model = TransportModel::MEMORY_COPY;
  t.scope = TransportScope::INTRA_NODE;
  t.source = "none yet: one band (latency x1, bandwidth x protocol_efficiency); docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
