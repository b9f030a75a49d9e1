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
// Client side: no published per-call client time for C++ gRPC is in the calibration set, so the client's
// per-call term is 0 (each call still pays the transport's TCP latency band).
constexpr double GRPC_PER_CALL_S = 0;
// Server side: grpc_bench's helloworld unary RPC against a C++ gRPC 1.41 server (cpp_grpc_mt) held to one
// CPU of an i7-8750H served 40,744 calls/s at 101.56% CPU (Tradias/asio-grpc README, "1 CPU server"; the
// 2-CPU row, 83,662 calls/s at 200.63%, gives 24.0 us): 24.9 us of server CPU per call.
constexpr double GRPC_BENCH_1CPU_CALLS_PER_S = 40744;
constexpr double GRPC_BENCH_1CPU_CPU_FRACTION = 1.0156;
constexpr double GRPC_SERVER_CPU_PER_CALL_S = GRPC_BENCH_1CPU_CPU_FRACTION / GRPC_BENCH_1CPU_CALLS_PER_S;
// TensorFlow's worker service (which a parameter server runs) polls its completion queues with
// GrpcWorkerServiceOptions::num_serving_threads = 8 threads (grpc_worker_service.h).
constexpr int TF_GRPC_SERVING_THREADS = 8;

Transport grpc() {
  Transport t = tcp();  // gRPC runs over kernel TCP: the wire's bands and per-connection cap
  t.name = "grpc";
  t.description = "gRPC over TCP (TensorFlow >= 1.3 parameter servers): serial 2.5 GB/s per-byte stage per call, 25 us server CPU per call on 8 threads";
  t.model = TransportModel::RPC;
  t.scope = TransportScope::RPC;
  t.rpc_per_call_s = GRPC_PER_CALL_S;
  t.rpc_software_Bps = GRPC_SOFTWARE_BPS;
  t.rpc_server_cpu_per_call_s = GRPC_SERVER_CPU_PER_CALL_S;
  t.rpc_server_threads = TF_GRPC_SERVING_THREADS;
  t.source = "TensorFlow issue #6116 (RecvTensor 800 MB/s over 10 GbE after the gRPC upgrade, 2017-08); "
             "grpc_bench C++ unary server CPU per call (Tradias/asio-grpc README); docs/transports.md";
  return t;
}

Transport grpc_2016() {
  Transport t = grpc();
  t.name = "grpc-2016";
  t.description = "gRPC over TCP as in TensorFlow 1.0-1.2: serial 0.9 GB/s per-byte stage per call, 25 us server CPU per call on 8 threads";
  t.rpc_software_Bps = GRPC_2016_SOFTWARE_BPS;
  t.source = "TensorFlow issue #6116 (RecvTensor 0.9 GB/s worker to worker over loopback, Xeon E5-2630 v3, "
             "2016-12); docs/transports.md";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
