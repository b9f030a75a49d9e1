// The collective-library table: one row per library file. Adding a library is one file, one row here
// and its closed-form tests (tests/sim/test_collective_libraries.cpp); docs/collective-libraries.md.
#include <fmt/format.h>

#include <algorithm>

#include "common/errors.hpp"
#include "platforms/device.hpp"
#include "platforms/platform.hpp"
#include "platforms/transport.hpp"
#include "sim/src/coll/library.hpp"
#include "sim/src/platform_builder.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {

CollectiveLibrary library_none();
CollectiveLibrary library_nccl();
CollectiveLibrary library_openmpi();
CollectiveLibrary library_mvapich2();
CollectiveLibrary library_gloo();
CollectiveLibrary library_horovod_host();

const std::vector<CollectiveLibrary>& collective_library_table() {
  static const std::vector<CollectiveLibrary> table{
      library_none(), library_nccl(), library_openmpi(), library_mvapich2(), library_gloo(), library_horovod_host(),
  };
  return table;
}

std::string collective_library_names() {
  std::string out;
  for (const auto& l : collective_library_table()) out += (out.empty() ? "" : ", ") + l.name;
  return out;
}

std::string collective_library_help() {
  std::string out;
  for (const auto& l : collective_library_table()) out += fmt::format("  {}: {}\n", l.name, l.description);
  return out;
}

const CollectiveLibrary& collective_library_by_name(const std::string& name, const std::string& what) {
  for (const auto& l : collective_library_table())
    if (l.name == name) return l;
  throw InputError(fmt::format("{}: unknown collective library '{}' (expected one of: {})", what, name,
                               collective_library_names()));
}

void check_collective_library(const std::string& name, const std::string& what) {
  (void)collective_library_by_name(name, what);
}

double host_ring_traffic_B(double bytes, int ranks) {
  if (ranks < 2) return 0;
  // Bytes moved per payload byte: a kernel copy reads and writes it; a reduction reads two operands and
  // writes one.
  constexpr double SOCKET_COPY_TRAFFIC_PER_B = 2;
  constexpr double REDUCE_TRAFFIC_PER_B = 3;
  const double share = static_cast<double>(ranks - 1) / ranks * bytes;  // one phase's bytes per rank
  const double sent = 2 * share, received = 2 * share;                  // reduce-scatter + allgather
  return (sent + received) * SOCKET_COPY_TRAFFIC_PER_B + share * REDUCE_TRAFFIC_PER_B;
}

LibraryCall library_call(const platforms::Platform& platform, int ranks, int nodes, double bytes) {
  using platforms::IntraNodeKind;
  const auto& intra = platform.node.intra;
  const bool nvlink = intra.kind == IntraNodeKind::NVLINK_HYBRID_CUBE_MESH || intra.kind == IntraNodeKind::NVLINK ||
                      intra.kind == IntraNodeKind::NVSWITCH;
  LibraryCall c;
  c.bytes = bytes;
  c.ranks = ranks;
  c.nodes = std::max(1, nodes);
  c.intra_nvlink = nvlink;
  const double bricks = intra.kind == IntraNodeKind::NVSWITCH ? std::max(1, intra.links_per_gpu)
                        : nvlink                               ? std::max(1, intra.links_per_pair)
                                                               : 1;
  c.intra_bandwidth_Bps = intra.link_bandwidth_Bps * bricks;
  c.inter_bandwidth_Bps =
      platform.network.link_bandwidth_Bps * platform.network.protocol_efficiency * std::max(1, platform.node.nics);
  c.intra_latency_s = intra.latency_s;
  c.inter_latency_s = platform.network.latency_s * std::max(1, platform.network.hops_between_nodes());
  // NCCL 2.7 tuning.cc: LL128 on by default only on Volta/Ampere with NVLink inside the node and, across
  // nodes, a NIC the GPU reaches directly (GPUDirect RDMA: dtsim's `rdma` transport on a GPU platform).
  // The architecture is the device's devices.yaml field (microarchitecture), not its name.
  const platforms::Device* gpu = platforms::DeviceCatalog::builtin().by_name_or_null(platform.node.gpu);
  const bool ll128_gpu = gpu != nullptr && gpu->nccl_ll128_by_default();
  c.ll128_capable = ll128_gpu && nvlink && (c.nodes == 1 || platform.network.transport == "rdma");
  c.nvls_capable = nvswitch_reduces(platform);
  // A GPU reaches host memory over its PCIe link (the NVLink kinds' uplink) at the pcie transport's DMA
  // rate (CUDA bandwidthTest, pinned; docs/transports.md), as the builder's device link does.
  if (platform.node.gpus > 0)
    c.device_host_Bps = platform.node.device_link_Bps() *
                        platforms::transport_by_name("pcie", platforms::TransportScope::INTRA_NODE).link_efficiency;
  // CPU ranks: one core's share of its socket's memory bandwidth (platforms/devices.yaml, with its source).
  if (const platforms::Device* cpu = platforms::DeviceCatalog::builtin().by_name_or_null(platform.node.cpu);
      cpu != nullptr && cpu->is_cpu() && cpu->cores > 0) {
    c.host_core_Bps = cpu->mem_bandwidth_Bps / cpu->cores;
    if (platform.node.gpus == 0) c.rank_core_Bps = c.host_core_Bps;
  }
  return c;
}

void start_library_allreduce(World& world, const CollectiveLibrary& library, const LibraryCall& call,
                             const std::vector<int>& ranks, const std::string& forced, CommMode mode, Done done,
                             LibraryChoice* chosen) {
  const LibraryChoice choice = library.choose(call, forced);
  if (chosen) *chosen = choice;
  const auto& algorithm = collective_by_name("allreduce", choice.algorithm, "collective library " + library.name);
  if (!(choice.bandwidth_efficiency > 0 && choice.bandwidth_efficiency <= 1))
    throw Failure(fmt::format("collective library {}: bandwidth efficiency {} (internal error)", library.name,
                              choice.bandwidth_efficiency));
  const double wire_B = call.bytes / choice.bandwidth_efficiency;
  // Device buffers staged through host memory: every rank copies its buffer out at once (each over its own
  // link, in parallel), the host collective runs, and the result is copied back before the call returns.
  const double copy_s =
      library.stages_device_buffers && call.device_host_Bps > 0 && ranks.size() > 1 ? call.bytes / call.device_host_Bps : 0;
  // Host reductions (every rank at once, each forwarding a block only once it is reduced): after the
  // transfers, before the copy back.
  const double after_s = copy_s + (library.host_reduce_s && ranks.size() > 1 ? library.host_reduce_s(call, choice) : 0);
  // A library running on the worker's cores: each rank's copies and reductions, a computation on its
  // device beside whatever it computes meanwhile (its share of the device while both run).
  const double core_s = library.runs_on_worker_cores && call.rank_core_Bps > 0 && ranks.size() > 1
                            ? host_ring_traffic_B(call.bytes, static_cast<int>(ranks.size())) / call.rank_core_Bps /
                                  std::max(1, call.rank_threads)
                            : 0;
  auto collective = [&world, &algorithm, ranks, wire_B, mode, copy_s, after_s, core_s,
                     done = std::move(done)]() mutable {
    if (core_s > 0)
      for (const int r : ranks) world.compute(r, core_s, [] {});
    if (copy_s <= 0 && after_s <= 0) {
      start_collective(world, algorithm, ranks, wire_B, mode, std::move(done));
      return;
    }
    auto run = [&world, &algorithm, ranks, wire_B, mode, after_s, done = std::move(done)]() mutable {
      start_collective(world, algorithm, ranks, wire_B, mode, [&world, after_s, done = std::move(done)]() mutable {
        if (after_s > 0) {
          world.after(after_s, std::move(done));
        } else {
          done();
        }
      });
    };
    if (copy_s > 0) {
      world.after(copy_s, std::move(run));
    } else {
      run();
    }
  };
  if (ranks.size() < 2 || choice.call_latency_s <= 0) {
    collective();
    return;
  }
  world.after(choice.call_latency_s, std::move(collective));
}

void start_library_collective(World& world, const CollectiveLibrary& library, const std::string& operation,
                              const LibraryCall& call, const std::vector<int>& ranks, const std::string& forced,
                              CommMode mode, Done done, const std::string& what) {
  if (operation == "allreduce") {
    start_library_allreduce(world, library, call, ranks, forced, mode, std::move(done));
    return;
  }
  const CollectiveAlgorithm* algorithm = nullptr;
  for (const auto& a : collective_table())
    if (a.operation == operation) {
      algorithm = &a;
      break;
    }
  if (!algorithm) {
    std::string known;
    for (const auto& op : collective_operations()) known += (known.empty() ? "" : ", ") + op;
    throw InputError(fmt::format("{}: unknown collective operation '{}' (expected one of: {})", what, operation, known));
  }
  const LibraryChoice ring = library.choose(call, "ring");
  if (!(ring.bandwidth_efficiency > 0 && ring.bandwidth_efficiency <= 1))
    throw Failure(fmt::format("collective library {}: bandwidth efficiency {} (internal error)", library.name,
                              ring.bandwidth_efficiency));
  const double wire_B = call.bytes / ring.bandwidth_efficiency;
  auto run = [&world, algorithm, ranks, wire_B, mode, done = std::move(done)]() mutable {
    start_collective(world, *algorithm, ranks, wire_B, mode, std::move(done));
  };
  if (ranks.size() < 2 || ring.call_latency_s <= 0) {
    run();
    return;
  }
  world.after(ring.call_latency_s, std::move(run));
}

}  // namespace dtsim::sim
