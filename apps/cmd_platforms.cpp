// `dtsim platforms` lists the shipped clusters (or, with --devices, the device catalog);
// `dtsim platform check FILE|NAME` validates one platform file and prints its summary.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "platforms/platform.hpp"
#include "platforms/transport.hpp"

namespace dtsim::apps {
namespace {

using platforms::Platform;

constexpr double GIGA = 1e9;
constexpr double TERA = 1e12;
constexpr double MICRO = 1e-6;
constexpr double MILLI = 1e-3;
constexpr double PROBE_MESSAGE_B = 1024000;  // 1000 KB: the NetPIPE point of the Taiwania 2 study

std::string devices_per_node(const Platform& p) {
  std::string s = fmt::format("{}x {}", p.node.cpu_sockets, p.node.cpu);
  if (p.has_gpus()) s += fmt::format(" + {}x {}", p.node.gpus, p.node.gpu);
  return s;
}

std::string topology_shape(const platforms::Network& n) {
  switch (n.topology) {
    case platforms::TopologyKind::STAR:
      return n.backbone_bandwidth_Bps > 0 ? fmt::format("star, backbone {:.1f} GB/s", n.backbone_bandwidth_Bps / GIGA)
                                          : "star (non-blocking switch)";
    case platforms::TopologyKind::FAT_TREE:
      return fmt::format("fat-tree {} levels, down [{}], up [{}], parallel [{}], leaf oversubscription {:.2f}:1",
                         n.fat_tree.levels, fmt::join(n.fat_tree.down, ","), fmt::join(n.fat_tree.up, ","),
                         fmt::join(n.fat_tree.parallel, ","), n.fat_tree.oversubscription);
    case platforms::TopologyKind::DRAGONFLY: {
      const auto& d = n.dragonfly;
      return fmt::format("dragonfly {} groups x {} chassis x {} routers x {} nodes (links {}/{}/{})", d.groups,
                         d.chassis_per_group, d.routers_per_chassis, d.nodes_per_router, d.group_links,
                         d.chassis_links, d.router_links);
    }
    case platforms::TopologyKind::TORUS:
      return fmt::format("torus {}", fmt::join(n.torus.dims, "x"));
  }
  return "?";
}

std::string intra_summary(const Platform& p) {
  const auto& in = p.node.intra;
  std::string s = fmt::format("{}, {:.2f} GB/s per link, {:.2g} us", to_string(in.kind), in.link_bandwidth_Bps / GIGA,
                              in.latency_s / MICRO);
  if (in.kind == platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH)
    s += fmt::format(", {} link(s) per GPU pair", in.links_per_pair);
  if (in.kind == platforms::IntraNodeKind::NVLINK) s += fmt::format(", {} direct GPU pair(s)", in.pairs.size());
  if (in.kind == platforms::IntraNodeKind::NVSWITCH)
    s += fmt::format(", {} link(s) per GPU = {:.0f} GB/s per GPU per direction", in.links_per_gpu,
                     in.link_bandwidth_Bps * in.links_per_gpu / GIGA);
  if (in.devices_per_switch > 0)
    s += fmt::format(", {} GPUs per PCIe switch", in.devices_per_switch);
  if (in.uplink_bandwidth_Bps > 0) s += fmt::format(", uplink {:.2f} GB/s", in.uplink_bandwidth_Bps / GIGA);
  return s;
}

std::string storage_summary(const platforms::Storage& s) {
  switch (s.kind) {
    case platforms::StorageKind::NONE: return "none";
    case platforms::StorageKind::LOCAL_SSD:
      return fmt::format("local-ssd, {:.2f} GB/s per node, {:.2f} ms latency", s.read_bandwidth_Bps / GIGA,
                         s.latency_s / MILLI);
    case platforms::StorageKind::PARALLEL_FS:
      return fmt::format("parallel-fs, {:.1f} GB/s aggregate, {:.0f} metadata ops/s, {:.2f} ms latency",
                         s.read_bandwidth_Bps / GIGA, s.metadata_ops_per_s, s.latency_s / MILLI);
  }
  return "?";
}

void list_platforms(const std::string& format_text) {
  const TextFormat format = parse_text_format(format_text);
  nlohmann::json out = nlohmann::json::array();
  Table table({"name", "nodes", "devices/node", "network", "topology"});
  std::vector<std::string> invalid;
  for (const auto& name : platforms::platform_names()) {
    Platform p;
    try {
      p = platforms::load_platform(name);
    } catch (const InputError& e) {  // list the others; report the broken file at the end (exit 2)
      invalid.push_back(e.what());
      table.add_row({name, "-", "-", "INVALID: see dtsim platform check " + name, "-"});
      out.push_back({{"name", name}, {"error", e.what()}});
      continue;
    }
    const std::string network = fmt::format("{} {:.1f} Gb/s", p.network.technology, p.network.link_bandwidth_Bps * 8 / GIGA);
    table.add_row({p.name, std::to_string(p.nodes), devices_per_node(p), network, to_string(p.network.topology)});
    out.push_back({{"name", p.name},
                   {"nodes", p.nodes},
                   {"cpu", p.node.cpu},
                   {"cpu_sockets", p.node.cpu_sockets},
                   {"gpu", p.node.gpu},
                   {"gpus", p.node.gpus},
                   {"network", p.network.technology},
                   {"topology", to_string(p.network.topology)},
                   {"link_bandwidth_Bps", p.network.link_bandwidth_Bps}});
  }
  if (format == TextFormat::JSON) std::cout << out.dump(2) << '\n';
  else table.print(std::cout, format);
  if (!invalid.empty())
    throw InputError(fmt::format("{} invalid platform file(s); first: {}", invalid.size(), invalid.front()));
}

void list_devices(const std::string& format_text) {
  const TextFormat format = parse_text_format(format_text);
  nlohmann::json out = nlohmann::json::array();
  Table table({"name", "kind", "peak_TFLOPs", "mem_GBps", "mem_GiB", "cores", "clock_GHz", "simd", "fma", "description"});
  for (const auto& d : platforms::DeviceCatalog::builtin().devices()) {
    const bool cpu = d.is_cpu();
    table.add_row({d.name, to_string(d.kind), fmt::format("{:.3f}", d.peak_flops / TERA),
                   fmt::format("{:.1f}", d.mem_bandwidth_Bps / GIGA), fmt::format("{:.1f}", d.mem_capacity_B / (1u << 30)),
                   cpu ? std::to_string(d.cores) : "-", cpu ? fmt::format("{:.2f}", d.clock_hz / GIGA) : "-",
                   cpu ? std::to_string(d.simd_width_fp32) : "-", cpu ? std::to_string(d.fma_units) : "-", d.description});
    nlohmann::json j = {{"name", d.name},           {"kind", to_string(d.kind)},
                        {"description", d.description}, {"peak_flops", d.peak_flops},
                        {"mem_bandwidth_Bps", d.mem_bandwidth_Bps}, {"mem_capacity_B", d.mem_capacity_B},
                        {"source", d.source},       {"assumptions", d.assumptions}};
    if (!d.figure_sources.empty()) j["figure_sources"] = d.figure_sources;
    if (cpu) {
      j["cores"] = d.cores;
      j["clock_hz"] = d.clock_hz;
      j["simd_width_fp32"] = d.simd_width_fp32;
      j["fma_units"] = d.fma_units;
      j["threads_per_core"] = d.threads_per_core;
      j["isa"] = d.isa;
    }
    out.push_back(j);
  }
  if (format == TextFormat::JSON) std::cout << out.dump(2) << '\n';
  else table.print(std::cout, format);
}

void check_platform(const std::string& name_or_file, const std::string& format_text) {
  const TextFormat format = parse_text_format(format_text);
  const Platform p = platforms::load_platform(name_or_file);
  const int devices = p.default_workers_per_node();
  const auto& n = p.network;
  const int hops = n.hops_between_nodes();
  const double probe_s = n.message_time_s(PROBE_MESSAGE_B, hops);
  if (format == TextFormat::JSON) {
    nlohmann::json j = {{"name", p.name},
                        {"file", p.file},
                        {"nodes", p.nodes},
                        {"worker_device", p.worker_device().name},
                        {"devices_per_node", devices},
                        {"devices_total", static_cast<long>(devices) * p.nodes},
                        {"node_peak_flops", p.node_peak_flops()},
                        {"total_peak_flops", p.total_peak_flops()},
                        {"intra", intra_summary(p)},
                        {"network", n.technology},
                        {"transport", n.transport},
                        {"intra_transport", p.node.intra.transport},
                        {"p2p_level", p.node.intra.kind == platforms::IntraNodeKind::PCIE
                                          ? nlohmann::json(platforms::p2p_level_name(p.node.intra.p2p_level))
                                          : nlohmann::json(nullptr)},
                        {"gpu_nic_via_host_memory", p.gpu_nic_via_host_memory()},
                        {"gpu_pairs_staged_via_host_memory", p.any_gpus_staged()},
                        {"topology", topology_shape(n)},
                        {"link_bandwidth_Bps", n.link_bandwidth_Bps},
                        {"small_message_latency_s", n.message_time_s(0, hops)},
                        {"message_1000KB_time_s", probe_s},
                        {"bisection_bandwidth_Bps", p.bisection_bandwidth_Bps()},
                        {"storage", storage_summary(p.storage)},
                        {"defaults_used", p.defaults_used},
                        {"warnings", p.warnings}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  Table t({"field", "value"});
  t.add_row({"platform", fmt::format("{} ({})", p.name, p.file)});
  t.add_row({"description", p.description});
  t.add_row({"nodes", std::to_string(p.nodes)});
  t.add_row({"per node", devices_per_node(p)});
  t.add_row({"workers (devices)", fmt::format("{} per node, {} total ({})", devices, static_cast<long>(devices) * p.nodes,
                                              p.worker_device().name)});
  t.add_row({"peak FP32", fmt::format("{:.2f} TFLOP/s per node, {:.1f} TFLOP/s total", p.node_peak_flops() / TERA,
                                      p.total_peak_flops() / TERA)});
  t.add_row({"intra-node", intra_summary(p)});
  t.add_row({"network", fmt::format("{}, {:.2f} GB/s per port x {} NIC(s), efficiency {:.2f}", n.technology,
                                    n.link_bandwidth_Bps / GIGA, p.node.nics, n.protocol_efficiency)});
  t.add_row({"transport", fmt::format("{} between nodes ({}), {} inside a node", n.transport,
                                      platforms::transport_by_name(n.transport).description, p.node.intra.transport)});
  if (p.node.intra.kind == platforms::IntraNodeKind::PCIE && p.node.gpus > 1) {
    const auto level = p.node.intra.p2p_level;
    const char* reach = level == platforms::P2pLevel::SWITCH        ? "only GPUs under one PCIe switch"
                        : level == platforms::P2pLevel::HOST_BRIDGE ? "GPUs of one CPU socket"
                                                                    : "every GPU pair";
    const std::string why = p.node.intra.p2p_level_stated
                                ? std::string("stated")
                                : fmt::format("default: NCCL 2.7's rule for CPU '{}' ({})", p.node.cpu,
                                              p.cpu_device().microarchitecture.empty()
                                                  ? std::string("microarchitecture not stated")
                                                  : p.cpu_device().microarchitecture);
    t.add_row({"GPU peer to peer", fmt::format("p2p_level {} ({}): {}; {}", platforms::p2p_level_name(level), why, reach,
                                               p.any_gpus_staged() ? "other pairs stage through host memory"
                                                                   : "no pair stages through host memory")});
  }
  if (p.gpu_nic_via_host_memory())
    t.add_row({"GPU to NIC", fmt::format("through host memory (no GPUDirect RDMA: node.intra.gpudirect_rdma false), "
                                         "{:.2f} GB/s per node, send and receive sharing it",
                                         p.gpu_nic_host_Bps() / GIGA)});
  t.add_row({"topology", topology_shape(n)});
  t.add_row({"latency", fmt::format("{:.2f} us node to node ({:.2f} us overhead + {} hops x {:.2f} us)",
                                    n.message_time_s(0, hops) / MICRO, n.per_message_overhead_s / MICRO, hops,
                                    n.latency_s / MICRO)});
  t.add_row({"1000 KB message", fmt::format("{:.1f} us, {:.2f} GB/s (idle network)", probe_s / MICRO,
                                            PROBE_MESSAGE_B / probe_s / GIGA)});
  t.add_row({"bisection", fmt::format("{:.1f} GB/s per direction", p.bisection_bandwidth_Bps() / GIGA)});
  t.add_row({"storage", storage_summary(p.storage)});
  // What the file leaves to a default, and figures no catalogued hardware reaches (also on stderr).
  for (const auto& [field, value] : p.defaults_used) t.add_row({"default " + field, value});
  for (const auto& w : p.warnings) t.add_row({"warning", w});
  t.print(std::cout, format);
}

const CommandRegistrar list_registrar("platforms", 20, [](CLI::App& root) {
  auto format = std::make_shared<std::string>("table");
  auto devices = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand("platforms", "List the shipped cluster platforms (or the device catalog)");
  cmd->add_flag("--devices", *devices, "List the device catalog (platforms/devices.yaml) instead");
  cmd->add_option("--format", *format, "table|csv|json")->capture_default_str();
  cmd->callback([format, devices] { *devices ? list_devices(*format) : list_platforms(*format); });
});

const CommandRegistrar check_registrar("platform", 21, [](CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("platform", "Validate and summarise one platform file");
  cmd->require_subcommand(1);
  auto target = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("table");
  CLI::App* check = cmd->add_subcommand("check", "Validate FILE|NAME and print nodes, devices, peak, links, bisection");
  check->add_option("platform", *target, "A shipped platform name or a path to a .yaml file")->required();
  check->add_option("--format", *format, "table|csv|json")->capture_default_str();
  check->callback([target, format] { check_platform(*target, *format); });
  check->footer("Transports (network.transport between nodes, node.intra.transport inside one):\n" +
                platforms::transport_help(platforms::TransportScope::ANY));
});

}  // namespace
}  // namespace dtsim::apps
