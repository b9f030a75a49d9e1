// Tests of the transport table (platforms/transport.hpp): every row, its factor curve, the host-staged
// pipeline closed form, names and errors generated from the table, and the platform-file fields.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "platforms/platform.hpp"
#include "platforms/transport.hpp"

using namespace dtsim::platforms;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::string EDR_STAR =
    "name: test\ndescription: t\nnodes: 4\n"
    "node:\n  cpu: xeon-gold-6148\n  cpu_sockets: 2\n  memory_B: 192e9\n  nics: 1\n  source: t\n"
    "  intra:\n    kind: shared-memory\n    link_bandwidth_Bps: 10e9\n    latency_s: 0.4e-6\n    source: t\n"
    "network:\n  technology: TECH\n  topology: star\n  link_bandwidth_Bps: 12.5e9\n  latency_s: 1.0e-7\n"
    "  protocol_efficiency: 0.96\n  per_message_overhead_s: 0.7e-6\n  source: t\nEXTRA";

Platform load_text(const std::string& tech, const std::string& extra) {
  std::string text = EDR_STAR;
  text.replace(text.find("TECH"), 4, tech);
  text.replace(text.find("EXTRA"), 5, extra);
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_ttest_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  try {
    Platform p = load_platform(path.string());
    std::filesystem::remove(path);
    return p;
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
}
}  // namespace

TEST_CASE("platforms::Transport: every row is well formed", "[platforms]") {
  for (const auto& t : transports()) {
    INFO(t.name);
    CHECK(!t.description.empty());
    CHECK(!t.source.empty());
    REQUIRE(!t.bands.empty());
    CHECK(t.bands.front().min_size_B == 0);
    for (size_t i = 1; i < t.bands.size(); ++i) CHECK(t.bands[i].min_size_B > t.bands[i - 1].min_size_B);
    for (const auto& b : t.bands) {
      CHECK(b.latency_factor >= 1.0);
      CHECK(b.bandwidth_scale > 0);
      CHECK(b.bandwidth_scale <= 1.0);
    }
    if (t.model == TransportModel::SOCKET) CHECK(t.connection_rate_Bps > 0);
    if (t.model == TransportModel::HOST_STAGED) CHECK(t.chunk_B > 0);
  }
}

TEST_CASE("platforms::Transport: the factor curve at large sizes tends to the protocol (or stated DMA) efficiency",
          "[platforms]") {
  for (const auto& t : transports()) {
    INFO(t.name);
    CHECK(t.bandwidth_factor(1e12, 0.93) == Approx(t.link_efficiency > 0 ? t.link_efficiency : 0.93));
    if (t.link_efficiency > 0) CHECK(t.model == TransportModel::DEVICE_LINK);
    // Monotone: a larger message never gets a smaller share of the bandwidth.
    double last = 0;
    for (double s = 1; s <= 1e9; s *= 2) {
      CHECK(t.bandwidth_factor(s, 0.93) >= last);
      last = t.bandwidth_factor(s, 0.93);
    }
  }
  const Transport& ideal = transport_by_name("ideal");
  for (double s : {1.0, 1e3, 1e6, 1e9}) {
    CHECK(ideal.bandwidth_factor(s, 0.8) == 0.8);
    CHECK(ideal.latency_factor(s) == 1.0);
  }
}

TEST_CASE("platforms::Transport: rdma bands step at the fitted protocol switches", "[platforms]") {
  const Transport& rdma = transport_by_name("rdma");
  CHECK(rdma.latency_factor(8) == Approx(1.005));
  CHECK(rdma.latency_factor(262143) == Approx(2.594));
  CHECK(rdma.latency_factor(262144) == Approx(4.237));
  CHECK(rdma.bandwidth_factor(262144, 1.0) == 1.0);
}

TEST_CASE("platforms::staged_pipeline: a host-staged transfer is the pipelined sum of its copies", "[platforms]") {
  const double chunk = 262144, copy_lat = 1e-6, copy_Bps = 12e9, wire_Bps = 10e9;
  for (int copies : {1, 2}) {
    for (double chunks : {1.0, 4.0, 64.0}) {
      const double bytes = chunks * chunk;
      const auto p = staged_pipeline(bytes, chunk, copies, copy_lat, copy_Bps, wire_Bps);
      // Chunk by chunk: the first chunk passes every stage, each further chunk adds the slowest stage.
      const double copy_s = copy_lat + chunk / copy_Bps, wire_s = chunk / wire_Bps;
      const double slowest = std::max(copy_s, wire_s);
      const double pipelined = copies * copy_s + wire_s + (chunks - 1) * slowest;
      INFO("copies " << copies << " chunks " << chunks);
      CHECK(p.time_s(bytes) == Approx(pipelined).epsilon(1e-12));
    }
  }
  // A copy slower than the wire is the bottleneck stage.
  const auto slow = staged_pipeline(1e9, chunk, 2, 0, 5e9, 10e9);
  CHECK(slow.stage_rate_Bps == Approx(5e9));
  // A message below one chunk is one chunk through every stage.
  const auto small = staged_pipeline(1000, chunk, 2, 1e-6, 1e10, 1e10);
  CHECK(small.time_s(1000) == Approx(2 * (1e-6 + 1e-7) + 1e-7));
}

TEST_CASE("platforms::transport_by_name: names and errors come from the table", "[platforms]") {
  CHECK(transport_names(TransportScope::INTER_NODE) == "rdma, rdma-host-staged, tcp, ideal");
  CHECK(transport_names(TransportScope::INTRA_NODE) == "shm, pcie, nvlink, ideal");
  CHECK(contains(transport_help(TransportScope::ANY), "rdma-host-staged"));
  try {
    (void)transport_by_name("shm", TransportScope::INTER_NODE);
    FAIL("shm accepted between nodes");
  } catch (const dtsim::InputError& e) {
    CHECK(contains(e.what(), "'shm'"));
    CHECK(contains(e.what(), "rdma, rdma-host-staged, tcp, ideal"));
  }
  CHECK(transport_by_name_or_null("udp") == nullptr);
}

TEST_CASE("platforms::Transport: RPC layers cost calls x per-call + bytes / software rate, only by name", "[platforms]") {
  CHECK(transport_names(TransportScope::RPC) == "grpc, grpc-2016, zeromq");
  const Transport& grpc = transport_by_name("grpc", TransportScope::RPC);
  const Transport& old = transport_by_name("grpc-2016", TransportScope::RPC);
  const Transport& zmq = transport_by_name("zeromq", TransportScope::RPC);
  // gRPC's software stage from 800 MB/s over 10 GbE (TCP payload 1.177 GB/s) in series with the wire.
  const double wire_Bps = 10e9 / 8 * 1448.0 / 1538.0;
  CHECK(1.0 / (1.0 / grpc.rpc_software_Bps + 1.0 / wire_Bps) == Approx(800e6));
  CHECK(grpc.rpc_cost_s(10, 1e8) == Approx(10 * grpc.rpc_per_call_s + 1e8 / grpc.rpc_software_Bps));
  CHECK(old.rpc_cost_s(1, 0.9e9) == Approx(1.0 + old.rpc_per_call_s));  // 0.9 GB/s: 1 s per 0.9 GB
  // ZeroMQ (ps-lite): zero copy, 4 frames per call at 2.6 M frames/s.
  CHECK(zmq.rpc_cost_s(1000, 1e9) == Approx(1000 * 4 / 2.6e6));
  // The wire underneath is TCP: same bands.
  CHECK(grpc.latency_factor(1e6) == transport_by_name("tcp").latency_factor(1e6));
  // Non-RPC rows cost nothing; RPC rows are no platform's wire and vice versa.
  CHECK(transport_by_name("tcp").rpc_cost_s(10, 1e9) == 0);
  CHECK_THROWS_AS(transport_by_name("grpc", TransportScope::INTER_NODE), dtsim::InputError);
  CHECK_THROWS_WITH(transport_by_name("tcp", TransportScope::RPC), Catch::Contains("grpc, grpc-2016, zeromq"));
}

TEST_CASE("platforms::load_platform: transports default by technology and intra kind, or as written", "[platforms]") {
  CHECK(load_text("EDR InfiniBand", "").network.transport == "rdma");
  CHECK(load_text("Intel Omni-Path", "").network.transport == "rdma");
  CHECK(load_text("10 GbE (TCP)", "").network.transport == "tcp");
  CHECK(load_text("EDR InfiniBand", "").node.intra.transport == "shm");
  const Platform p = load_text("EDR InfiniBand", "  transport: {value: tcp, source: IPoIB}\n  connections_per_peer: 4\n");
  CHECK(p.network.transport == "tcp");
  CHECK(p.network.connections_per_peer == 4);
  CHECK(p.figure_sources.at("network.transport") == "IPoIB");
  for (const auto& name : platform_names()) {
    INFO(name);
    const Platform shipped = load_platform(name);
    CHECK(shipped.figure_sources.count("network.transport") == 1);  // every shipped file states it with a source
  }
}

TEST_CASE("platforms::load_platform: bad transport fields name file, line and field", "[platforms]") {
  auto error_of = [](const std::string& tech, const std::string& extra) -> std::string {
    try {
      (void)load_text(tech, extra);
    } catch (const dtsim::InputError& e) {
      return e.what();
    }
    FAIL("expected an InputError");
    return "";
  };
  const std::string unknown = error_of("EDR InfiniBand", "  transport: udp\n");
  CHECK(contains(unknown, "dtsim_ttest_"));
  CHECK(contains(unknown, ":23:"));
  CHECK(contains(unknown, "field 'transport' must be one of rdma, rdma-host-staged, tcp, ideal, got 'udp'"));
  CHECK(contains(error_of("EDR InfiniBand", "  transport: nvlink\n"), "got 'nvlink'"));
  CHECK(contains(error_of("Myrinet", ""), "missing field 'transport' (no default for this technology"));
  CHECK(contains(error_of("EDR InfiniBand", "  connections_per_peer: 2\n"), "applies to socket transports"));
  CHECK(contains(error_of("10 GbE", "  connections_per_peer: 0\n"), "connections_per_peer"));
}

TEST_CASE("platforms::Transport: pcie constants follow from the published microbenchmarks", "[platforms]") {
  const auto& pcie = transport_by_name("pcie", TransportScope::INTRA_NODE);
  const double gen3_x16_Bps = 8e9 * 16 / 8 * 128.0 / 130.0;
  // bandwidthTest pinned (MB/s of 1.024e6 B/s): Microway 11688.2 / 12886.0, gearshifft 12150.7 / 12890.6.
  const double dma_Bps = (11688.2 + 12886.0 + 12150.7 + 12890.6) / 4 * 1.024e6;
  CHECK(pcie.link_efficiency == Approx(dma_Bps / gen3_x16_Bps).epsilon(1e-12));
  CHECK(pcie.link_efficiency == Approx(0.806).margin(0.001));
  CHECK(pcie.host_staging_efficiency == Approx(2 * 7.5e9 / gen3_x16_Bps).epsilon(1e-12));  // NCCL SHM, nccl#406
  // GPU <-> NIC without GPUDirect RDMA: 2 x the mean of nccl #243 (5.7 GB/s) and #465 (6.0 GB/s).
  CHECK(pcie.nic_host_efficiency == Approx(2 * (5.7e9 + 6.0e9) / 2 / gen3_x16_Bps).epsilon(1e-12));
  CHECK(pcie.nic_host_efficiency == Approx(0.743).margin(0.001));
  CHECK(pcie.chunk_B == 262144);
  // Large PCIe messages reach the DMA efficiency, whatever the network's protocol efficiency.
  CHECK(pcie.bandwidth_factor(1e9, 0.5) == Approx(pcie.link_efficiency).epsilon(1e-12));
}

TEST_CASE("platforms::load_platform: p2p_level is a pcie field, by default NCCL 2.7's rule for the node's CPU",
          "[platforms]") {
  auto error_of = [](const std::string& from, const std::string& to) {
    std::string text = EDR_STAR;
    text.replace(text.find("TECH"), 4, "EDR InfiniBand");
    text.replace(text.find("EXTRA"), 5, "");
    text.replace(text.find(from), from.size(), to);
    const auto path = std::filesystem::temp_directory_path() / ("dtsim_ttest_p2p_" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << text;
    std::string msg;
    try {
      (void)load_platform(path.string());
    } catch (const dtsim::InputError& e) {
      msg = e.what();
    }
    std::filesystem::remove(path);
    CHECK(contains(msg, "dtsim_ttest_p2p_"));
    return msg;
  };
  const std::string intra_end = "    source: t\nnetwork";
  CHECK(contains(error_of(intra_end, "    p2p_level: sys\n" + intra_end), "field 'p2p_level' is only for kind 'pcie'"));
  const std::string pcie_intra = "    kind: pcie\n    link_bandwidth_Bps: 15.75e9\n    latency_s: 1e-6\n";
  const std::string gpus = "  source: t\n  intra:\n    kind: shared-memory\n    link_bandwidth_Bps: 10e9\n    latency_s: 0.4e-6\n";
  const std::string gpu_node = "  gpu: p100-pcie\n  gpus: 4\n  source: t\n  intra:\n" + pcie_intra;
  CHECK(contains(error_of(gpus, gpu_node + "    p2p_level: all\n"),
                 "field 'p2p_level' must be one of pxb, phb, sys, got 'all'"));
  CHECK(contains(error_of(gpus, gpu_node + "    p2p_across_sockets: true\n"),
                 "'p2p_across_sockets: true' is 'p2p_level: sys'"));

  // The default: Intel before Skylake-SP (NCCL's "BDW" class) only under a switch; later Intel CPUs through
  // the host bridge of their socket; AMD CPUs across sockets.
  Platform bdw = load_platform("aws-p2-8xlarge");  // Xeon E5-2686 v4, Broadwell
  CHECK(bdw.node.intra.p2p_level == P2pLevel::SWITCH);
  CHECK(!bdw.node.intra.p2p_level_stated);
  CHECK(load_platform("pitzer-gpu").node.intra.p2p_level == P2pLevel::HOST_BRIDGE);  // Gold 6148, Skylake
  CHECK(load_platform("dgx-a100-cluster").node.intra.p2p_level == P2pLevel::SYSTEM);  // EPYC: AMD, NCCL 2.7 keeps PATH_SYS
  CHECK(bdw.node.gpu_socket(3) == 0);
  CHECK(bdw.node.gpu_socket(4) == 1);
  // 8 GK210 under 4 board switches, 2 sockets: which pairs are beyond each level.
  CHECK(!bdw.node.beyond_p2p_level(0, 1));  // one switch: always peer to peer
  CHECK(bdw.node.beyond_p2p_level(1, 2));   // same socket, two switches: the host bridge
  CHECK(bdw.node.beyond_p2p_level(3, 4));   // across sockets
  CHECK(bdw.gpus_staged(1, 2));
  bdw.node.intra.p2p_level = P2pLevel::HOST_BRIDGE;
  CHECK(!bdw.node.beyond_p2p_level(1, 2));
  CHECK(bdw.node.beyond_p2p_level(3, 4));
  bdw.node.intra.p2p_level = P2pLevel::SYSTEM;
  CHECK(!bdw.node.beyond_p2p_level(3, 4));
  CHECK(!bdw.any_gpus_staged());
  bdw.node.intra.p2p_level = P2pLevel::SWITCH;
  bdw.node.intra.transport = "ideal";  // a transport that does not stage keeps every pair direct
  CHECK(!bdw.any_gpus_staged());
  bdw.node.cpu_sockets = 1;
  CHECK(bdw.node.gpu_socket(7) == 0);
}

TEST_CASE("platforms::DeviceCatalog: a CPU's microarchitecture sets NCCL's CPU class and P2P level", "[platforms]") {
  const auto& catalog = DeviceCatalog::builtin();
  CHECK(catalog.by_name("xeon-e5-2690-v3").intel_before_skylake_sp());
  CHECK(catalog.by_name("xeon-e5-2680-v4").intel_before_skylake_sp());
  CHECK(!catalog.by_name("xeon-gold-6148").intel_before_skylake_sp());
  CHECK(!catalog.by_name("epyc-7742").intel_before_skylake_sp());
  CHECK(catalog.by_name("epyc-7742").amd());
  CHECK(!catalog.by_name("xeon-gold-6148").amd());
  // NCCL 2.7's default P2P level by CPU: switch-only before Skylake-SP, host bridge on later Intel
  // CPUs, across sockets on AMD (its default PATH_SYS is narrowed only for Intel and ARM).
  CHECK(default_p2p_level(catalog.by_name("xeon-e5-2680-v4")) == P2pLevel::SWITCH);
  CHECK(default_p2p_level(catalog.by_name("xeon-gold-6148")) == P2pLevel::HOST_BRIDGE);
  CHECK(default_p2p_level(catalog.by_name("epyc-7742")) == P2pLevel::SYSTEM);
  Device unstated = catalog.by_name("epyc-7742");
  unstated.microarchitecture.clear();
  CHECK(default_p2p_level(unstated) == P2pLevel::HOST_BRIDGE);
  // GPUs state their architecture from the GPU list, never a CPU core generation.
  for (const auto& name : catalog.names()) {
    const Device& d = catalog.by_name(name);
    INFO(name);
    if (!d.is_cpu()) CHECK_FALSE(d.intel_before_skylake_sp());
    if (!d.is_cpu()) CHECK_FALSE(d.amd());
  }
}

TEST_CASE("platforms::load_platform: gpudirect_rdma is a pcie field for network transport rdma", "[platforms]") {
  auto load_gpu = [](const std::string& kind_extra, const std::string& transport) {
    std::string text = EDR_STAR;
    text.replace(text.find("TECH"), 4, "EDR InfiniBand");
    text.replace(text.find("EXTRA"), 5, transport);
    text.replace(text.find("  intra:\n    kind: shared-memory\n"), 32,
                 "  gpu: p100-pcie\n  gpus: 2\n  intra:\n    kind: pcie\n" + kind_extra);
    const auto path = std::filesystem::temp_directory_path() / ("dtsim_ttest_gdr_" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << text;
    std::string msg;
    Platform p;
    try {
      p = load_platform(path.string());
    } catch (const dtsim::InputError& e) {
      msg = e.what();
    }
    std::filesystem::remove(path);
    return std::pair{p, msg};
  };
  auto [plain, none] = load_gpu("", "");
  CHECK(none.empty());
  CHECK(!plain.node.intra.gpudirect_rdma);
  auto [gdr, ok] = load_gpu("    gpudirect_rdma: true\n", "");
  CHECK(ok.empty());
  CHECK(gdr.node.intra.gpudirect_rdma);
  const std::string tcp = load_gpu("    gpudirect_rdma: true\n", "  transport: {value: tcp, source: t}\n").second;
  CHECK(contains(tcp, "field 'gpudirect_rdma' applies with network.transport 'rdma', not 'tcp'"));
  CHECK(contains(tcp, "dtsim_ttest_gdr_"));
  CHECK(contains(load_gpu("    gpudirect_rdma: 7\n", "").second, "gpudirect_rdma"));
  CHECK(load_platform("ri2-k80").node.intra.gpudirect_rdma);  // MVAPICH2-GDR
  CHECK(!load_platform("pitzer-gpu").node.intra.gpudirect_rdma);  // NCCL's rules, PCIe V100s
}
