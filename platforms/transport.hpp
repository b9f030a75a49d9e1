// Transports: how bytes move between nodes (RDMA verbs, host-staged RDMA, kernel TCP) and inside a node
// (shared memory, PCIe, NVLink). Pure description, one row per transport (platforms/src/transports/);
// sim/ turns a row into SimGrid latency/bandwidth factors and per-flow caps. See docs/transports.md.
#pragma once
#include <string>
#include <vector>

namespace dtsim::platforms {

enum class TransportModel {
  IDEAL,        // constant factors: latency x1, bandwidth x protocol_efficiency (dtsim before transports)
  DIRECT,       // one message = one flow; size-dependent factors (eager / rendezvous bands)
  HOST_STAGED,  // a device buffer is copied through pinned host memory in chunks, pipelined with the wire
  SOCKET,       // kernel sockets: size-dependent factors and a rate cap per connection
  MEMORY_COPY,  // intra-node copy between process buffers
  DEVICE_LINK,  // intra-node device path (PCIe peer / NVLink)
  RPC,          // a message layer over kernel TCP (gRPC, ZeroMQ): a software cost per call and per byte
};

// RPC rows are named by a strategy's `ps_transport`, never by a platform's network or intra-node field.
enum class TransportScope { INTER_NODE, INTRA_NODE, ANY, RPC };

// One band of the size-dependent factor curve: sizes >= min_size_B (up to the next band) see the route
// latency x latency_factor and the route bandwidth x protocol_efficiency x bandwidth_scale.
struct FactorBand {
  double min_size_B = 0;
  double latency_factor = 1;
  double bandwidth_scale = 1;  // the last band's is 1: large messages reach protocol_efficiency
};

struct Transport {
  std::string name;         // the key written in platform files
  std::string description;  // one line, shown by --help and `dtsim platform check`
  TransportModel model = TransportModel::IDEAL;
  TransportScope scope = TransportScope::ANY;
  std::vector<FactorBand> bands{{0, 1, 1}};  // ascending min_size_B, the first at 0
  double connection_rate_Bps = 0;   // SOCKET: rate cap of one connection (copy + segment processing); 0 = none
  int default_connections_per_peer = 1;  // SOCKET: connections opened per peer pair
  double chunk_B = 0;               // HOST_STAGED, and DEVICE_LINK crossing CPU sockets: pipeline chunk
  // DEVICE_LINK: fraction of the nominal device link (node.intra.link_bandwidth_Bps) that DMA copies reach,
  // used instead of the network's protocol_efficiency; 0 = use protocol_efficiency.
  double link_efficiency = 0;
  // DEVICE_LINK without peer-to-peer (GPU pairs beyond node.intra.p2p_level): capacity of one socket's host-memory
  // path for device bytes staged through it, both directions sharing it, as a fraction of the device link.
  double host_staging_efficiency = 0;
  // DEVICE_LINK, GPUs that reach the NIC without GPUDirect RDMA: capacity of the node's GPU <-> NIC path
  // through host memory (NCCL's GPU -> host buffer -> NIC and back), both directions and every GPU of the
  // node sharing it, per NIC, as a fraction of the device link; 0 = no such path.
  double nic_host_efficiency = 0;
  double rpc_per_call_s = 0;        // RPC: software time of one call (framing, dispatch), beyond the wire
  double rpc_software_Bps = 0;      // RPC: rate of the serial per-byte work (serialisation copies); 0 = none
  // RPC: server CPU time of one call (HTTP/2 framing, protobuf, completion queue), run on the server
  // process's serving threads and queued across every worker's calls to that server; 0 = none.
  double rpc_server_cpu_per_call_s = 0;
  int rpc_server_threads = 1;       // RPC: threads of one server process that run calls
  std::string source;               // where the constants come from (docs/transports.md, benchmarks/data/transports)

  const FactorBand& band(double bytes) const;  // the band holding a message of `bytes`
  // Multiplier of the route latency for a message of `bytes`.
  double latency_factor(double bytes) const { return band(bytes).latency_factor; }
  // Multiplier of the route's bottleneck bandwidth; tends to link_efficiency when set, else to
  // protocol_efficiency, for large messages.
  double bandwidth_factor(double bytes, double protocol_efficiency) const {
    return (link_efficiency > 0 ? link_efficiency : protocol_efficiency) * band(bytes).bandwidth_scale;
  }
  // RPC: software time of `calls` calls moving `bytes` in all, in series with the wire:
  // calls x rpc_per_call_s + bytes / rpc_software_Bps. 0 for other models.
  double rpc_cost_s(double calls, double bytes) const;
};

// The serving threads of one RPC server process: each call takes per_call_s of one thread, calls run in
// arrival order on the earliest-free thread (list scheduling), so calls from many workers queue.
class RpcServerQueue {
 public:
  RpcServerQueue(int threads, double per_call_s);
  // Admits `calls` calls (rounded to whole calls) arriving at `now_s`; returns when the last one ends
  // (now_s when calls or per_call_s is 0).
  double admit(double now_s, double calls);

 private:
  std::vector<double> free_at_s_;  // per thread: when it finishes its last admitted call
  double per_call_s_;
};

// Host-staged pipeline of `bytes` in chunks of chunk_B through `copies` copy stages (0, 1 or 2: the
// device ends of the transfer) and the wire. Each copy stage of c bytes takes copy_latency_s +
// c / copy_Bps, the wire stage c / wire_Bps. The pipeline takes fill_s + bytes / stage_rate_Bps.
struct StagedPipeline {
  double fill_s = 0;          // sum of one chunk's stage times minus the slowest (pipeline fill and drain)
  double stage_rate_Bps = 0;  // chunk_B / the slowest stage time
  double time_s(double bytes) const { return fill_s + bytes / stage_rate_Bps; }
};
StagedPipeline staged_pipeline(double bytes, double chunk_B, int copies, double copy_latency_s, double copy_Bps,
                               double wire_Bps);

// The table, in the order listed by --help.
const std::vector<Transport>& transports();
// Throws InputError listing the accepted names (of that scope) when `name` is unknown or out of scope.
const Transport& transport_by_name(const std::string& name, TransportScope scope = TransportScope::ANY);
const Transport* transport_by_name_or_null(const std::string& name);
// "rdma, rdma-host-staged, tcp, ideal": names accepted for `scope`, for messages and --help.
std::string transport_names(TransportScope scope);
// One line per transport accepted for `scope`: "  name  description".
std::string transport_help(TransportScope scope);
bool transport_allowed(const Transport& t, TransportScope scope);

// Documented defaults when a platform file leaves the field out (docs/platform-schema.md):
// inter-node by `network.technology` (InfiniBand / Omni-Path / Aries / RoCE -> rdma, Ethernet / GbE /
// TCP -> tcp; "" when no rule matches), intra-node by the intra kind (shm / pcie / nvlink).
std::string default_network_transport(const std::string& technology);
std::string default_intra_transport(const std::string& intra_kind_name);

}  // namespace dtsim::platforms
