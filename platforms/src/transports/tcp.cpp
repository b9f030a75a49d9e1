// Transport "tcp": kernel TCP sockets. One connection moves at most what one core's copy and segment
// processing sustain; NCCL's socket transport opens NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD per peer.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {

// Single-stream TCP on a tuned 100 GbE host: 15-35 Gb/s (ESnet fasterdata, "Performance expectations
// for a 100G host", 2024); the midpoint 25 Gb/s (benchmarks/fit_transports.py).
constexpr double TCP_CONNECTION_RATE_BPS = 3.125e9;
// NCCL defaults NCCL_SOCKET_NTHREADS=1, NCCL_NSOCKS_PERTHREAD=1 (NCCL environment variable docs).
constexpr int TCP_DEFAULT_CONNECTIONS = 1;
// Fitted by benchmarks/fit_transports.py on the osu_latency curve of Open MPI over TCP sockets on AWS
// EC2 (osu_points.csv; mean error 4.0%, worst 25.5% at 4 MiB): a step at 64 KiB (rendezvous).
constexpr double TCP_RENDEZVOUS_MIN_B = 65536;
const std::vector<FactorBand> TCP_BANDS = {
    {0, 1.007, 0.343},
    {TCP_RENDEZVOUS_MIN_B, 4.017, 1.0},
};

Transport tcp() {
  Transport t;
  t.name = "tcp";
  t.description = "kernel TCP sockets: per-connection rate cap 3.1 GB/s, connections_per_peer connections "
                  "(NCCL NSOCKS_PERTHREAD x SOCKET_NTHREADS, default 1)";
  t.model = TransportModel::SOCKET;
  t.scope = TransportScope::INTER_NODE;
  t.bands = TCP_BANDS;
  t.connection_rate_Bps = TCP_CONNECTION_RATE_BPS;
  t.default_connections_per_peer = TCP_DEFAULT_CONNECTIONS;
  t.source = "osu_latency of Open MPI over TCP on AWS EC2 (bands); ESnet fasterdata (single stream 15-35 Gb/s on a 100G host); Hurwitz & Feng HOTI 2003 (10GbE "
             "20 us, 4 Gb/s); NCCL env docs (NSOCKS_PERTHREAD, SOCKET_NTHREADS)";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
