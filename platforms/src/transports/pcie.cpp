// Transport "pcie": intra-node device path over PCIe (peer-to-peer under a switch, else through the host). Not calibrated
// yet (no published curve in benchmarks/data/transports): Hockney with the platform's node.intra figures.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {
Transport pcie() {
  Transport t;
  t.name = "pcie";
  t.description = "intra-node device path over PCIe (peer-to-peer under a switch, else through the host)";
  t.model = TransportModel::DEVICE_LINK;
  t.scope = TransportScope::INTRA_NODE;
  t.source = "none yet: one band (latency x1, bandwidth x protocol_efficiency); docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
