// Transport "nvlink": intra-node NVLink between GPUs (PCIe to host and NIC). Not calibrated
// yet (no published curve in benchmarks/data/transports): Hockney with the platform's node.intra figures.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {
Transport nvlink() {
  Transport t;
  t.name = "nvlink";
  t.description = "intra-node NVLink between GPUs (PCIe to host and NIC)";
  t.model = TransportModel::DEVICE_LINK;
  t.scope = TransportScope::INTRA_NODE;
  t.source = "none yet: one band (latency x1, bandwidth x protocol_efficiency); docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
