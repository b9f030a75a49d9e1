// Platform files: strict loading of platforms/<name>.yaml (schema in docs/platform-schema.md),
// cross-field checks (GPU count vs intra-node topology, topology capacity vs nodes), derived figures.
#include "platforms/platform.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "common/paths.hpp"
#include "common/yaml_util.hpp"
#include "platforms/src/physical_bounds.hpp"
#include "platforms/transport.hpp"

namespace dtsim::platforms {

namespace {

namespace fs = std::filesystem;

constexpr int MAX_NODES = 1'000'000;         // input sanity bounds, not hardware figures
constexpr int MAX_PER_NODE = 1024;           // GPUs, sockets, NICs per node
constexpr int MAX_TOPOLOGY_ENTRY = 100'000;  // one entry of fat-tree / dragonfly / torus shapes
constexpr int MAX_CONNECTIONS_PER_PEER = 64;  // NCCL caps NSOCKS_PERTHREAD x SOCKET_NTHREADS at 64
constexpr int HYBRID_CUBE_MESH_GPUS = 8;     // DGX-1 hybrid cube mesh: two fully linked quads + cross links

// Reads one platform file; `sources` collects per-figure sources as "section.field" -> text.
class Reader {
 public:
  Reader(std::string file, std::map<std::string, std::string>& sources) : origin_{std::move(file)}, sources_(sources) {}
  const yaml::Origin& origin() const { return origin_; }

  // A number or {value, source}; finite; `min_exclusive`: > 0 required, else >= 0.
  double number(const YAML::Node& map, const std::string& key, const std::string& ctx, bool required,
                bool positive, double fallback = 0) {
    const YAML::Node node = map[key];
    if (!node) {
      if (required) yaml::fail(map, origin_, ctx, "missing required field '" + key + "'");
      return fallback;
    }
    double v = 0;
    if (node.IsMap()) {
      const std::string sub = ctx + "." + key;
      yaml::check_keys(node, {"value", "source"}, origin_, sub);
      v = yaml::required<double>(node, "value", origin_, sub);
      sources_[ctx + "." + key] = yaml::required<std::string>(node, "source", origin_, sub);
    } else {
      v = yaml::required<double>(map, key, origin_, ctx);
    }
    if (!std::isfinite(v)) yaml::fail(node, origin_, ctx, fmt::format("field '{}' must be a finite number, got {}", key, v));
    if (positive) yaml::require_positive(v, node, key, origin_, ctx);
    else yaml::require_non_negative(v, node, key, origin_, ctx);
    if (const auto b = detail::physical_bounds(key); b && (v < b->lo || v > b->hi) && !(v == 0 && !positive))
      yaml::fail(node, origin_, ctx,
                 fmt::format("field '{}' must be between {:g} and {:g} (docs/platform-schema.md), got {:g}", key,
                             b->lo, b->hi, v));
    return v;
  }

  int integer(const YAML::Node& map, const std::string& key, const std::string& ctx, bool required, int min_value,
              int max_value, int fallback) {
    const YAML::Node node = map[key];
    if (!node) {
      if (required) yaml::fail(map, origin_, ctx, "missing required field '" + key + "'");
      return fallback;
    }
    const double v = yaml::required<double>(map, key, origin_, ctx);
    if (!(v == std::floor(v) && v >= min_value && v <= max_value))
      yaml::fail(node, origin_, ctx,
                 fmt::format("field '{}' must be a whole number from {} to {}, got {}", key, min_value, max_value, v));
    return static_cast<int>(v);
  }

  std::vector<int> int_list(const YAML::Node& map, const std::string& key, const std::string& ctx, int min_value) {
    const YAML::Node node = map[key];
    if (!node) yaml::fail(map, origin_, ctx, "missing required field '" + key + "'");
    if (!node.IsSequence() || node.size() == 0)
      yaml::fail(node, origin_, ctx, "field '" + key + "' must be a non-empty list of whole numbers");
    std::vector<int> out;
    for (const auto& item : node) {
      double v = 0;
      try {
        v = item.as<double>();
      } catch (const YAML::Exception&) {
        yaml::fail(item, origin_, ctx, "field '" + key + "' must list whole numbers, got '" + item.Scalar() + "'");
      }
      if (!(v == std::floor(v) && v >= min_value && v <= MAX_TOPOLOGY_ENTRY))
        yaml::fail(item, origin_, ctx,
                   fmt::format("field '{}' entries must be whole numbers from {} to {}, got {}", key, min_value,
                               MAX_TOPOLOGY_ENTRY, v));
      out.push_back(static_cast<int>(v));
    }
    return out;
  }

  std::string text(const YAML::Node& map, const std::string& key, const std::string& ctx, bool required) {
    if (!required && !map[key]) return {};
    return yaml::required<std::string>(map, key, origin_, ctx);
  }

  void add_source(const std::string& key, const std::string& text) { sources_[key] = text; }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& ctx, const std::string& msg) {
    yaml::fail(at, origin_, ctx, msg);
  }

 private:
  yaml::Origin origin_;
  std::map<std::string, std::string>& sources_;
};

template <class Enum>
Enum parse_enum(Reader& r, const YAML::Node& map, const std::string& key, const std::string& ctx,
                std::initializer_list<std::pair<const char*, Enum>> choices) {
  const std::string value = r.text(map, key, ctx, true);
  std::string list;
  for (const auto& [name, e] : choices) {
    if (value == name) return e;
    list += (list.empty() ? "" : ", ") + std::string(name);
  }
  r.fail(map[key], ctx, fmt::format("field '{}' must be one of {}, got '{}'", key, list, value));
}

// `transport:` of a section: a name of the table accepted for `scope`, else `fallback` when absent.
std::string parse_transport(Reader& r, const YAML::Node& map, const std::string& ctx, TransportScope scope,
                            const std::string& fallback) {
  if (!map["transport"]) {
    if (fallback.empty())
      r.fail(map, ctx, fmt::format("missing field 'transport' (no default for this technology; expected one of {})",
                                   transport_names(scope)));
    return fallback;
  }
  std::string name;
  const YAML::Node node = map["transport"];
  if (node.IsMap()) {  // {value: NAME, source: "..."}
    const std::string sub = ctx + ".transport";
    yaml::check_keys(node, {"value", "source"}, r.origin(), sub);
    name = yaml::required<std::string>(node, "value", r.origin(), sub);
    r.add_source(sub, yaml::required<std::string>(node, "source", r.origin(), sub));
  } else {
    name = r.text(map, "transport", ctx, true);
  }
  const Transport* t = transport_by_name_or_null(name);
  if (t == nullptr || !transport_allowed(*t, scope))
    r.fail(map["transport"], ctx,
           fmt::format("field 'transport' must be one of {}, got '{}'", transport_names(scope), name));
  return name;
}

IntraNode parse_intra(Reader& r, const YAML::Node& map, const std::string& ctx) {
  yaml::check_keys(map,
                   {"kind", "link_bandwidth_Bps", "latency_s", "devices_per_switch", "uplink_bandwidth_Bps",
                    "links_per_pair", "pairs", "links_per_gpu", "p2p_level", "p2p_across_sockets", "gpudirect_rdma",
                    "transport", "source", "assumptions"},
                   r.origin(), ctx);
  IntraNode in;
  in.kind = parse_enum<IntraNodeKind>(r, map, "kind", ctx,
                                      {{"shared-memory", IntraNodeKind::SHARED_MEMORY},
                                       {"pcie", IntraNodeKind::PCIE},
                                       {"nvlink-hybrid-cube-mesh", IntraNodeKind::NVLINK_HYBRID_CUBE_MESH},
                                       {"nvlink", IntraNodeKind::NVLINK},
                                       {"nvswitch", IntraNodeKind::NVSWITCH}});
  in.link_bandwidth_Bps = r.number(map, "link_bandwidth_Bps", ctx, true, true);
  in.latency_s = r.number(map, "latency_s", ctx, true, false);
  in.devices_per_switch = r.integer(map, "devices_per_switch", ctx, false, 0, MAX_PER_NODE, 0);
  in.uplink_bandwidth_Bps = r.number(map, "uplink_bandwidth_Bps", ctx, false, true, 0);
  in.links_per_pair = r.integer(map, "links_per_pair", ctx, false, 1, 64, 1);
  in.transport = parse_transport(r, map, ctx, TransportScope::INTRA_NODE,
                                 default_intra_transport(r.text(map, "kind", ctx, true)));
  in.links_per_gpu = r.integer(map, "links_per_gpu", ctx, false, 1, 64, 0);
  if (map["p2p_across_sockets"])  // the field before p2p_level: one vocabulary, NCCL_P2P_LEVEL's words
    r.fail(map["p2p_across_sockets"], ctx,
           "field 'p2p_across_sockets' is now 'p2p_level' (pxb, phb or sys; 'p2p_across_sockets: true' is 'p2p_level: sys')");
  if (map["p2p_level"]) {
    if (in.kind != IntraNodeKind::PCIE) r.fail(map["p2p_level"], ctx, "field 'p2p_level' is only for kind 'pcie'");
    in.p2p_level = parse_enum<P2pLevel>(
        r, map, "p2p_level", ctx,
        {{"pxb", P2pLevel::SWITCH}, {"phb", P2pLevel::HOST_BRIDGE}, {"sys", P2pLevel::SYSTEM}});
    in.p2p_level_stated = true;
  }
  in.gpudirect_rdma = yaml::optional<bool>(map, "gpudirect_rdma", false, r.origin(), ctx);
  if (map["gpudirect_rdma"] && in.kind != IntraNodeKind::PCIE)
    r.fail(map["gpudirect_rdma"], ctx,
           "field 'gpudirect_rdma' is only for kind 'pcie' (NVLink nodes reach their NICs by GPUDirect RDMA)");
  // Fields a kind does not use are errors, not silently ignored.
  if (map["links_per_pair"] && in.kind != IntraNodeKind::NVLINK_HYBRID_CUBE_MESH)
    r.fail(map["links_per_pair"], ctx, "field 'links_per_pair' is only for kind 'nvlink-hybrid-cube-mesh'");
  if (map["links_per_gpu"] && in.kind != IntraNodeKind::NVSWITCH)
    r.fail(map["links_per_gpu"], ctx, "field 'links_per_gpu' is only for kind 'nvswitch'");
  if (map["pairs"] && in.kind != IntraNodeKind::NVLINK)
    r.fail(map["pairs"], ctx, "field 'pairs' is only for kind 'nvlink'");
  if (in.kind == IntraNodeKind::NVSWITCH && in.links_per_gpu < 1)
    r.fail(map, ctx, "kind 'nvswitch' needs 'links_per_gpu' (NVLink bricks from each GPU into the switches)");
  if (in.kind == IntraNodeKind::NVLINK) {
    const YAML::Node pairs = map["pairs"];
    if (!pairs || !pairs.IsSequence() || pairs.size() == 0)
      r.fail(pairs ? pairs : map, ctx, "kind 'nvlink' needs 'pairs': a list of [gpu_a, gpu_b, bricks]");
    for (const auto& item : pairs) {
      std::vector<int> v;
      if (item.IsSequence() && item.size() == 3)
        for (const auto& x : item) {
          double d = -1;
          try {
            d = x.as<double>();
          } catch (const YAML::Exception&) {
          }
          v.push_back(d == std::floor(d) && d >= 0 && d <= MAX_PER_NODE ? static_cast<int>(d) : -1);
        }
      if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] < 1 || v[0] == v[1])
        r.fail(item, ctx, "field 'pairs' entries must be [gpu_a, gpu_b, bricks] with two different GPU indices and "
                          "bricks >= 1");
      NvlinkPair p{std::min(v[0], v[1]), std::max(v[0], v[1]), v[2]};
      for (const auto& q : in.pairs)
        if (q.a == p.a && q.b == p.b)
          r.fail(item, ctx, fmt::format("field 'pairs' lists GPUs {} and {} twice (give one entry with the brick count)",
                                        p.a, p.b));
      in.pairs.push_back(p);
    }
  }
  in.source = r.text(map, "source", ctx, true);
  in.assumptions = r.text(map, "assumptions", ctx, false);
  return in;
}

void parse_node(Reader& r, const YAML::Node& map, Platform& p) {
  const std::string ctx = "node";
  yaml::check_keys(map, {"cpu", "cpu_sockets", "gpu", "gpus", "memory_B", "nics", "intra", "source"}, r.origin(), ctx);
  Node& n = p.node;
  n.cpu = r.text(map, "cpu", ctx, true);
  const auto& catalog = DeviceCatalog::builtin();
  const Device* cpu = catalog.by_name_or_null(n.cpu);
  if (cpu == nullptr)
    r.fail(map["cpu"], ctx, fmt::format("field 'cpu': unknown device '{}' (known: {})", n.cpu, fmt::join(catalog.names(), ", ")));
  if (cpu->kind != DeviceKind::CPU) r.fail(map["cpu"], ctx, fmt::format("field 'cpu': device '{}' is a GPU", n.cpu));
  n.cpu_sockets = r.integer(map, "cpu_sockets", ctx, true, 1, MAX_PER_NODE, 1);
  n.gpu = r.text(map, "gpu", ctx, false);
  n.gpus = r.integer(map, "gpus", ctx, false, 0, MAX_PER_NODE, 0);
  if (!n.gpu.empty()) {
    const Device* gpu = catalog.by_name_or_null(n.gpu);
    if (gpu == nullptr)
      r.fail(map["gpu"], ctx, fmt::format("field 'gpu': unknown device '{}' (known: {})", n.gpu, fmt::join(catalog.names(), ", ")));
    if (gpu->kind != DeviceKind::GPU) r.fail(map["gpu"], ctx, fmt::format("field 'gpu': device '{}' is a CPU", n.gpu));
    if (n.gpus < 1) r.fail(map["gpus"] ? map["gpus"] : map, ctx, "field 'gpus' must be >= 1 when 'gpu' is set");
  } else if (n.gpus > 0) {
    r.fail(map["gpus"], ctx, "field 'gpus' is set but 'gpu' (the device name) is missing");
  }
  // memory_B: 0 means "as the CPU device reports" (only meaningful for the resolved `host` device).
  n.memory_B = r.number(map, "memory_B", ctx, true, false);
  if (n.memory_B == 0) {
    if (n.cpu != "host") r.fail(map["memory_B"], ctx, "field 'memory_B' must be > 0 (0 is allowed only with cpu: host)");
    n.memory_B = cpu->mem_capacity_B * n.cpu_sockets;
  }
  n.nics = r.integer(map, "nics", ctx, true, 1, MAX_PER_NODE, 1);
  n.source = r.text(map, "source", ctx, true);
  if (!map["intra"]) r.fail(map, ctx, "missing required field 'intra'");
  n.intra = parse_intra(r, map["intra"], "node.intra");
  if (!n.intra.p2p_level_stated) n.intra.p2p_level = default_p2p_level(*cpu);

  // Cross checks: the intra-node topology must match the device count.
  const YAML::Node at = map["intra"]["kind"];
  const std::string ictx = "node.intra";
  switch (n.intra.kind) {
    case IntraNodeKind::SHARED_MEMORY:
      if (n.gpus > 0)
        r.fail(at, ictx, fmt::format("kind 'shared-memory' is for CPU-only nodes, but node.gpus is {}; use 'pcie' or "
                                     "'nvlink-hybrid-cube-mesh'", n.gpus));
      break;
    case IntraNodeKind::PCIE:
      if (n.gpus < 1) r.fail(at, ictx, "kind 'pcie' needs GPUs (node.gpus >= 1); CPU-only nodes use 'shared-memory'");
      break;
    case IntraNodeKind::NVLINK:
    case IntraNodeKind::NVSWITCH:
      if (n.gpus < 1) r.fail(at, ictx, fmt::format("kind '{}' needs GPUs (node.gpus >= 1)", to_string(n.intra.kind)));
      if (n.intra.uplink_bandwidth_Bps <= 0)
        r.fail(map["intra"], ictx, fmt::format("kind '{}' needs 'uplink_bandwidth_Bps' (the PCIe path to host and NIC)",
                                               to_string(n.intra.kind)));
      for (const auto& pr : n.intra.pairs)
        if (pr.b >= n.gpus)
          r.fail(map["intra"]["pairs"], ictx,
                 fmt::format("field 'pairs' names GPU {} but node.gpus is {} (indices 0..{})", pr.b, n.gpus, n.gpus - 1));
      break;
    case IntraNodeKind::NVLINK_HYBRID_CUBE_MESH:
      if (n.gpus != HYBRID_CUBE_MESH_GPUS)
        r.fail(at, ictx, fmt::format("kind 'nvlink-hybrid-cube-mesh' needs exactly {} GPUs per node, but node.gpus is {}",
                                     HYBRID_CUBE_MESH_GPUS, n.gpus));
      if (n.intra.uplink_bandwidth_Bps <= 0)
        r.fail(map["intra"], ictx, "kind 'nvlink-hybrid-cube-mesh' needs 'uplink_bandwidth_Bps' (the PCIe path to host and NIC)");
      break;
  }
  if (n.intra.devices_per_switch > 0) {
    const YAML::Node dps = map["intra"]["devices_per_switch"];
    if (n.gpus == 0) r.fail(dps, ictx, "field 'devices_per_switch' needs GPUs (node.gpus >= 1)");
    if (n.gpus % n.intra.devices_per_switch != 0)
      r.fail(dps, ictx, fmt::format("field 'devices_per_switch' ({}) must divide node.gpus ({})", n.intra.devices_per_switch,
                                    n.gpus));
    if (n.intra.uplink_bandwidth_Bps <= 0)
      r.fail(map["intra"], ictx, "field 'devices_per_switch' needs 'uplink_bandwidth_Bps' (switch to root complex)");
  }
}

void parse_network(Reader& r, const YAML::Node& map, Platform& p) {
  const std::string ctx = "network";
  yaml::check_keys(map,
                   {"technology", "topology", "link_bandwidth_Bps", "latency_s", "protocol_efficiency",
                    "per_message_overhead_s", "backbone_bandwidth_Bps", "transport", "connections_per_peer",
                    "fat_tree", "dragonfly", "torus", "source",
                    "assumptions"},
                   r.origin(), ctx);
  Network& n = p.network;
  n.technology = r.text(map, "technology", ctx, true);
  n.topology = parse_enum<TopologyKind>(r, map, "topology", ctx,
                                        {{"star", TopologyKind::STAR},
                                         {"fat-tree", TopologyKind::FAT_TREE},
                                         {"dragonfly", TopologyKind::DRAGONFLY},
                                         {"torus", TopologyKind::TORUS}});
  n.link_bandwidth_Bps = r.number(map, "link_bandwidth_Bps", ctx, true, true);
  n.latency_s = r.number(map, "latency_s", ctx, true, false);
  n.protocol_efficiency = r.number(map, "protocol_efficiency", ctx, true, true);
  if (n.protocol_efficiency > 1)
    r.fail(map["protocol_efficiency"], ctx,
           fmt::format("field 'protocol_efficiency' must be in (0, 1], got {}", n.protocol_efficiency));
  n.per_message_overhead_s = r.number(map, "per_message_overhead_s", ctx, true, false);
  n.backbone_bandwidth_Bps = r.number(map, "backbone_bandwidth_Bps", ctx, false, false, 0);
  n.transport = parse_transport(r, map, ctx, TransportScope::INTER_NODE, default_network_transport(n.technology));
  n.connections_per_peer = r.integer(map, "connections_per_peer", ctx, false, 1, MAX_CONNECTIONS_PER_PEER, 0);
  if (map["connections_per_peer"] && transport_by_name(n.transport).model != TransportModel::SOCKET)
    r.fail(map["connections_per_peer"], ctx,
           fmt::format("field 'connections_per_peer' applies to socket transports (tcp), not '{}'", n.transport));
  n.source = r.text(map, "source", ctx, true);
  n.assumptions = r.text(map, "assumptions", ctx, false);

  const char* own_key = n.topology == TopologyKind::FAT_TREE    ? "fat_tree"
                        : n.topology == TopologyKind::DRAGONFLY ? "dragonfly"
                        : n.topology == TopologyKind::TORUS     ? "torus"
                                                                : "";
  for (const char* key : {"fat_tree", "dragonfly", "torus"})
    if (map[key] && std::string(key) != own_key)
      r.fail(map[key], ctx, fmt::format("section '{}' does not apply to topology '{}'", key, to_string(n.topology)));
  if (map["backbone_bandwidth_Bps"] && n.topology != TopologyKind::STAR)
    r.fail(map["backbone_bandwidth_Bps"], ctx, "field 'backbone_bandwidth_Bps' applies to topology 'star' only");
  if (*own_key != '\0' && !map[own_key])
    r.fail(map, ctx, fmt::format("topology '{}' needs a section '{}'", to_string(n.topology), own_key));

  long capacity = p.nodes;
  YAML::Node shape_at = map["topology"];
  if (n.topology == TopologyKind::FAT_TREE) {
    const YAML::Node f = map["fat_tree"];
    shape_at = f;
    const std::string fctx = "network.fat_tree";
    yaml::check_keys(f, {"levels", "down", "up", "parallel"}, r.origin(), fctx);
    FatTree& t = n.fat_tree;
    t.levels = r.integer(f, "levels", fctx, true, 1, 8, 2);
    t.down = r.int_list(f, "down", fctx, 1);
    t.up = r.int_list(f, "up", fctx, 1);
    t.parallel = r.int_list(f, "parallel", fctx, 1);
    for (const char* key : {"down", "up", "parallel"}) {
      const auto& list = std::string(key) == "down" ? t.down : std::string(key) == "up" ? t.up : t.parallel;
      if (list.size() != static_cast<size_t>(t.levels))
        r.fail(f[key], fctx, fmt::format("field '{}' must have one entry per level ({}), got {}", key, t.levels, list.size()));
    }
    if (t.capacity() > MAX_NODES)
      r.fail(f, fctx, fmt::format("the tree has more than {} leaves (product of 'down'), the supported maximum", MAX_NODES));
    // SimGrid's fat tree: level l+1 has (elements of level l) x up[l] / down[l] switches; it must be whole.
    double elements = static_cast<double>(t.capacity());
    for (int l = 0; l < t.levels; ++l) {
      const double next = elements * t.up[l] / t.down[l];
      if (next != std::floor(next) || next < 1)
        r.fail(f, fctx, fmt::format("level {} would have {} switches (elements x up / down must be a whole number)", l + 1, next));
      elements = next;
    }
    t.oversubscription = t.levels >= 2 ? static_cast<double>(t.down[0]) * t.parallel[0] /
                                             (static_cast<double>(t.up[1]) * t.parallel[1])
                                       : 1.0;
    capacity = t.capacity();
  } else if (n.topology == TopologyKind::DRAGONFLY) {
    const YAML::Node d = map["dragonfly"];
    shape_at = d;
    const std::string dctx = "network.dragonfly";
    yaml::check_keys(d,
                     {"groups", "chassis_per_group", "routers_per_chassis", "nodes_per_router", "group_links",
                      "chassis_links", "router_links", "global_link_bandwidth_Bps"},
                     r.origin(), dctx);
    Dragonfly& g = n.dragonfly;
    g.groups = r.integer(d, "groups", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.chassis_per_group = r.integer(d, "chassis_per_group", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.routers_per_chassis = r.integer(d, "routers_per_chassis", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.nodes_per_router = r.integer(d, "nodes_per_router", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.group_links = r.integer(d, "group_links", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.chassis_links = r.integer(d, "chassis_links", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.router_links = r.integer(d, "router_links", dctx, true, 1, MAX_TOPOLOGY_ENTRY, 1);
    g.global_link_bandwidth_Bps = r.number(d, "global_link_bandwidth_Bps", dctx, false, true, 0);
    capacity = g.capacity();
  } else if (n.topology == TopologyKind::TORUS) {
    const YAML::Node t = map["torus"];
    shape_at = t;
    yaml::check_keys(t, {"dims"}, r.origin(), "network.torus");
    n.torus.dims = r.int_list(t, "dims", "network.torus", 1);
    capacity = n.torus.capacity();
  }
  if (capacity < p.nodes)
    r.fail(shape_at, "network", fmt::format("topology '{}' has {} node slots but nodes is {}", to_string(n.topology),
                                            capacity, p.nodes));
  if (capacity > MAX_NODES)
    r.fail(shape_at, "network", fmt::format("topology '{}' has more than {} node slots, the supported maximum",
                                            to_string(n.topology), MAX_NODES));
}

void parse_storage(Reader& r, const YAML::Node& map, Platform& p) {
  const std::string ctx = "storage";
  yaml::check_keys(map, {"kind", "read_bandwidth_Bps", "metadata_ops_per_s", "latency_s", "source", "assumptions"},
                   r.origin(), ctx);
  Storage& s = p.storage;
  s.kind = parse_enum<StorageKind>(r, map, "kind", ctx,
                                   {{"none", StorageKind::NONE},
                                    {"local-ssd", StorageKind::LOCAL_SSD},
                                    {"parallel-fs", StorageKind::PARALLEL_FS}});
  if (s.kind == StorageKind::NONE) {
    for (const char* key : {"read_bandwidth_Bps", "metadata_ops_per_s", "latency_s"})
      if (map[key]) r.fail(map[key], ctx, fmt::format("field '{}' does not apply to kind 'none'", key));
    return;
  }
  s.read_bandwidth_Bps = r.number(map, "read_bandwidth_Bps", ctx, true, true);
  s.latency_s = r.number(map, "latency_s", ctx, true, false);
  s.metadata_ops_per_s = r.number(map, "metadata_ops_per_s", ctx, s.kind == StorageKind::PARALLEL_FS, true, 0);
  s.source = r.text(map, "source", ctx, true);
  s.assumptions = r.text(map, "assumptions", ctx, false);
}

// Product of shape entries, saturated so absurd shapes cannot overflow (they fail the capacity check).
long product(std::initializer_list<double> factors) {
  double out = 1;
  for (double x : factors) out *= x;
  return out >= static_cast<double>(std::numeric_limits<long>::max()) ? std::numeric_limits<long>::max()
                                                                       : static_cast<long>(out);
}
long product(const std::vector<int>& v) {
  double out = 1;
  for (int x : v) out *= x;
  return out >= static_cast<double>(std::numeric_limits<long>::max()) ? std::numeric_limits<long>::max()
                                                                       : static_cast<long>(out);
}

// The optional fields `root` leaves out and what the loaded platform took for each (docs/platform-schema.md).
std::map<std::string, std::string> defaults_of(const YAML::Node& root, const Platform& p) {
  std::map<std::string, std::string> out;
  const YAML::Node intra = root["node"]["intra"], net = root["network"];
  const auto& in = p.node.intra;
  if (!intra["transport"]) out["node.intra.transport"] = fmt::format("{} (by intra kind {})", in.transport, to_string(in.kind));
  if (in.kind == IntraNodeKind::PCIE) {
    if (!intra["devices_per_switch"])
      out["node.intra.devices_per_switch"] = "none (no PCIe switch: each GPU's link goes to its socket's root complex)";
    if (!intra["p2p_level"] && p.node.gpus > 1)
      out["node.intra.p2p_level"] = fmt::format("{} (NCCL 2.7's rule for CPU '{}')", p2p_level_name(in.p2p_level), p.node.cpu);
    if (!intra["gpudirect_rdma"] &&
        transport_by_name(p.network.transport, TransportScope::INTER_NODE).model == TransportModel::DIRECT)
      out["node.intra.gpudirect_rdma"] = "false (GPUs reach the NIC through host memory)";
  }
  if (in.kind == IntraNodeKind::NVLINK_HYBRID_CUBE_MESH && !intra["links_per_pair"])
    out["node.intra.links_per_pair"] = "1 (NVLink brick per directly linked GPU pair)";
  if (!net["transport"])
    out["network.transport"] = fmt::format("{} (by technology '{}')", p.network.transport, p.network.technology);
  if (!net["connections_per_peer"] &&
      transport_by_name(p.network.transport, TransportScope::INTER_NODE).model == TransportModel::SOCKET)
    out["network.connections_per_peer"] =
        fmt::format("{} (transport {}'s default)",
                    transport_by_name(p.network.transport, TransportScope::INTER_NODE).default_connections_per_peer,
                    p.network.transport);
  if (p.network.topology == TopologyKind::STAR && !net["backbone_bandwidth_Bps"])
    out["network.backbone_bandwidth_Bps"] = "0 (a non-blocking switch)";
  if (p.network.topology == TopologyKind::DRAGONFLY && !net["dragonfly"]["global_link_bandwidth_Bps"])
    out["network.dragonfly.global_link_bandwidth_Bps"] =
        fmt::format("{:g} (network.link_bandwidth_Bps)", p.network.link_bandwidth_Bps);
  if (!root["storage"]) out["storage.kind"] = "none (no storage section: predictions with --data real are refused)";
  else if (p.storage.kind == StorageKind::LOCAL_SSD && !root["storage"]["metadata_ops_per_s"])
    out["storage.metadata_ops_per_s"] = "0 (file opens not modelled on a local SSD)";
  if (!root["collective_library"])
    out["collective_library"] = "none named (the framework's library, else GPU nodes nccl-2.7, CPU nodes openmpi-4.0)";
  return out;
}

// Highest figures any catalogued part reaches, for the unit-slip warnings: a figure above one is no
// error of range (docs/platform-schema.md bounds), but no built hardware reaches it.
// NIC port: 800 Gb/s = 100e9 B/s per direction (XDR InfiniBand, NVIDIA ConnectX-8 / Quantum-X800, 2024).
constexpr double FASTEST_NIC_PORT_Bps = 100e9;
// Intra-node link per GPU or process pair: 900 GB/s per direction (NVLink 5 on B200, 18 links x 50 GB/s,
// NVIDIA Blackwell datasheet); above any PCIe (PCIe 6.0 x16: 121 GB/s) or memory copy path.
constexpr double FASTEST_INTRA_LINK_Bps = 900e9;
// Node memory: no cluster node in the catalog has under 1 GiB; smaller is gigabytes written as bytes.
constexpr double SMALLEST_NODE_MEMORY_B = 1024.0 * 1024 * 1024;
constexpr double BITS_PER_BYTE = 8;

std::vector<std::string> reach_warnings(const YAML::Node& root, const Platform& p, const yaml::Origin& origin) {
  std::vector<std::string> out;
  auto at = [&](const YAML::Node& n) { return origin.where(n); };
  if (p.network.link_bandwidth_Bps > FASTEST_NIC_PORT_Bps)
    out.push_back(fmt::format(
        "{}: network: field 'link_bandwidth_Bps' is {:g} B/s ({:g} Gb/s per port), above any NIC port ({:g} Gb/s, "
        "XDR InfiniBand); if {:g} is in bits per second, write {:g} (bytes per second)",
        at(root["network"]["link_bandwidth_Bps"]), p.network.link_bandwidth_Bps,
        p.network.link_bandwidth_Bps * BITS_PER_BYTE / 1e9, FASTEST_NIC_PORT_Bps * BITS_PER_BYTE / 1e9,
        p.network.link_bandwidth_Bps, p.network.link_bandwidth_Bps / BITS_PER_BYTE));
  if (p.node.intra.link_bandwidth_Bps > FASTEST_INTRA_LINK_Bps)
    out.push_back(fmt::format(
        "{}: node.intra: field 'link_bandwidth_Bps' is {:g} B/s, above any intra-node link ({:g} B/s per direction, "
        "NVLink 5 per GPU); if {:g} is in bits per second, write {:g} (bytes per second)",
        at(root["node"]["intra"]["link_bandwidth_Bps"]), p.node.intra.link_bandwidth_Bps, FASTEST_INTRA_LINK_Bps,
        p.node.intra.link_bandwidth_Bps, p.node.intra.link_bandwidth_Bps / BITS_PER_BYTE));
  if (p.node.memory_B > 0 && p.node.memory_B < SMALLEST_NODE_MEMORY_B && p.node.cpu != "host")
    out.push_back(fmt::format("{}: node: field 'memory_B' is {:g} bytes, less than any cluster node's memory; if {:g} "
                              "is in gigabytes, write {:g} (bytes)",
                              at(root["node"]["memory_B"]), p.node.memory_B, p.node.memory_B, p.node.memory_B * 1e9));
  return out;
}

}  // namespace

long FatTree::capacity() const { return down.empty() ? 0 : product(down); }
long Dragonfly::capacity() const {
  return product({double(groups), double(chassis_per_group), double(routers_per_chassis), double(nodes_per_router)});
}
long Torus::capacity() const { return dims.empty() ? 0 : product(dims); }

std::string to_string(IntraNodeKind kind) {
  switch (kind) {
    case IntraNodeKind::SHARED_MEMORY: return "shared-memory";
    case IntraNodeKind::PCIE: return "pcie";
    case IntraNodeKind::NVLINK_HYBRID_CUBE_MESH: return "nvlink-hybrid-cube-mesh";
    case IntraNodeKind::NVLINK: return "nvlink";
    case IntraNodeKind::NVSWITCH: return "nvswitch";
  }
  return "?";
}

std::string to_string(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::STAR: return "star";
    case TopologyKind::FAT_TREE: return "fat-tree";
    case TopologyKind::DRAGONFLY: return "dragonfly";
    case TopologyKind::TORUS: return "torus";
  }
  return "?";
}

std::string to_string(StorageKind kind) {
  switch (kind) {
    case StorageKind::NONE: return "none";
    case StorageKind::LOCAL_SSD: return "local-ssd";
    case StorageKind::PARALLEL_FS: return "parallel-fs";
  }
  return "?";
}

int Network::hops_between_nodes() const {
  switch (topology) {
    case TopologyKind::STAR: return 2;                      // node - switch - node
    case TopologyKind::FAT_TREE: return 2 * fat_tree.levels;  // up to the top level and down
    case TopologyKind::DRAGONFLY: return 3;                 // node - router - router - node (same chassis)
    case TopologyKind::TORUS: return 1;                     // neighbours
  }
  return 2;
}

double Network::message_time_s(double bytes, int hops) const {
  return per_message_overhead_s + hops * latency_s + bytes / (link_bandwidth_Bps * protocol_efficiency);
}

int Node::gpu_socket(int gpu) const {
  const int sockets = std::max(1, cpu_sockets);
  const int per_socket = std::max(1, (gpus + sockets - 1) / sockets);
  return std::min(sockets - 1, std::max(0, gpu) / per_socket);
}

int Node::gpu_switch(int gpu) const {
  const bool switched = intra.kind != IntraNodeKind::SHARED_MEMORY && intra.devices_per_switch > 0 &&
                        intra.uplink_bandwidth_Bps > 0;
  return switched ? gpu / intra.devices_per_switch : -1;
}

double Node::device_link_Bps() const {
  const bool nvlink = intra.kind == IntraNodeKind::NVLINK_HYBRID_CUBE_MESH || intra.kind == IntraNodeKind::NVLINK ||
                      intra.kind == IntraNodeKind::NVSWITCH;
  return nvlink ? intra.uplink_bandwidth_Bps : intra.link_bandwidth_Bps;
}

bool Node::beyond_p2p_level(int a, int b) const {
  if (intra.kind != IntraNodeKind::PCIE || a == b) return false;
  if (gpu_switch(a) >= 0 && gpu_switch(a) == gpu_switch(b)) return false;  // under one switch: always P2P
  if (gpu_socket(a) != gpu_socket(b)) return intra.p2p_level != P2pLevel::SYSTEM;
  return intra.p2p_level == P2pLevel::SWITCH;  // through the socket's host bridge
}

const char* p2p_level_name(P2pLevel level) {
  switch (level) {
    case P2pLevel::SWITCH: return "pxb";
    case P2pLevel::HOST_BRIDGE: return "phb";
    case P2pLevel::SYSTEM: return "sys";
  }
  return "?";
}

P2pLevel default_p2p_level(const Device& cpu) {
  if (cpu.intel_before_skylake_sp()) return P2pLevel::SWITCH;
  return cpu.amd() ? P2pLevel::SYSTEM : P2pLevel::HOST_BRIDGE;
}

bool Platform::gpus_staged(int a, int b) const {
  return node.beyond_p2p_level(a, b) &&
         transport_by_name(node.intra.transport, TransportScope::INTRA_NODE).host_staging_efficiency > 0;
}

bool Platform::any_gpus_staged() const {
  for (int a = 0; a < node.gpus; ++a)
    for (int b = a + 1; b < node.gpus; ++b)
      if (gpus_staged(a, b)) return true;
  return false;
}

const Device& Platform::worker_device() const {
  const auto& catalog = DeviceCatalog::builtin();
  return has_gpus() ? catalog.by_name(node.gpu) : catalog.by_name(node.cpu);
}

const Device& Platform::cpu_device() const { return DeviceCatalog::builtin().by_name(node.cpu); }

double Platform::node_peak_flops() const {
  if (has_gpus()) return worker_device().peak_flops * node.gpus;
  return cpu_device().peak_flops * node.cpu_sockets;
}

double Platform::bisection_bandwidth_Bps() const {
  const Network& n = network;
  const double half_nodes = std::floor(nodes / 2.0);
  const double injection = half_nodes * n.link_bandwidth_Bps * node.nics;  // what half the nodes can send
  const double B = n.link_bandwidth_Bps;
  double cut = std::numeric_limits<double>::infinity();
  switch (n.topology) {
    case TopologyKind::STAR:
      if (n.backbone_bandwidth_Bps > 0) cut = n.backbone_bandwidth_Bps;
      break;
    case TopologyKind::FAT_TREE: {
      // Each link layer l carries (elements of level l) x up[l] x parallel[l] links; half of them serve
      // each half of the leaves. Only the populated fraction nodes / leaves of the tree is counted.
      const auto& t = n.fat_tree;
      const double fill = static_cast<double>(nodes) / static_cast<double>(t.capacity());
      double elements = static_cast<double>(t.capacity());
      for (int l = 0; l < t.levels; ++l) {
        const double links = elements * t.up[l] * t.parallel[l];
        cut = std::min(cut, fill * links * B / 2.0);
        elements = elements * t.up[l] / t.down[l];
      }
      break;
    }
    case TopologyKind::DRAGONFLY: {
      // The cut through the highest level with more than one element: floor(k/2) x ceil(k/2) element pairs,
      // each joined by `links` links, times the lower elements that each carry such links.
      const auto& d = n.dragonfly;
      auto pairs = [](int k) { return std::floor(k / 2.0) * std::ceil(k / 2.0); };
      const double global_Bps = d.global_link_bandwidth_Bps > 0 ? d.global_link_bandwidth_Bps : B;
      if (d.groups > 1) cut = pairs(d.groups) * d.group_links * global_Bps;
      else if (d.chassis_per_group > 1) cut = pairs(d.chassis_per_group) * d.routers_per_chassis * d.chassis_links * B;
      else if (d.routers_per_chassis > 1) cut = pairs(d.routers_per_chassis) * d.router_links * B;
      break;
    }
    case TopologyKind::TORUS: {
      // Cutting across the largest dimension k: N / k links per plane, two planes with wrap-around (k > 2).
      const long total = n.torus.capacity();
      const int k = n.torus.dims.empty() ? 1 : *std::max_element(n.torus.dims.begin(), n.torus.dims.end());
      if (k > 1) cut = static_cast<double>(total) / k * (k > 2 ? 2 : 1) * B;
      break;
    }
  }
  return std::min(injection, cut);
}

double Platform::gpu_nic_host_Bps() const {
  const auto& in = node.intra;
  if (in.kind != IntraNodeKind::PCIE || node.gpus < 1 || in.gpudirect_rdma ||
      transport_by_name(network.transport, TransportScope::INTER_NODE).model != TransportModel::DIRECT)
    return 0;
  return in.link_bandwidth_Bps * std::max(1, node.nics) *
         transport_by_name(in.transport, TransportScope::INTRA_NODE).nic_host_efficiency;
}

std::string platform_path(const std::string& name_or_file) {
  const bool looks_like_path = name_or_file.find('/') != std::string::npos ||
                               (name_or_file.size() > 5 && name_or_file.ends_with(".yaml")) ||
                               (name_or_file.size() > 4 && name_or_file.ends_with(".yml"));
  if (looks_like_path) return name_or_file;
  if (name_or_file.empty()) throw InputError("platform: empty name (expected a shipped name or a .yaml file)");
  const fs::path shipped = data_dir() / "platforms" / (name_or_file + ".yaml");
  std::error_code ec;  // a name too long for a file name is simply unknown
  if (name_or_file != "devices" && fs::is_regular_file(shipped, ec)) return shipped.string();
  std::string known;
  for (const auto& n : platform_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(
      fmt::format("unknown platform '{}' (known: {}; or give a path to a .yaml file)", printable(name_or_file), known));
}

std::vector<std::string> platform_names() {
  std::vector<std::string> names;
  const fs::path dir = data_dir() / "platforms";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".yaml") continue;
    const std::string stem = entry.path().stem().string();
    if (stem != "devices") names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Platform load_platform(const std::string& name_or_file) {
  const std::string path = platform_path(name_or_file);
  const YAML::Node root = yaml::load_file(path);
  Platform p;
  p.file = path;
  Reader r(path, p.figure_sources);
  yaml::check_keys(root, {"name", "description", "nodes", "collective_library", "node", "network", "storage"},
                   r.origin(), "platform");
  p.name = r.text(root, "name", "platform", true);
  if (p.name.empty()) r.fail(root["name"], "platform", "field 'name' must not be empty");
  p.description = r.text(root, "description", "platform", true);
  p.nodes = r.integer(root, "nodes", "platform", true, 1, MAX_NODES, 1);
  for (const char* section : {"node", "network"})
    if (!root[section]) r.fail(root, "platform", fmt::format("missing required section '{}'", section));
  parse_node(r, root["node"], p);
  parse_network(r, root["network"], p);
  if (const YAML::Node g = root["node"]["intra"]["gpudirect_rdma"];
      g && platforms::transport_by_name(p.network.transport).model != TransportModel::DIRECT)
    r.fail(g, "node.intra",
           fmt::format("field 'gpudirect_rdma' applies with network.transport 'rdma', not '{}' (host-staged and "
                       "socket transports move device bytes through host memory already)",
                       p.network.transport));
  if (const YAML::Node lib = root["collective_library"]) {  // a name or {value: NAME, source: "..."}
    if (lib.IsMap()) {
      yaml::check_keys(lib, {"value", "source"}, r.origin(), "platform.collective_library");
      p.collective_library = yaml::required<std::string>(lib, "value", r.origin(), "platform.collective_library");
      r.add_source("collective_library",
                   yaml::required<std::string>(lib, "source", r.origin(), "platform.collective_library"));
    } else {
      p.collective_library = r.text(root, "collective_library", "platform", true);
    }
    if (p.collective_library.empty()) r.fail(lib, "platform", "field 'collective_library' must not be empty");
    p.collective_library_at = r.origin().where(lib);
  }
  if (root["storage"]) parse_storage(r, root["storage"], p);
  p.defaults_used = defaults_of(root, p);
  p.warnings = reach_warnings(root, p, r.origin());
  // Each warning once per process, however often the file is loaded (a sweep loads it per point).
  static std::set<std::string> warned;
  for (const auto& w : p.warnings)
    if (warned.insert(w).second) std::cerr << "dtsim: warning: " << w << '\n';
  return p;
}

}  // namespace dtsim::platforms
