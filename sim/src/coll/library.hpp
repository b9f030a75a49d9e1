// Internal to sim/: the collective-library table. A library (NCCL, Open MPI's tuned component,
// MVAPICH2, Gloo) picks, for each allreduce call, the algorithm of the collective table and, where it
// has them, a protocol with its bandwidth efficiency and per-call latency, by message size and
// rank/node count as the real library does. One file per library, one row in libraries.cpp;
// sources and thresholds in docs/collective-libraries.md.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "platforms/platform.hpp"
#include "sim/src/coll/collective.hpp"

namespace dtsim::sim {

// Software that moves GPU buffers through the CUDA driver goes peer to peer wherever the driver grants
// peer access (cudaDeviceCanAccessPeer): under a PCIe switch or through one socket's root complex, not
// across QPI/UPI on Intel hosts, where the driver or the library stages through host memory. So do
// CUDA-aware MPI (CUDA IPC: Open MPI's smcuda BTL, MVAPICH2's MV2_CUDA_IPC, on by default) and the
// frameworks' own cross-device copies (cudaMemcpyPeer: TensorFlow's parameter-server variants).
inline constexpr platforms::P2pLevel CUDA_PEER_P2P_LEVEL = platforms::P2pLevel::HOST_BRIDGE;

// What a library sees of one call: the communicator and the hardware it detected at init.
struct LibraryCall {
  double bytes = 0;
  int ranks = 1;
  int nodes = 1;
  double intra_bandwidth_Bps = 0;  // one rank's path to its intra-node peers (NVLink bricks, PCIe, memory)
  double inter_bandwidth_Bps = 0;  // one node's payload bandwidth to the network (all NICs)
  double intra_latency_s = 0;      // one intra-node step's latency on the platform (what a simulated flow pays)
  double inter_latency_s = 0;      // one inter-node step's latency on the platform (its longest node-to-node path)
  bool intra_nvlink = false;       // GPUs joined by NVLink (NCCL's NVLINK hardware class)
  bool ll128_capable = false;      // NCCL enables LL128 by default (Volta/Ampere, NVLink, GPUDirect NIC)
  double device_host_Bps = 0;      // one GPU's copy rate to or from host memory (its PCIe link's DMA); 0: CPU ranks
  bool nvls_capable = false;       // the NVSwitch reduces in the switch (NVLink SHARP: Hopper, third-generation NVSwitch)
  // CPU ranks: the memory bandwidth of one core (the socket's over its cores) and the compute threads of a
  // rank, for a library whose collective runs on the worker's cores (runs_on_worker_cores); 0 / 1 on GPUs.
  double rank_core_Bps = 0;
  int rank_threads = 1;
  // Any node whose CPU the catalog knows: one core's share of its socket's memory bandwidth, what a
  // single-threaded host reduction or memcpy (MPI's ompi_op_reduce, Horovod's fusion memcpy) runs at on
  // GPU and CPU nodes alike; 0: CPU not in the catalog.
  double host_core_Bps = 0;
  int ranks_per_node() const { return nodes > 0 ? (ranks + nodes - 1) / nodes : ranks; }
};

// The library's decision for one call.
struct LibraryChoice {
  std::string algorithm;              // a name of the collective table's allreduce rows ("ring", "tree", "rd", ...)
  std::string protocol = "-";         // NCCL: LL, LL128 or Simple; "-" where the library has none
  double bandwidth_efficiency = 1.0;  // payload fraction of the bandwidth the protocol reaches
  double call_latency_s = 0;          // software latency the library adds once per call
};

struct CollectiveLibrary {
  std::string name;
  std::string description;  // one line for --help and docs
  // The choice for `call`; `forced` is the algorithm the strategy names ("" = the library picks).
  std::function<LibraryChoice(const LibraryCall& call, const std::string& forced)> choose;
  // PCIe GPU nodes whose file does not state node.intra.p2p_level: how far apart two GPUs may be and
  // still exchange peer to peer under this library; empty = the platform's default, NCCL 2.7's rule
  // (docs/transports.md "P2P level").
  std::optional<platforms::P2pLevel> gpu_p2p_level = std::nullopt;
  // GPU buffers are reduced in host memory: the whole buffer is copied device to host before the
  // host collective and back after it, synchronously (Open MPI's coll/cuda component).
  bool stages_device_buffers = false;
  // The collective runs in a thread of each worker process (Gloo's), so on CPU ranks its copies and
  // reductions take the worker's own cores: each rank's memory traffic (host_ring_traffic_B) is charged as
  // a computation on its device at one core's bandwidth, sharing the device with the backward it overlaps.
  bool runs_on_worker_cores = false;
  // The framework, not the library, stages GPU tensors through host memory and hands the library host
  // buffers (Horovod built without GPU operations; lib_horovod_host.cpp): the collective runs no kernel on
  // the GPU, so it does not slow the backward it overlaps, and the framework's fusion buffer is host
  // memory, so the fusion copies are memcpys at LibraryCall::host_core_Bps.
  bool framework_stages_to_host = false;
  // Seconds a call's reductions on the host CPU add to it, serially with its transfers (Open MPI's ring
  // reduces each received block before forwarding it); empty: nothing charged (the GPU libraries reduce on
  // the GPU, within the modelled bandwidth).
  std::function<double(const LibraryCall& call, const LibraryChoice& choice)> host_reduce_s = nullptr;
};

// Memory traffic of one rank of a ring allreduce of `bytes` over `ranks` ranks run by the CPU over TCP
// sockets (Gloo's ring: gloo/allreduce.cc; tcp transport): every byte sent or received is copied once
// between the user buffer and the socket by the kernel (read + write), and every received reduce-scatter
// byte is added into the rank's buffer (read both, write one).
double host_ring_traffic_B(double bytes, int ranks);

const std::vector<CollectiveLibrary>& collective_library_table();
// The library `name`, or InputError naming `what` and listing the names.
const CollectiveLibrary& collective_library_by_name(const std::string& name, const std::string& what);

// The call a library sees on `platform` for `bytes` over `ranks` ranks on `nodes` nodes.
LibraryCall library_call(const platforms::Platform& platform, int ranks, int nodes, double bytes);

// Starts one allreduce as the library runs it: the library's call latency, then the chosen algorithm
// over `ranks` with bytes / efficiency on the wire (a library that stages device buffers copies them
// to host memory first and back after, bytes / device_host_Bps each; a library with host_reduce_s adds
// its host reductions before the copy back). `chosen` receives the decision.
void start_library_allreduce(World& world, const CollectiveLibrary& library, const LibraryCall& call,
                             const std::vector<int>& ranks, const std::string& forced, CommMode mode, Done done,
                             LibraryChoice* chosen = nullptr);

// Starts one collective `operation` ("allreduce", "reduce-scatter", "allgather", "broadcast", "alltoall") over
// `ranks` as the library runs it. Allreduce: start_library_allreduce. The others run the operation's
// algorithm of the collective table (one each: NCCL runs reduce-scatter and allgather on rings only, and
// all-to-all as grouped point-to-point), on the protocol, bandwidth efficiency and call latency the library
// picks for a ring allreduce of the same bytes (NCCL's tuner applies one protocol model to every ring
// collective; docs/collective-libraries.md). InputError naming `what` for an unknown operation.
void start_library_collective(World& world, const CollectiveLibrary& library, const std::string& operation,
                              const LibraryCall& call, const std::vector<int>& ranks, const std::string& forced,
                              CommMode mode, Done done, const std::string& what);

}  // namespace dtsim::sim
