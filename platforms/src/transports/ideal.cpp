// Transport "ideal": the fabric dtsim simulated before transports (CM02, constant factors).
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {
Transport ideal() {
  Transport t;
  t.name = "ideal";
  t.description = "no transport cost: route latency x1, bandwidth x protocol_efficiency at every size";
  t.model = TransportModel::IDEAL;
  t.scope = TransportScope::ANY;
  t.source = "none: the reference against which the other transports' costs are measured";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
