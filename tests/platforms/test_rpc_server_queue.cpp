// Closed-form checks of RpcServerQueue (the serving threads of one parameter server) and of the gRPC
// row's server-side constants.
#include <catch2/catch.hpp>

#include "platforms/transport.hpp"

using namespace dtsim;
using platforms::RpcServerQueue;

TEST_CASE("platforms::RpcServerQueue: one caller pays exactly N calls x the per-call cost", "[platforms][rpc]") {
  RpcServerQueue q(1, 25e-6);
  CHECK(q.admit(1.0, 10) == Approx(1.0 + 10 * 25e-6));
  // An idle server later: no wait left from the first batch.
  CHECK(q.admit(2.0, 3) == Approx(2.0 + 3 * 25e-6));
  // Calls are whole: 2.6 calls run as 3.
  RpcServerQueue r(1, 1e-3);
  CHECK(r.admit(0, 2.6) == Approx(3e-3));
}

TEST_CASE("platforms::RpcServerQueue: W callers at once on one thread queue to W x the cost", "[platforms][rpc]") {
  const double c = 25e-6;
  const int workers = 16;
  RpcServerQueue q(1, c);
  double last = 0;
  for (int w = 0; w < workers; ++w) {
    const double end = q.admit(0.5, 1);
    CHECK(end == Approx(0.5 + (w + 1) * c));  // each waits for every earlier caller
    last = end;
  }
  CHECK(last == Approx(0.5 + workers * c));
  // A call arriving while the queue is busy starts when the thread frees, not at its arrival.
  CHECK(q.admit(0.5 + c, 1) == Approx(0.5 + (workers + 1) * c));
}

TEST_CASE("platforms::RpcServerQueue: k threads serve k callers at once, the (k+1)-th waits one call",
          "[platforms][rpc]") {
  const double c = 1e-3;
  RpcServerQueue q(8, c);
  for (int w = 0; w < 8; ++w) CHECK(q.admit(0, 1) == Approx(c));
  CHECK(q.admit(0, 1) == Approx(2 * c));
  // One batch larger than the pool: ceil(calls / threads) rounds.
  RpcServerQueue b(8, c);
  CHECK(b.admit(0, 20) == Approx(3 * c));
}

TEST_CASE("platforms::RpcServerQueue: no calls or no cost takes no time", "[platforms][rpc]") {
  RpcServerQueue off(8, 0);
  CHECK(off.admit(3.0, 100) == 3.0);
  RpcServerQueue q(1, 1e-3);
  CHECK(q.admit(3.0, 0) == 3.0);
}

TEST_CASE("platforms::Transport: grpc's server CPU per call is grpc_bench's 1-CPU C++ row", "[platforms][rpc]") {
  const auto& g = platforms::transport_by_name("grpc", platforms::TransportScope::RPC);
  CHECK(g.rpc_server_cpu_per_call_s == Approx(1.0156 / 40744));  // ~24.9 us
  CHECK(g.rpc_server_threads == 8);
  // The 2-CPU row of the same table agrees within 5%.
  CHECK(g.rpc_server_cpu_per_call_s == Approx(2.0063 / 83662).epsilon(0.05));
  // ZeroMQ (ps-lite) has no server-side figure: no server queue.
  CHECK(platforms::transport_by_name("zeromq", platforms::TransportScope::RPC).rpc_server_cpu_per_call_s == 0);
}
