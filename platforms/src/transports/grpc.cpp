// Transport "grpc" / "grpc-2016": gRPC over kernel TCP as TensorFlow's parameter servers use it (one
// RecvTensor call per variable). The wire is the platform's; gRPC adds serial per-byte work (protobuf
// and HTTP/2 framing, the receive-side copy out of the ByteBuffer) and a cost per call.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {

// 10 GbE TCP payload rate: 1448 payload bytes per 1538-byte frame (1500 MTU, TCP timestamps) x 10 Gb/s.
constexpr double TEN_GBE_TCP_PAYLOAD_BPS = 10e9 / 8 * 1448.0 / 1538.0;
// TensorFlow issue #6116 "grpc RecvTensor is slow": after TF's gRPC upgrade (TF 1.3, Aug 2017) a worker
// fetching a 100 MB tensor from another worker over 10 GbE reached 800 MB/s. In series with the wire,
// 1/0.8e9 = 1/wire + 1/software: the software stage alone runs at 2.5 GB/s.
constexpr double GRPC_MEASURED_10GBE_BPS = 800e6;
constexpr double GRPC_SOFTWARE_BPS = 1.0 / (1.0 / GRPC_MEASURED_10GBE_BPS - 1.0 / TEN_GBE_TCP_PAYLOAD_BPS);
// The same issue, Dec 2016 (TF 1.0-1.2, before the upgrade): worker-to-worker RecvTensor over loopback
// (no wire) at 0.9 GB/s on a Xeon E5-2630 v3 (sess.run(add_op.op), 100 MB): the software stage itself.
constexpr double GRPC_2016_SOFTWARE_BPS = 0.9e9;
// No published per-call figure for C++ gRPC is in the calibration set yet (grpc.io's dashboard is not
// archived): the per-call term is 0 and each call costs the transport's TCP latency band only.
constexpr double GRPC_PER_CALL_S = 0;

Transport grpc() {
  Transport t = tcp();  // gRPC runs over kernel TCP: the wire's bands and per-connection cap
  t.name = "grpc";
  t.description = "gRPC over TCP (TensorFlow >= 1.3 parameter servers): serial 2.5 GB/s per-byte stage per call";
  t.model = TransportModel::RPC;
  t.scope = TransportScope::RPC;
  t.rpc_per_call_s = GRPC_PER_CALL_S;
  t.rpc_software_Bps = GRPC_SOFTWARE_BPS;
  t.source = "TensorFlow issue #6116 (RecvTensor 800 MB/s over 10 GbE after the gRPC upgrade, 2017-08); "
             "docs/transports.md";
  return t;
}

Transport grpc_2016() {
  Transport t = grpc();
  t.name = "grpc-2016";
  t.description = "gRPC over TCP as in TensorFlow 1.0-1.2: serial 0.9 GB/s per-byte stage per call";
  t.rpc_software_Bps = GRPC_2016_SOFTWARE_BPS;
  t.source = "TensorFlow issue #6116 (RecvTensor 0.9 GB/s worker to worker over loopback, Xeon E5-2630 v3, "
             "2016-12); docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
