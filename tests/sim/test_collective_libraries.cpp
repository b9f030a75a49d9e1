// Tests of the collective-library table (sim/src/coll/library.hpp): each library's choice against its
// documented thresholds, NCCL's model in closed form, and a protocol's simulated cost on a uniform network.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/errors.hpp"
#include "platforms/transport.hpp"
#include "sim/src/coll/library.hpp"
#include "sim/src/library_resolution.hpp"
#include "sim/training.hpp"
#include "tests/sim/world_test_support.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace dtsim::sim {
double nccl_model_time_s(const LibraryCall& c, int algorithm, int protocol);  // lib_nccl.cpp
}

namespace {
constexpr int TREE = 0, RING = 1;
constexpr int LL = 0, SIMPLE = 2;
constexpr double US = 1e-6;

LibraryCall call(double bytes, int ranks, int nodes, double bw_Bps) {
  LibraryCall c;
  c.bytes = bytes;
  c.ranks = ranks;
  c.nodes = nodes;
  c.intra_bandwidth_Bps = 1000 * bw_Bps;
  c.inter_bandwidth_Bps = bw_Bps;
  return c;
}

LibraryChoice choose(const std::string& library, const LibraryCall& c, const std::string& forced = "") {
  return collective_library_by_name(library, "test").choose(c, forced);
}
}  // namespace

TEST_CASE("sim::CollectiveLibrary: NCCL's model in closed form (tuning.cc constants)", "[sim][coll][library]") {
  const double bw = 12.5e9;
  const auto c = call(1048576, 64, 64, bw);  // 1 MiB over 64 nodes, one GPU each
  // Ring Simple: base 8.4 us + 126 network steps of 9.6 us, x1.9 (1 MiB >= 64/16 x 64 KiB), algbw = bus x n/2(n-1).
  CHECK(nccl_model_time_s(c, RING, SIMPLE) ==
        Approx((8.4 + 126 * 9.6) * 1.9 * US + 1048576 / (bw * 64 / 126.0)));
  // Ring LL: base 3.6 us + 126 x 2.7 us, a quarter of the bus bandwidth.
  CHECK(nccl_model_time_s(c, RING, LL) == Approx((3.6 + 126 * 2.7) * US + 1048576 / (bw / 4 * 64 / 126.0)));
  // Tree Simple: 2 x log2(64) network hops of 50 us, 0.9 x bus, half per tree, x0.5 correction at 2^14 x 64 B.
  CHECK(nccl_model_time_s(c, TREE, SIMPLE) == Approx(2 * 6 * 50 * US + 1048576 / (bw * 0.9 * 0.5 * 0.5)));
  // LL128 is off unless the hardware qualifies.
  CHECK(std::isinf(nccl_model_time_s(c, RING, 1)));
}

TEST_CASE("sim::CollectiveLibrary: NCCL picks LL for small, tree at scale, ring Simple for large", "[sim][coll][library]") {
  const double bw = 12.5e9;
  const auto small = choose("nccl-2.7", call(4096, 16, 16, bw));
  CHECK(small.protocol == "LL");
  CHECK(small.bandwidth_efficiency == Approx(0.25).margin(0.02));
  const auto large = choose("nccl-2.7", call(256e6, 16, 16, bw));
  CHECK(large.algorithm == "ring");
  CHECK(large.protocol == "Simple");
  CHECK(large.bandwidth_efficiency == 1.0);
  // Charged once per call: NCCL's latency term of the choice, (8.4 + 30 x 9.6) x 1.9 us, less the
  // platform hop latencies the flows pay (none in this call).
  CHECK(large.call_latency_s == Approx((8.4 + 30 * 9.6) * 1.9 * US));
  auto with_hops = call(256e6, 16, 16, bw);
  with_hops.inter_latency_s = 2e-6;
  CHECK(choose("nccl-2.7", with_hops).call_latency_s == Approx(((8.4 + 30 * 9.6) * 1.9 - 30 * 2) * US));
  // Never below the protocol's base latency, however slow the platform's hops.
  with_hops.inter_latency_s = 1.0;
  CHECK(choose("nccl-2.7", with_hops).call_latency_s == Approx(8.4 * US));
  // 64 nodes, 1 MiB: tree Simple (973 us) beats ring LL (1004 us) and ring Simple (2480 us) in the model.
  const auto mid = choose("nccl-2.7", call(1048576, 64, 64, bw));
  CHECK(mid.algorithm == "tree");
  CHECK(mid.protocol == "Simple");
  // NCCL_ALGO=Ring: the protocol is still chosen.
  CHECK(choose("nccl-2.7", call(4096, 16, 16, bw), "ring").protocol == "LL");
  CHECK(choose("nccl-2.7", call(1048576, 64, 64, bw), "ring").algorithm == "ring");
  // An algorithm NCCL does not have runs as named, without a protocol.
  CHECK(choose("nccl-2.7", call(4096, 16, 16, bw), "rhd").algorithm == "rhd");
}

TEST_CASE("sim::CollectiveLibrary: Open MPI's fixed rule switches at 10,000 bytes", "[sim][coll][library]") {
  CHECK(choose("openmpi-4.0", call(9999, 32, 32, 1e9)).algorithm == "rd");
  CHECK(choose("openmpi-4.0", call(10000, 32, 32, 1e9)).algorithm == "ring");
  CHECK(choose("openmpi-4.0", call(1e9, 32, 32, 1e9)).algorithm == "ring");  // segmented ring
  CHECK(choose("openmpi-4.0", call(100, 32, 32, 1e9), "rhd").algorithm == "rhd");
}

TEST_CASE("sim::CollectiveLibrary: MVAPICH2's Stampede table by rank count and size", "[sim][coll][library]") {
  CHECK(choose("mvapich2-2.3", call(1024, 16, 16, 1e9)).algorithm == "rd");
  CHECK(choose("mvapich2-2.3", call(1025, 16, 16, 1e9)).algorithm == "rhd");
  CHECK(choose("mvapich2-2.3", call(16384, 17, 17, 1e9)).algorithm == "rd");  // the 32-process row
  CHECK(choose("mvapich2-2.3", call(16385, 512, 32, 1e9)).algorithm == "rhd");
  CHECK(choose("mvapich2-2.3", call(8192, 1000, 100, 1e9)).algorithm == "rd");
  CHECK(choose("mvapich2-2.3", call(8193, 1000, 100, 1e9)).algorithm == "rhd");
  CHECK(choose("mvapich2-2.3", call(4097, 5000, 500, 1e9)).algorithm == "rhd");  // beyond the last row: its rule
}

TEST_CASE("sim::CollectiveLibrary: Gloo and none run the ring; names and errors", "[sim][coll][library]") {
  CHECK(choose("gloo", call(100, 8, 8, 1e9)).algorithm == "ring");
  CHECK(choose("none", call(100, 8, 8, 1e9)).algorithm == "ring");
  CHECK(choose("none", call(100, 8, 8, 1e9), "tree").algorithm == "tree");
  CHECK_THROWS_AS(collective_library_by_name("nccl-9", "--collective-library"), InputError);
  CHECK_THROWS_WITH(check_collective_library("nccl-9"), Catch::Contains("nccl-2.7") && Catch::Contains("--collective-library"));
  CHECK(strategy_by_name("allreduce-auto").collective == "auto");
  CHECK(collective_library_help().find("openmpi-4.0") != std::string::npos);
}

TEST_CASE("sim::CollectiveLibrary: a protocol's transfer takes its latency + S / (bw x efficiency)", "[sim][coll][library]") {
  constexpr double BW = 1.25e9, LAT = 5e-6;
  const auto p = test_platforms::uniform_star(2, BW, LAT);
  const auto& nccl = collective_library_by_name("nccl-2.7", "test");
  for (double bytes : {4096.0, 64e6}) {
    const auto c = library_call(p, 2, 2, bytes);
    const auto choice = nccl.choose(c, "ring");
    double t = test_platforms::in_world(p, {2, 1}, [&](World& w) {
      double end = -1;
      start_library_allreduce(w, nccl, c, {0, 1}, "ring", CommMode::FINE, [&] { end = w.now(); });
      w.run();
      return end;
    });
    // Ring of 2: 2 steps of S/2 at bw x efficiency, each paying the route's 2 x LAT; the call latency first.
    const double expected = choice.call_latency_s + 2 * (2 * LAT + bytes / 2 / (BW * choice.bandwidth_efficiency));
    INFO(bytes << " B, protocol " << choice.protocol);
    CHECK(choice.protocol == (bytes < 1e5 ? "LL" : "Simple"));
    CHECK(t == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("sim::CollectiveLibrary: Open MPI reduces GPU buffers in host memory, a full copy out and back (closed form)",
          "[sim][coll][library]") {
  // coll/cuda: the buffer is copied to host memory before the host allreduce and back after it, so on
  // GPU ranks openmpi-4.0's ring takes the same ring plus 2 x S / (device link x DMA efficiency).
  const auto p = test_platforms::gpu_fat_tree(8, 2);
  const auto& ompi = collective_library_by_name("openmpi-4.0", "test");
  const auto& none = collective_library_by_name("none", "test");
  constexpr double BYTES = 64e6;
  const auto c = library_call(p, 16, 8, BYTES);
  const double dma_Bps = p.node.intra.link_bandwidth_Bps *
                         platforms::transport_by_name("pcie", platforms::TransportScope::INTRA_NODE).link_efficiency;
  CHECK(c.device_host_Bps == Approx(dma_Bps));
  CHECK(ompi.stages_device_buffers);
  CHECK(!collective_library_by_name("nccl-2.7", "test").stages_device_buffers);
  CHECK(!collective_library_by_name("mvapich2-2.3", "test").stages_device_buffers);
  auto run = [&](const CollectiveLibrary& lib) {
    return test_platforms::in_world(p, {8, 2, 0}, [&](World& w) {
      std::vector<int> ranks(16);
      for (int i = 0; i < 16; ++i) ranks[i] = i;
      double end = -1;
      start_library_allreduce(w, lib, c, ranks, "ring", CommMode::FINE, [&] { end = w.now(); });
      w.run();
      return end;
    });
  };
  CHECK(run(ompi) == Approx(run(none) + 2 * BYTES / dma_Bps).epsilon(1e-9));
  // CPU ranks have no device buffers: nothing is copied.
  const auto cpu = test_platforms::uniform_star(4, 1.25e9, 5e-6);
  CHECK(library_call(cpu, 4, 4, BYTES).device_host_Bps == 0);
}

TEST_CASE("sim::CollectiveLibrary: Horovod on host buffers is copy out + host allreduce + host reduction + copy back "
          "(closed form, 2 nodes)",
          "[sim][coll][library]") {
  // One GPU per node on a uniform star; the PCIe link is far faster than the network and adds no latency,
  // so the host ring of 2 is 2 steps of S/2 over the network, each paying its route's 2 x LAT.
  constexpr double BW = 1.25e9, LAT = 5e-6, PCIE_Bps = 16e9, BYTES = 64e6;
  auto p = test_platforms::uniform_star(2, BW, LAT);
  p.node.cpu = "xeon-e5-2680-v4";  // 76.8 GB/s over 14 cores (platforms/devices.yaml)
  p.node.gpu = "test-gpu";
  p.node.gpus = 1;
  p.node.intra.kind = platforms::IntraNodeKind::PCIE;
  p.node.intra.link_bandwidth_Bps = PCIE_Bps;
  p.node.intra.uplink_bandwidth_Bps = PCIE_Bps;
  p.node.intra.latency_s = 0;
  const auto& host = collective_library_by_name("horovod-host-openmpi-4.0", "test");
  CHECK(host.stages_device_buffers);
  CHECK(host.framework_stages_to_host);
  CHECK(!collective_library_by_name("openmpi-4.0", "test").framework_stages_to_host);
  const auto c = library_call(p, 2, 2, BYTES);
  const double dma_Bps =
      PCIE_Bps * platforms::transport_by_name("pcie", platforms::TransportScope::INTRA_NODE).link_efficiency;
  const double core_Bps = 76.8e9 / 14;
  CHECK(c.device_host_Bps == Approx(dma_Bps));
  CHECK(c.host_core_Bps == Approx(core_Bps));
  CHECK(c.rank_core_Bps == 0);  // GPU ranks: no worker-core charge
  LibraryChoice chosen;
  const double t = test_platforms::in_world(p, {2, 1}, [&](World& w) {
    double end = -1;
    start_library_allreduce(w, host, c, {0, 1}, "", CommMode::FINE, [&] { end = w.now(); }, &chosen);
    w.run();
    return end;
  });
  // Open MPI's fixed rule at 64 MB: the ring (segmented); each rank reduces its half once (read 2, write 1).
  CHECK(host.choose(c, "").algorithm == "ring");
  const double d2h = BYTES / dma_Bps, h2d = BYTES / dma_Bps;
  const double ring = 2 * (2 * LAT + BYTES / 2 / BW);
  const double reduce = 3 * (BYTES / 2) / core_Bps;
  CHECK(t == Approx(d2h + ring + reduce + h2d).epsilon(1e-6));
  // Recursive doubling below 10,000 B: log2(4) = 2 reductions of the whole vector, 3 with 5 ranks (fold).
  auto small = c;
  small.bytes = 4096;
  small.ranks = 4;
  const auto rd = host.choose(small, "");
  CHECK(rd.algorithm == "rd");
  CHECK(host.host_reduce_s(small, rd) == Approx(3 * 2 * 4096 / core_Bps));
  small.ranks = 5;
  CHECK(host.host_reduce_s(small, rd) == Approx(3 * 3 * 4096 / core_Bps));
  // Its name is a row: --help lists it, an unknown name's error names it.
  CHECK(collective_library_help().find("horovod-host-openmpi-4.0") != std::string::npos);
  CHECK_THROWS_WITH(check_collective_library("horovod-host"), Catch::Contains("horovod-host-openmpi-4.0"));
}

TEST_CASE("sim::Collective: recursive doubling crosses nodes only at distances >= ranks per node", "[sim][coll]") {
  const auto& rd = *collective_or_null("allreduce", "rd");
  const auto split = rd.bytes_moved({8, 2, 4}, 1e6);  // distances 1, 2 inside a node, 4 across
  CHECK(split.inter_node_B == Approx(8 * 1e6));
  CHECK(split.intra_node_B == Approx(16 * 1e6));
}

namespace {
platforms::Platform platform_with(bool gpus, const std::string& library) {
  platforms::Platform p;
  p.name = "test";
  p.file = "test.yaml";
  p.node.gpus = gpus ? 4 : 0;
  p.node.gpu = gpus ? "v100-sxm2-32gb" : "";
  p.collective_library = library;
  p.collective_library_at = library.empty() ? "" : "test.yaml:4";
  return p;
}
TrainingPoint with_framework(const std::string& framework, const std::string& named = "") {
  TrainingPoint p = default_training_point();
  if (!framework.empty()) apply_framework(p, framework_by_name(framework));
  p.runtime.collective_library = named;
  return p;
}
}  // namespace

TEST_CASE("sim::CollectiveLibrary: the default rule picks NCCL on GPU nodes and Open MPI on CPU nodes",
          "[sim][coll][library]") {
  const auto gpu = resolve_collective_library(platform_with(true, ""), with_framework(""));
  CHECK(gpu.name == "nccl-2.7");
  CHECK(gpu.source == "default rule (GPU nodes)");
  const auto cpu = resolve_collective_library(platform_with(false, ""), with_framework(""));
  CHECK(cpu.name == "openmpi-4.0");
  CHECK(cpu.source == "default rule (CPU nodes)");
  CHECK(std::string(DEFAULT_GPU_LIBRARY) == "nccl-2.7");
  // A TrainingPoint built in code names `none`: the library API keeps every closed-form test ideal.
  CHECK(resolve_collective_library(platform_with(true, "mvapich2-2.3"), TrainingPoint{}).name == "none");
}

TEST_CASE("sim::CollectiveLibrary: precedence named > framework > platform > default rule", "[sim][coll][library]") {
  // The platform's library beats the default rule.
  auto r = resolve_collective_library(platform_with(false, "mvapich2-2.3"), with_framework(""));
  CHECK(r.name == "mvapich2-2.3");
  CHECK(r.source == "platform");
  // Horovod on GPUs runs NCCL whatever the platform names; on CPUs it runs the platform's MPI.
  r = resolve_collective_library(platform_with(true, "mvapich2-2.3"), with_framework("horovod"));
  CHECK(r.name == "nccl-2.7");
  CHECK(r.source == "framework horovod");
  r = resolve_collective_library(platform_with(false, "mvapich2-2.3"), with_framework("horovod"));
  CHECK(r.name == "mvapich2-2.3");
  // PyTorch DDP on CPUs runs gloo, beating the platform; the framework `none` implies nothing.
  r = resolve_collective_library(platform_with(false, "mvapich2-2.3"), with_framework("pytorch-ddp"));
  CHECK(r.name == "gloo");
  CHECK(resolve_collective_library(platform_with(false, "mvapich2-2.3"), with_framework("none")).source == "platform");
  // A named library (scenario or flag) beats everything.
  r = resolve_collective_library(platform_with(true, "mvapich2-2.3"), with_framework("pytorch-ddp", "none"));
  CHECK(r.name == "none");
  CHECK(r.source == "named");
}

TEST_CASE("sim::CollectiveLibrary: an unknown platform library is a one-line error naming file and line",
          "[sim][coll][library]") {
  CHECK_THROWS_AS(resolve_collective_library(platform_with(true, "nccl-9"), with_framework("")), InputError);
  CHECK_THROWS_WITH(resolve_collective_library(platform_with(true, "nccl-9"), with_framework("")),
                    Catch::Contains("test.yaml:4") && Catch::Contains("collective_library") &&
                        Catch::Contains("nccl-2.7"));
}

TEST_CASE("sim::CollectiveLibrary: every shipped platform names a known library or none", "[sim][coll][library]") {
  for (const auto& name : platforms::platform_names()) {
    INFO(name);
    const auto p = platforms::load_platform(name);
    const auto r = resolve_collective_library(p, default_training_point());
    CHECK(r.source == (p.collective_library.empty() ? (p.has_gpus() ? "default rule (GPU nodes)" : "default rule (CPU nodes)")
                                                    : "platform"));
    // GPU platforms run NCCL unless the site's MPI is named.
    if (p.has_gpus() && p.collective_library.empty()) CHECK(r.name == "nccl-2.7");
  }
}

TEST_CASE("sim::CollectiveLibrary: CUDA-aware MPI and PS copies let a node's GPUs go peer to peer through their socket",
          "[sim][coll][library]") {
  // aws-p2-8xlarge: Broadwell hosts, so the file's default is NCCL 2.7's switch-only rule.
  const platforms::Platform bdw = platforms::load_platform("aws-p2-8xlarge");
  REQUIRE(bdw.node.intra.p2p_level == platforms::P2pLevel::SWITCH);
  auto level_under = [&](const platforms::Platform& p, const std::string& library) {
    TrainingPoint point;
    point.runtime.collective_library = library;
    return platform_for_library(p, point).node.intra.p2p_level;
  };
  CHECK(level_under(bdw, "nccl-2.7") == platforms::P2pLevel::SWITCH);
  CHECK(level_under(bdw, "none") == platforms::P2pLevel::SWITCH);
  CHECK(level_under(bdw, "openmpi-4.0") == platforms::P2pLevel::HOST_BRIDGE);  // CUDA IPC
  CHECK(level_under(bdw, "mvapich2-2.3") == platforms::P2pLevel::HOST_BRIDGE);
  CHECK(platform_for_library(bdw, with_framework("")).node.intra.p2p_level == platforms::P2pLevel::SWITCH);
  // Parameter-server strategies run no library: TensorFlow copies between GPUs through the CUDA driver.
  TrainingPoint ps = with_framework("");
  ps.strategy = strategy_by_name("ps-replicated");
  CHECK(platform_for_library(bdw, ps).node.intra.p2p_level == platforms::P2pLevel::HOST_BRIDGE);
  // A level the file states is the cluster's own: no library changes it.
  auto stated = bdw;
  stated.node.intra.p2p_level = platforms::P2pLevel::SYSTEM;
  stated.node.intra.p2p_level_stated = true;
  CHECK(level_under(stated, "openmpi-4.0") == platforms::P2pLevel::SYSTEM);
  // Under MPI, the board-to-board pairs of one socket no longer stage through host memory.
  CHECK(bdw.gpus_staged(1, 2));
  auto mpi = bdw;
  mpi.node.intra.p2p_level = level_under(bdw, "mvapich2-2.3");
  CHECK(!mpi.gpus_staged(1, 2));
  CHECK(mpi.gpus_staged(3, 4));  // across sockets: still through host memory
}

TEST_CASE("sim::CollectiveLibrary: NCCL runs NVLink SHARP from 2 MiB up where the NVSwitch reduces", "[sim][coll][library]") {
  auto c = call(1048576, 8, 1, 12.5e9);
  c.nvls_capable = true;
  CHECK(choose("nccl-2.7", c).algorithm != "nvls");
  c.bytes = 2.0 * 1048576;
  CHECK(choose("nccl-2.7", c).algorithm == "nvls");
  CHECK(choose("nccl-2.7", c, "ring").algorithm == "ring");  // a named algorithm wins
  c.nvls_capable = false;
  CHECK(choose("nccl-2.7", c).algorithm != "nvls");
  CHECK(library_call(platforms::load_platform("dgx-h100-superpod"), 8, 1, 1e9).nvls_capable);
  CHECK_FALSE(library_call(platforms::load_platform("dgx-a100-cluster"), 8, 1, 1e9).nvls_capable);
}

TEST_CASE("sim::CollectiveLibrary: Gloo's copies and reductions take the worker's cores, shared with its computation "
          "(closed form)",
          "[sim][coll][library]") {
  const auto& gloo = collective_library_by_name("gloo", "test");
  const auto& none = collective_library_by_name("none", "test");
  CHECK(gloo.runs_on_worker_cores);
  CHECK(!none.runs_on_worker_cores);
  CHECK(!collective_library_by_name("nccl-2.7", "test").runs_on_worker_cores);
  constexpr double BYTES = 64e6, CORE_BPS = 10e9, COMPUTE_S = 0.1;
  // 2 ranks: each sends and receives 2 x 32 MB (a kernel copy each, read + write) and reduces 32 MB (3 x).
  CHECK(host_ring_traffic_B(BYTES, 2) == Approx(4 * 32e6 * 2 + 32e6 * 3));
  CHECK(host_ring_traffic_B(BYTES, 1) == 0);
  const auto p = test_platforms::uniform_star(2, 1.25e9, 5e-6);
  LibraryCall c = library_call(p, 2, 2, BYTES);
  CHECK(c.rank_core_Bps == 0);  // its CPU is not in the catalog: nothing to charge
  c.rank_core_Bps = CORE_BPS;
  // Rank 0 computes COMPUTE_S from t = 0 while the allreduce starts: (compute end, allreduce end). Each
  // world runs in a child process that sends back one number, so each end is its own run.
  auto run = [&](const CollectiveLibrary& lib, int threads) {
    c.rank_threads = threads;
    auto end_of = [&](bool compute) {
      return test_platforms::in_world(p, {2, 1}, [&](World& w) {
        double compute_end = -1, allreduce_end = -1;
        w.compute(0, COMPUTE_S, [&] { compute_end = w.now(); });
        start_library_allreduce(w, lib, c, {0, 1}, "ring", CommMode::FINE, [&] { allreduce_end = w.now(); });
        w.run();
        return compute ? compute_end : allreduce_end;
      });
    };
    return std::pair{end_of(true), end_of(false)};
  };
  const double core_s = host_ring_traffic_B(BYTES, 2) / CORE_BPS;  // 35.2 ms, less than the computation
  const auto plain = run(none, 1);
  CHECK(plain.first == Approx(COMPUTE_S));
  // Both share the device at half speed until the copies are done: the computation ends core_s later.
  const auto one = run(gloo, 1);
  CHECK(one.first == Approx(COMPUTE_S + core_s).epsilon(1e-9));
  CHECK(one.second == Approx(plain.second).epsilon(1e-9));  // the collective's own time is its curve's
  // Two compute threads: the same copies are half of the device's work.
  CHECK(run(gloo, 2).first == Approx(COMPUTE_S + core_s / 2).epsilon(1e-9));
  // A CPU of the catalog: one core's share of its socket's bandwidth.
  auto host_star = p;
  host_star.node.cpu = "host";
  const auto& host = platforms::DeviceCatalog::builtin().by_name("host");
  CHECK(library_call(host_star, 2, 2, BYTES).rank_core_Bps == Approx(host.mem_bandwidth_Bps / host.cores));
}
