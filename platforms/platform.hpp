// A cluster described by a YAML platform file (schema in docs/platform-schema.md): nodes, devices per
// node, intra-node links, network topology and storage. Pure description: sim/ builds it in SimGrid.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "platforms/device.hpp"

namespace dtsim::platforms {

enum class IntraNodeKind {
  SHARED_MEMORY,             // CPU processes exchanging through memory
  PCIE,                      // GPUs behind PCIe switches, host bridge to the NIC
  NVLINK_HYBRID_CUBE_MESH,   // DGX-1 style 8-GPU NVLink mesh (plus PCIe to the NIC)
  NVLINK,                    // any number of GPUs, explicit NVLink pairs with brick counts (plus PCIe)
  NVSWITCH,                  // every GPU's bricks into NVSwitches: all-to-all at the per-GPU NVLink bandwidth
};

// GPU pairs that move bytes peer to peer on a pcie node, nearest first (NCCL's path types).
enum class P2pLevel {
  SWITCH,       // "pxb": only GPUs under a common PCIe switch
  HOST_BRIDGE,  // "phb": also through their socket's host bridge (root complex)
  SYSTEM,       // "sys": also across CPU sockets (QPI/UPI)
};
const char* p2p_level_name(P2pLevel level);
// NCCL 2.7's rule (src/graph/paths.cc, ncclTopoCheckP2p), the default when a file does not state it:
// Intel CPUs older than Skylake-SP allow P2P only under a switch, later Intel CPUs through the host
// bridge, AMD CPUs across sockets (NCCL's default PATH_SYS, which 2.7 narrows only on Intel and ARM);
// a CPU whose microarchitecture is not stated, through the host bridge.
P2pLevel default_p2p_level(const Device& cpu);

// One direct NVLink connection of an `nvlink` node: GPUs a and b joined by `bricks` links.
struct NvlinkPair {
  int a = 0, b = 0, bricks = 1;
};

struct IntraNode {
  IntraNodeKind kind = IntraNodeKind::SHARED_MEMORY;
  double link_bandwidth_Bps = 0;  // per direction: PCIe link, one NVLink brick, or memory copy bandwidth
  double latency_s = 0;
  int devices_per_switch = 0;     // PCIe: GPUs sharing one switch uplink
  double uplink_bandwidth_Bps = 0;  // PCIe: switch to root complex; NVLink: the PCIe path to the NIC
  int links_per_pair = 1;         // NVLink bricks between directly connected GPUs
  // addition: transport of intra-node bytes (platforms/transport.hpp, INTRA_NODE scope). Files default
  // it from `kind` (shm / pcie / nvlink); "ideal" for platforms built in code.
  std::string transport = "ideal";
  std::vector<NvlinkPair> pairs;  // nvlink: the direct connections (any other pair goes through PCIe)
  int links_per_gpu = 0;          // nvswitch: NVLink bricks from each GPU into the switches
  // pcie: how far apart two GPUs of a node may be and still move bytes peer to peer (NCCL's
  // NCCL_P2P_LEVEL words); a pair beyond it stages through host memory (docs/transports.md).
  P2pLevel p2p_level = P2pLevel::HOST_BRIDGE;
  bool p2p_level_stated = false;  // false: the default rule of default_p2p_level chose it
  // pcie with network transport rdma: the GPUs' bytes reach the NIC by GPUDirect RDMA (true), or
  // through their socket's host memory (false, the default): NCCL sends by GPUDirect RDMA only from
  // GPUs with NVLink (pre-Ampere) and receives by it only when GPU and NIC share a PCIe switch
  // (docs/transports.md "GPU to NIC").
  bool gpudirect_rdma = false;
  std::string source;
  std::string assumptions;        // figures assumed, and why
};

enum class TopologyKind { STAR, FAT_TREE, DRAGONFLY, TORUS };

struct FatTree {
  int levels = 2;
  std::vector<int> down;      // children per switch, per level (SimGrid fat-tree notation)
  std::vector<int> up;        // parents per node/switch, per level
  std::vector<int> parallel;  // parallel links, per level
  double oversubscription = 1.0;  // derived: downlink / uplink capacity at the leaf
  long capacity() const;          // node slots: the product of `down`
};

struct Dragonfly {
  int groups = 1, chassis_per_group = 1, routers_per_chassis = 1, nodes_per_router = 1;
  int group_links = 1, chassis_links = 1, router_links = 1;  // parallel links at each level
  double global_link_bandwidth_Bps = 0;  // one optical group-to-group link; 0: link_bandwidth_Bps
  long capacity() const;  // node slots: groups x chassis x routers x nodes per router
};

struct Torus {
  std::vector<int> dims;
  long capacity() const;  // node slots: the product of `dims`
};

struct Network {
  std::string technology;           // "EDR InfiniBand", "10 GbE", "Cray Aries", ...
  TopologyKind topology = TopologyKind::STAR;
  double link_bandwidth_Bps = 0;    // per direction, per NIC port (signalling rate)
  double latency_s = 0;             // one hop, end to end small-message latency / hops
  double protocol_efficiency = 1.0; // payload fraction of the link rate reached by large messages
  double per_message_overhead_s = 0;  // software/NIC overhead per message (RDMA small, TCP larger)
  double backbone_bandwidth_Bps = 0;  // STAR: the switch's aggregate capacity (0 = non-blocking)
  // addition: transport of inter-node bytes (platforms/transport.hpp, INTER_NODE scope). Files default it
  // from `technology` (docs/platform-schema.md); "ideal" for platforms built in code.
  std::string transport = "ideal";
  int connections_per_peer = 0;       // addition: tcp connections per peer pair; 0 = the transport's default
  FatTree fat_tree;
  Dragonfly dragonfly;
  Torus torus;
  std::string source;
  std::string assumptions;  // figures assumed, and why
  // End-to-end time of one message of `bytes` between two nodes on an idle network with
  // `hops` links: per_message_overhead_s + hops x latency_s + bytes / (link_bandwidth_Bps x efficiency).
  double message_time_s(double bytes, int hops) const;
  int hops_between_nodes() const;  // links on the longest minimal node-to-node path
};

enum class StorageKind { NONE, LOCAL_SSD, PARALLEL_FS };

struct Storage {
  StorageKind kind = StorageKind::NONE;
  double read_bandwidth_Bps = 0;   // LOCAL_SSD: per node; PARALLEL_FS: aggregate, shared by all nodes
  double metadata_ops_per_s = 0;   // PARALLEL_FS: file opens per second, shared
  double latency_s = 0;
  std::string source;
  std::string assumptions;  // figures assumed, and why
};

struct Node {
  std::string cpu;            // device name of one CPU socket
  int cpu_sockets = 1;
  std::string gpu;            // device name, empty for CPU-only nodes
  int gpus = 0;
  double memory_B = 0;
  int nics = 1;
  IntraNode intra;
  std::string source;  // where the node figures come from
  // The CPU socket GPU `gpu` hangs off: GPUs split evenly and in order across cpu_sockets.
  int gpu_socket(int gpu) const;
  // The PCIe switch GPU `gpu` sits under (pcie / NVLink kinds with devices_per_switch), else -1.
  int gpu_switch(int gpu) const;
  // A device's own link toward the host (bytes/s per direction): the PCIe uplink on the NVLink kinds,
  // whose intra link is NVLink, the intra link otherwise.
  double device_link_Bps() const;
  // pcie: GPUs a and b (a != b) are farther apart than intra.p2p_level allows, so their bytes stage
  // through host memory (when the intra transport stages at all: Platform::gpus_staged).
  bool beyond_p2p_level(int a, int b) const;
};

struct Platform {
  std::string name;
  std::string description;
  std::string file;  // where it was loaded from
  int nodes = 1;     // maximum node count of the cluster
  Node node;
  Network network;
  Storage storage;
  // The collective library the site documents for this cluster (`collective_library:`, a name of the
  // library table in sim/, checked there); "" = dtsim's default rule. `collective_library_at` is the
  // field's "file:line" for errors.
  std::string collective_library;
  std::string collective_library_at;
  // Sources of figures written as {value, source} in the file, keyed by field path ("network.latency_s").
  std::map<std::string, std::string> figure_sources;
  // Optional fields the file leaves out, keyed by field path, each with the value taken and its rule
  // ("node.intra.transport" -> "nvlink (by intra kind nvlink)"); `dtsim platform check` prints them.
  std::map<std::string, std::string> defaults_used;
  // Figures the file states that no catalogued hardware reaches: one sentence each, naming the field,
  // the value and the likely unit slip. load_platform prints each once per process to stderr as a
  // warning; `dtsim platform check` lists them.
  std::vector<std::string> warnings;

  bool has_gpus() const { return node.gpus > 0; }
  // Default workers per node: GPUs per node, or 1 for CPU nodes.
  int default_workers_per_node() const { return has_gpus() ? node.gpus : 1; }
  // The device a worker runs on (GPU, or one CPU socket for CPU nodes).
  const Device& worker_device() const;
  // Bisection bandwidth of the inter-node network at full size, bytes/s per direction.
  double bisection_bandwidth_Bps() const;
  // FP32 peak of one node (its GPUs, or its CPU sockets for CPU-only nodes) and of the whole cluster.
  double node_peak_flops() const;
  double total_peak_flops() const { return node_peak_flops() * nodes; }
  const Device& cpu_device() const;  // one CPU socket of a node
  // Rate of the node's GPU <-> NIC path through host memory (bytes/s, both directions and every GPU
  // sharing it), or 0 when GPUs reach the NIC directly. Non-zero for pcie intra-node without
  // `gpudirect_rdma`, network transport rdma and an intra transport that models it (its
  // nic_host_efficiency x the device link x the NIC ports; NCCL's rules for GPUDirect RDMA,
  // docs/transports.md "GPU to NIC").
  double gpu_nic_host_Bps() const;
  bool gpu_nic_via_host_memory() const { return gpu_nic_host_Bps() > 0; }
  // GPUs a and b of one node move bytes through host memory (D2H copy, a socket's host-memory path,
  // H2D copy): a pcie pair beyond intra.p2p_level, on an intra transport that stages device bytes
  // (host_staging_efficiency > 0). The one decision the builder's routes and the flow plans share.
  bool gpus_staged(int a, int b) const;
  bool any_gpus_staged() const;  // for some pair of the node's GPUs
};

// The names used in platform files ("pcie", "fat-tree", "parallel-fs", ...).
std::string to_string(IntraNodeKind kind);
std::string to_string(TopologyKind kind);
std::string to_string(StorageKind kind);

// Names of the shipped platforms (<data_dir>/platforms/*.yaml except devices.yaml).
std::vector<std::string> platform_names();
// A shipped platform name or a path to a YAML file. Throws InputError naming file, line and field.
Platform load_platform(const std::string& name_or_file);
// The path a shipped name resolves to, or the argument itself when it names a file.
std::string platform_path(const std::string& name_or_file);

}  // namespace dtsim::platforms
