// Transport "zeromq": ZeroMQ over kernel TCP as MXNet's ps-lite uses it (ZMQVan). ps-lite hands its
// buffers to zmq_msg_init_data and wraps received messages without a copy, so the only software cost
// beyond TCP is ZeroMQ's per-message processing.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {

// zeromq.org "ØMQ (version 0.2) tests" (Intel Low Latency Lab, 10 GbE): a single message stream
// sustains ~2.6 million messages/s, so one message costs 1/2.6e6 s of the sender's time. The same
// tests' latency is TCP's ("ØMQ (version 0.1) tests": the difference is "almost unmeasurable").
constexpr double ZMQ_MESSAGES_PER_S = 2.6e6;
// ps-lite's ZmqSendMsg sends one call as a meta frame plus its data frames: keys, values, lengths.
constexpr double ZMQ_FRAMES_PER_PSLITE_CALL = 4;

Transport zeromq() {
  Transport t = tcp();
  t.name = "zeromq";
  t.description = "ZeroMQ over TCP (MXNet ps-lite): zero-copy frames, 4 frames x 0.38 us per call beyond TCP";
  t.model = TransportModel::RPC;
  t.scope = TransportScope::RPC;
  t.rpc_per_call_s = ZMQ_FRAMES_PER_PSLITE_CALL / ZMQ_MESSAGES_PER_S;
  t.rpc_software_Bps = 0;
  t.source = "zeromq.org results:0mq-tests-v02 (2.6 M msg/s single stream, 10 GbE) and results:0mq-tests "
             "(latency equal to TCP); ps-lite src/zmq_van.h (zero-copy send and receive; meta + keys + values + lengths frames)";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
