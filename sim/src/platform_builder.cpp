// Builds a platforms::Platform in SimGrid through the s4u API: per node one full zone (devices, node
// host, storage end, gateway router behind the NIC link) placed in a star / fat-tree / dragonfly /
// torus zone. Method, link sharing and the network model are documented in docs/simulation-comm.md.
#include "sim/src/platform_builder.hpp"

#include <cctype>

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <cmath>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <unordered_map>
#include <algorithm>

#include "common/errors.hpp"
#include "platforms/device.hpp"
#include "platforms/transport.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
using s4u::LinkInRoute;
using Dir = s4u::LinkInRoute::Direction;
using NetPoint = simgrid::kernel::routing::NetPoint;

namespace {

void require_positive(const platforms::Platform& p, const std::string& field, double value) {
  if (!(std::isfinite(value) && value > 0))
    throw InputError(fmt::format("{}: {} must be a positive finite number (got {})", p.file.empty() ? p.name : p.file,
                                 field, value));
}
void require_non_negative(const platforms::Platform& p, const std::string& field, double value) {
  if (!(std::isfinite(value) && value >= 0))
    throw InputError(fmt::format("{}: {} must be a finite number >= 0 (got {})", p.file.empty() ? p.name : p.file,
                                 field, value));
}

// Number of leaves (node slots) the platform's inter-node topology offers.
long topology_leaves(const platforms::Platform& p) {
  const auto& n = p.network;
  switch (n.topology) {
    case platforms::TopologyKind::STAR:
      return p.nodes;
    case platforms::TopologyKind::FAT_TREE: {
      long leaves = 1;
      for (int d : n.fat_tree.down) leaves *= d;
      return leaves;
    }
    case platforms::TopologyKind::DRAGONFLY: {
      const auto& d = n.dragonfly;
      return static_cast<long>(d.groups) * d.chassis_per_group * d.routers_per_chassis * d.nodes_per_router;
    }
    case platforms::TopologyKind::TORUS: {
      long leaves = 1;
      for (int d : n.torus.dims) leaves *= d;
      return leaves;
    }
  }
  return 0;
}

}  // namespace

int node_rails(const platforms::Platform& p) {
  const bool nvswitch = p.node.intra.kind == platforms::IntraNodeKind::NVSWITCH;
  return nvswitch && p.has_gpus() && p.node.nics > 1 ? std::min(p.node.nics, p.node.gpus) : 1;
}

int rail_of_gpu(const platforms::Platform& p, int gpu) {
  const int rails = node_rails(p);
  return rails > 1 ? std::min(rails - 1, gpu * rails / std::max(1, p.node.gpus)) : 0;
}

bool nvswitch_reduces(const platforms::Platform& p) {
  if (p.node.intra.kind != platforms::IntraNodeKind::NVSWITCH) return false;
  const platforms::Device* gpu = platforms::DeviceCatalog::builtin().by_name_or_null(p.node.gpu);
  return gpu != nullptr && gpu->nvlink_sharp();  // devices.yaml's microarchitecture field, not the name
}

NetworkCapacity network_capacity(const platforms::Platform& p) {
  using platforms::IntraNodeKind;
  const auto& intra = p.node.intra;
  const int gpus = std::max(1, p.node.gpus);
  const double own_Bps = p.node.device_link_Bps();  // each device's own link (NodeBuilder::build: own[g])
  const double port_Bps = p.network.link_bandwidth_Bps;
  const double nic_Bps = port_Bps * std::max(1, p.node.nics);  // the node's NIC link, all ports
  NetworkCapacity c;
  switch (intra.kind) {
    case IntraNodeKind::NVSWITCH:  // device to device only through the two NVSwitch ports
      c.rank_intra_Bps = intra.link_bandwidth_Bps * std::max(1, intra.links_per_gpu);
      break;
    case IntraNodeKind::NVLINK_HYBRID_CUBE_MESH:  // at most every other GPU a direct neighbour, and the PCIe side
      c.rank_intra_Bps = own_Bps + (gpus - 1) * intra.link_bandwidth_Bps * std::max(1, intra.links_per_pair);
      break;
    case IntraNodeKind::NVLINK: {
      std::vector<double> incident(static_cast<std::size_t>(gpus), 0.0);
      for (const auto& pr : intra.pairs)
        for (int g : {pr.a, pr.b})
          if (g >= 0 && g < gpus) incident[static_cast<std::size_t>(g)] += intra.link_bandwidth_Bps * pr.bricks;
      c.rank_intra_Bps = own_Bps + *std::max_element(incident.begin(), incident.end());
      break;
    }
    case IntraNodeKind::PCIE:
    case IntraNodeKind::SHARED_MEMORY:
      c.rank_intra_Bps = own_Bps;
      break;
  }
  // GPUs reach the NIC over their own link; shared-memory (CPU) processes straight through the NIC link.
  const bool via_own = intra.kind != IntraNodeKind::SHARED_MEMORY;
  const int rails = node_rails(p);
  const double nic_path_Bps = rails > 1 ? port_Bps : nic_Bps;
  c.rank_inter_Bps = via_own ? std::min(own_Bps, nic_path_Bps) : nic_path_Bps;
  c.node_inter_Bps = rails > 1 ? rails * port_Bps : nic_Bps;
  // SimGrid charges a flow rate / factor on each link of its route (transport.cpp), so a link carries at
  // most its bandwidth x the largest factor its flows get: the transport's largest over its size bands
  // (a pair staged through host memory is capped, not factored: 1).
  const auto largest_factor = [&](const platforms::Transport& t) {
    double f = 0;
    for (const auto& band : t.bands) f = std::max(f, t.bandwidth_factor(band.min_size_B, p.network.protocol_efficiency));
    return f;
  };
  const double intra_factor =
      p.any_gpus_staged()
          ? std::max(1.0, largest_factor(platforms::transport_by_name(intra.transport, platforms::TransportScope::INTRA_NODE)))
          : largest_factor(platforms::transport_by_name(intra.transport, platforms::TransportScope::INTRA_NODE));
  const double inter_factor =
      largest_factor(platforms::transport_by_name(p.network.transport, platforms::TransportScope::INTER_NODE));
  c.rank_intra_Bps *= intra_factor;
  c.rank_inter_Bps *= inter_factor;  // node-crossing flows take the network transport's factor on every link
  c.node_inter_Bps *= inter_factor;
  return c;
}

namespace {

// One node: a full zone with explicit routes between its devices, its node host, its storage end
// and its gateway router (the NIC side).
//
//   GPU0 -pcie- [switch uplink] -+- node host (CPU)         NVLink: GPUs also linked pairwise
//   GPU1 -pcie- [switch uplink] -+                                  (DGX-1 hybrid cube mesh, or the
//                                                                    listed pairs: 2 hops via the widest
//                                                                    common neighbour, else PCIe)
//                                                           NVSwitch: GPUk -port k- [switch] -port j- GPUj,
//                                                                    a port = links_per_gpu bricks
//   ...                          +- NIC link -- gateway -> inter-node topology
//   storage end -- local SSD link or shared PFS link -- node host
struct NodeBuilder {
  const platforms::Platform& p;
  int workers_per_node;
  s4u::Link* pfs_link = nullptr;  // shared by all nodes (PARALLEL_FS)
  BuiltPlatform* out;

  // Full-duplex links are pairs of plain links (the UP one stands for the pair in LinkInRoute):
  // SimGrid's own split-duplex links are looked up by name through every zone on each add_route,
  // which made building quadratic in the node count.
  std::unordered_map<const s4u::Link*, s4u::Link*> down_of;
  std::vector<s4u::Host*> hosts;  // of the node being built

  s4u::Host* host(s4u::NetZone* zone, const std::string& name) {
    hosts.push_back(zone->create_host(name, NOMINAL_HOST_SPEED_FLOPS));
    return hosts.back();
  }

  s4u::Link* duplex(s4u::NetZone* zone, const std::string& name, double bw_Bps, double latency_s) {
    s4u::Link* up = zone->create_link(name + "_UP", bw_Bps)->set_latency(latency_s);
    down_of[up] = zone->create_link(name + "_DOWN", bw_Bps)->set_latency(latency_s);
    return up;
  }
  std::vector<LinkInRoute> resolve(const std::vector<LinkInRoute>& route, bool reverse) {
    std::vector<LinkInRoute> out;
    for (const auto& l : route) {
      Dir d = l.get_direction();
      if (reverse && d != Dir::NONE) d = d == Dir::UP ? Dir::DOWN : Dir::UP;
      auto it = down_of.find(l.get_link());
      out.emplace_back(d == Dir::DOWN && it != down_of.end() ? it->second : l.get_link());
    }
    if (reverse) std::reverse(out.begin(), out.end());
    return out;
  }
  // Route a -> b as given and b -> a reversed, each direction on its own half of duplex links.
  void add_both(s4u::NetZone* zone, NetPoint* a, NetPoint* b, const std::vector<LinkInRoute>& route) {
    zone->add_route(a, b, nullptr, nullptr, resolve(route, false), false);
    zone->add_route(b, a, nullptr, nullptr, resolve(route, true), false);
  }

  // own_server_nic: the node's parameter server (its node host) keeps the NIC and its devices reach
  // the gateway through a NIC of their own ("Split roles", docs/simulation-training.md).
  std::pair<NetPoint*, NetPoint*> build(s4u::NetZone* parent, int node, bool dedicated, bool own_server_nic) {
    const std::string tag = fmt::format("node{}", node);
    auto* zone = s4u::create_full_zone(tag);
    zone->set_parent(parent);
    const auto& intra = p.node.intra;
    const int gpus = dedicated ? 0 : workers_per_node;

    hosts.clear();
    s4u::Host* node_host = host(zone, tag + "-cpu");
    NetPoint* gw = zone->create_router(tag + "-gw");
    // NIC: all NIC ports of the node together; half the per-message overhead at each end.
    s4u::Link* nic = duplex(zone, tag + "-nic", p.network.link_bandwidth_Bps * std::max(1, p.node.nics),
                            p.network.per_message_overhead_s / 2);
    add_both(zone, node_host->get_netpoint(), gw, {LinkInRoute(nic, Dir::UP)});
    s4u::Link* device_nic = own_server_nic && gpus > 0
                                ? duplex(zone, tag + "-nic-dev", p.network.link_bandwidth_Bps * std::max(1, p.node.nics),
                                         p.network.per_message_overhead_s / 2)
                                : nic;
    // Rails: each GPU reaches the network through the NIC under its own PCIe switch (GPUDirect RDMA), one
    // port each, as NCCL pairs every GPU with its closest NIC; the node host keeps all ports together.
    std::vector<s4u::Link*> rail_nic;
    if (device_nic == nic && gpus > 0 && node_rails(p) > 1)
      for (int r = 0; r < node_rails(p); ++r)
        rail_nic.push_back(duplex(zone, fmt::format("{}-nic{}", tag, r), p.network.link_bandwidth_Bps,
                                  p.network.per_message_overhead_s / 2));
    // The server's network end (split nodes): reached from the node's own devices through both NICs, as
    // a folded representative's flows for the node's other members reach it (World::split_server_host).
    s4u::Host* server_end = nullptr;
    if (device_nic != nic) {
      server_end = host(zone, tag + "-srv");
      add_both(zone, server_end->get_netpoint(), gw, {LinkInRoute(nic, Dir::UP)});
      out->split_server_hosts.resize(static_cast<std::size_t>(node) + 1, nullptr);
      out->split_server_hosts[static_cast<std::size_t>(node)] = server_end;
    }

    // Devices and their path to the CPU side.
    std::vector<s4u::Host*> devs;
    std::vector<std::vector<LinkInRoute>> to_cpu(gpus);  // device -> node host, UP direction
    std::vector<s4u::Link*> own(gpus, nullptr);
    const bool hcm = intra.kind == platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH;
    const bool pairs = intra.kind == platforms::IntraNodeKind::NVLINK;
    const bool nvswitch = intra.kind == platforms::IntraNodeKind::NVSWITCH;
    const bool nvlink = hcm || pairs || nvswitch;  // the device's own link is then its PCIe path (uplink)
    const bool pcie = intra.kind == platforms::IntraNodeKind::PCIE;
    const double dev_link_Bps = p.node.device_link_Bps();
    std::vector<s4u::Link*> switches;
    for (int g = 0; g < gpus; ++g) {
      devs.push_back(host(zone, fmt::format("{}-w{}", tag, g)));
      own[g] = duplex(zone, fmt::format("{}-w{}-link", tag, g), dev_link_Bps, intra.latency_s / 2);
      to_cpu[g].emplace_back(own[g], Dir::UP);
      if (const int s = p.node.gpu_switch(g); s >= 0) {
        if (s >= static_cast<int>(switches.size()))
          switches.push_back(duplex(zone, fmt::format("{}-sw{}-up", tag, s), intra.uplink_bandwidth_Bps, 0));
        to_cpu[g].emplace_back(switches[s], Dir::UP);
      }
      add_both(zone, devs[g]->get_netpoint(), node_host->get_netpoint(), to_cpu[g]);
    }
    // Host-memory path of each socket for device bytes staged between GPUs beyond the P2P level: one
    // shared link (both directions), so opposite staged flows through one socket split it (NCCL SHM,
    // docs/transports.md).
    std::vector<s4u::Link*> host_stage;
    if (pcie && gpus > 1 && p.any_gpus_staged()) {
      const double stage_Bps =
          intra.link_bandwidth_Bps * platforms::transport_by_name(intra.transport).host_staging_efficiency;
      for (int k = 0; k < p.node.cpu_sockets; ++k)
        host_stage.push_back(zone->create_link(fmt::format("{}-host{}-stage", tag, k), stage_Bps)->set_latency(0));
    }
    // Without GPUDirect RDMA the GPUs' bytes to and from the NIC pass through host memory: one path per NIC
    // port, shared by both directions and every GPU of the node (nccl-tests, docs/transports.md "GPU to NIC").
    s4u::Link* nic_host = nullptr;
    if (gpus > 0 && p.gpu_nic_via_host_memory())
      nic_host = zone->create_link(tag + "-nic-host", p.gpu_nic_host_Bps())->set_latency(0);
    for (int g = 0; g < gpus; ++g) {
      // GPUs reach the NIC over their PCIe path; a CPU process hands its buffer to the NIC directly
      // (RDMA / socket DMA from process memory), so its inter-node path is the NIC, not the
      // process-to-process memory-copy link.
      auto via_nic = (pcie || nvlink) ? to_cpu[g] : std::vector<LinkInRoute>{};
      if (nic_host != nullptr) via_nic.emplace_back(nic_host);
      via_nic.emplace_back(rail_nic.empty() ? device_nic : rail_nic[static_cast<std::size_t>(rail_of_gpu(p, g))], Dir::UP);
      add_both(zone, devs[g]->get_netpoint(), gw, via_nic);
      if (server_end != nullptr) {  // out through the devices' NIC, back in through the server's
        via_nic.emplace_back(nic, Dir::DOWN);
        add_both(zone, devs[g]->get_netpoint(), server_end->get_netpoint(), via_nic);
      }
    }
    auto reversed_down = [](std::vector<LinkInRoute> up) {
      std::vector<LinkInRoute> down;
      for (auto it = up.rbegin(); it != up.rend(); ++it)
        down.emplace_back(it->get_link(), it->get_direction() == Dir::UP ? Dir::DOWN : Dir::UP);
      return down;
    };
    // Device to device.
    std::vector<std::vector<s4u::Link*>> nvl(gpus, std::vector<s4u::Link*>(gpus, nullptr));
    std::vector<std::vector<int>> bricks(gpus, std::vector<int>(gpus, 0));
    auto hcm_neighbours = [](int a, int b) { return a / 4 == b / 4 || (a % 4 == b % 4); };
    if (hcm) {
      for (int a = 0; a < gpus; ++a)
        for (int b = a + 1; b < gpus; ++b)
          if (hcm_neighbours(a, b))
            nvl[a][b] = duplex(zone, fmt::format("{}-nvl{}-{}", tag, a, b),
                               intra.link_bandwidth_Bps * std::max(1, intra.links_per_pair), intra.latency_s);
    }
    if (pairs)  // explicit pairs; GPUs beyond this node's workers are not built
      for (const auto& pr : intra.pairs)
        if (pr.b < gpus) {
          nvl[pr.a][pr.b] = duplex(zone, fmt::format("{}-nvl{}-{}", tag, pr.a, pr.b),
                                   intra.link_bandwidth_Bps * pr.bricks, intra.latency_s);
          bricks[pr.a][pr.b] = bricks[pr.b][pr.a] = pr.bricks;
        }
    // NVSwitch: one port per GPU carrying all its bricks; the switch fabric itself is non-blocking.
    std::vector<s4u::Link*> port(nvswitch ? gpus : 0, nullptr);
    for (int g = 0; g < static_cast<int>(port.size()); ++g)
      port[g] = duplex(zone, fmt::format("{}-nvsw-port{}", tag, g), intra.link_bandwidth_Bps * intra.links_per_gpu,
                       intra.latency_s / 2);
    // NVLink SHARP: the switch itself as an end (in-switch reduction and multicast), one port per GPU.
    if (nvswitch && gpus > 1 && nvswitch_reduces(p)) {
      s4u::Host* sw = host(zone, tag + "-nvswitch");
      for (int g = 0; g < gpus; ++g) add_both(zone, devs[g]->get_netpoint(), sw->get_netpoint(), {LinkInRoute(port[g], Dir::UP)});
      out->nvswitch_hosts.resize(static_cast<std::size_t>(node) + 1, nullptr);
      out->nvswitch_hosts[static_cast<std::size_t>(node)] = sw;
    }
    auto nvl_hop = [&](int a, int b) {  // UP is the low-to-high index direction
      return a < b ? LinkInRoute(nvl[a][b], Dir::UP) : LinkInRoute(nvl[b][a], Dir::DOWN);
    };
    for (int a = 0; a < gpus; ++a)
      for (int b = a + 1; b < gpus; ++b) {
        std::vector<LinkInRoute> route;
        if (nvswitch) {
          route = {LinkInRoute(port[a], Dir::UP), LinkInRoute(port[b], Dir::DOWN)};
        } else if (pairs) {
          if (nvl[a][b] != nullptr) {
            route.push_back(nvl_hop(a, b));
          } else {  // through the GPU with the widest two-hop NVLink path, else through the CPU side
            int via = -1, width = 0;
            for (int c = 0; c < gpus; ++c)
              if (c != a && c != b && std::min(bricks[a][c], bricks[c][b]) > width) {
                via = c;
                width = std::min(bricks[a][c], bricks[c][b]);
              }
            if (via >= 0) {
              route.push_back(nvl_hop(a, via));
              route.push_back(nvl_hop(via, b));
            } else {
              route = to_cpu[a];
              for (auto& l : reversed_down(to_cpu[b])) route.push_back(l);
            }
          }
        } else if (hcm) {
          if (nvl[a][b] != nullptr) {
            route.push_back(nvl_hop(a, b));
          } else {  // two hops through a GPU neighbouring both (hybrid cube mesh)
            int via = (b / 4) * 4 + a % 4;
            if (via >= gpus) via = (a / 4) * 4 + b % 4;
            if (via < gpus) {
              route.push_back(nvl_hop(a, via));
              route.push_back(nvl_hop(via, b));
            } else {  // partial mesh: through the CPU side
              route = to_cpu[a];
              for (auto& l : reversed_down(to_cpu[b])) route.push_back(l);
            }
          }
        } else if (pcie && p.node.gpu_switch(a) >= 0 && p.node.gpu_switch(a) == p.node.gpu_switch(b)) {
          route = {LinkInRoute(own[a], Dir::UP), LinkInRoute(own[b], Dir::DOWN)};  // peer to peer under one switch
        } else if (pcie && p.gpus_staged(a, b)) {
          // Staged through the receiver's socket memory, each direction on its own route.
          auto staged = [&](int from, int to) {
            std::vector<LinkInRoute> r = to_cpu[from];
            r.emplace_back(host_stage[p.node.gpu_socket(to)]);
            for (auto& l : reversed_down(to_cpu[to])) r.push_back(l);
            return resolve(r, false);
          };
          zone->add_route(devs[a]->get_netpoint(), devs[b]->get_netpoint(), nullptr, nullptr, staged(a, b), false);
          zone->add_route(devs[b]->get_netpoint(), devs[a]->get_netpoint(), nullptr, nullptr, staged(b, a), false);
          continue;
        } else {
          route = to_cpu[a];
          for (auto& l : reversed_down(to_cpu[b])) route.push_back(l);
        }
        add_both(zone, devs[a]->get_netpoint(), devs[b]->get_netpoint(), route);
      }

    // Storage end.
    s4u::Host* storage = nullptr;
    if (p.storage.kind == platforms::StorageKind::PARALLEL_FS && pfs_link == nullptr)  // one link, used by every node
      pfs_link = zone->create_link("pfs", p.storage.read_bandwidth_Bps)->set_latency(p.storage.latency_s);
    if (p.storage.kind != platforms::StorageKind::NONE) {
      storage = host(zone, tag + "-storage");
      s4u::Link* l = pfs_link;
      if (p.storage.kind == platforms::StorageKind::LOCAL_SSD)
        l = zone->create_link(tag + "-ssd", p.storage.read_bandwidth_Bps)->set_latency(p.storage.latency_s);
      add_both(zone, storage->get_netpoint(), node_host->get_netpoint(), {LinkInRoute(l)});
      for (int g = 0; g < gpus; ++g) {
        std::vector<LinkInRoute> route{LinkInRoute(l)};
        for (auto& x : reversed_down(to_cpu[g])) route.push_back(x);
        add_both(zone, storage->get_netpoint(), devs[g]->get_netpoint(), route);
      }
    }
    // The topology is detached from SimGrid's root while it is built (build_platform), so the zone's seal,
    // which finds its hosts by a walk from the root, sees none of them: they are sealed here, in the name
    // order of that walk (NetZoneImpl's host map), unless the walk found them (a host sealed twice fires
    // its creation signal twice).
    zone->seal();
    if (zone->get_all_hosts().empty()) {
      std::sort(hosts.begin(), hosts.end(), [](const s4u::Host* a, const s4u::Host* b) { return a->get_name() < b->get_name(); });
      for (s4u::Host* h : hosts) h->seal();
    }

    out->node_hosts.push_back(node_host);
    if (!dedicated) {
      for (auto* h : devs) out->workers.push_back(h);
      out->storage_hosts.push_back(storage);
    }
    return {zone->get_netpoint(), gw};
  }
};

// SimGrid 3.32's dragonfly gives every level the zone's one bandwidth (parallel links merged into one
// link of n x bandwidth). Its global links are the ones it names "blue_link_between_group_*"; they
// are re-rated here to group_links x global_link_bandwidth_Bps.
void rate_global_links(const platforms::Dragonfly& d, unsigned groups_built) {
  constexpr std::string_view GLOBAL_LINK_PREFIX = "blue_link_between_group_";
  const auto links = s4u::Engine::get_instance()->get_filtered_links(
      [&](s4u::Link* l) { return l->get_name().rfind(GLOBAL_LINK_PREFIX, 0) == 0; });
  if (links.empty() && groups_built > 1)
    throw Failure(fmt::format("dragonfly: SimGrid created no links named {}*; the global link bandwidth cannot be set",
                              GLOBAL_LINK_PREFIX));
  for (s4u::Link* l : links) l->set_bandwidth(d.global_link_bandwidth_Bps * d.group_links);
}

// Rail-optimised fat trees (DGX SuperPOD): each NIC of a node goes to its rail's leaf switch. The logical
// leaf stands for a unit's rail leaves, and SimGrid routes one node pair over one of a node's parallel
// leaf links, so each of them carries the node's rails together (rails x port); the per-rail NIC links in
// the node keep each rail at one port. SimGrid names fat-tree links link_from_<child>_<parent>_<n>, the
// processing nodes (the leaves) being ids 0 .. leaves-1 and the first-level switches the ids counted down
// from 2 x leaves - 1 (SimGrid 3.32 FatTreeZone::generate_switches).
void widen_rail_leaf_links(const platforms::Platform& p, const std::vector<unsigned>& down, const std::vector<unsigned>& up) {
  long leaves = 1, first_level = up.front();
  for (unsigned d : down) leaves *= d;
  for (std::size_t i = 1; i < down.size(); ++i) first_level *= down[i];
  constexpr std::string_view PREFIX = "link_from_";
  const auto links = s4u::Engine::get_instance()->get_filtered_links([&](s4u::Link* l) {
    const std::string& name = l->get_name();
    if (name.rfind(PREFIX, 0) != 0) return false;
    std::size_t pos = PREFIX.size();
    auto number = [&]() {
      const std::size_t from = pos;
      while (pos < name.size() && std::isdigit(static_cast<unsigned char>(name[pos])) != 0) ++pos;
      const long v = pos > from ? std::stol(name.substr(from, pos - from)) : -1;
      if (pos < name.size() && name[pos] == '_') ++pos;
      return v;
    };
    const long child = number();
    const long parent = number();
    return child >= 0 && child < leaves && parent >= 2 * leaves - first_level;
  });
  if (links.empty()) throw Failure("fat tree: SimGrid created no node-to-leaf links named link_from_*; rails cannot be widened");
  for (s4u::Link* l : links) l->set_bandwidth(p.network.link_bandwidth_Bps * node_rails(p));
}

}  // namespace

void validate_for_simulation(const platforms::Platform& p, const Layout& layout) {
  const std::string file = p.file.empty() ? p.name : p.file;
  require_positive(p, "network.link_bandwidth_Bps", p.network.link_bandwidth_Bps);
  require_non_negative(p, "network.latency_s", p.network.latency_s);
  require_non_negative(p, "network.per_message_overhead_s", p.network.per_message_overhead_s);
  require_non_negative(p, "network.backbone_bandwidth_Bps", p.network.backbone_bandwidth_Bps);
  try {
    platforms::transport_by_name(p.network.transport, platforms::TransportScope::INTER_NODE);
    platforms::transport_by_name(p.node.intra.transport, platforms::TransportScope::INTRA_NODE);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: network.transport / node.intra.transport: {}", file, e.what()));
  }
  if (p.network.connections_per_peer < 0)
    throw InputError(fmt::format("{}: network.connections_per_peer must be >= 0 (got {})", file,
                                 p.network.connections_per_peer));
  if (!(p.network.protocol_efficiency > 0 && p.network.protocol_efficiency <= 1))
    throw InputError(fmt::format("{}: network.protocol_efficiency must be in (0, 1] (got {})", file,
                                 p.network.protocol_efficiency));
  require_positive(p, "node.intra.link_bandwidth_Bps", p.node.intra.link_bandwidth_Bps);
  require_non_negative(p, "node.intra.latency_s", p.node.intra.latency_s);
  if (p.node.intra.kind == platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH ||
      p.node.intra.kind == platforms::IntraNodeKind::NVLINK || p.node.intra.kind == platforms::IntraNodeKind::NVSWITCH)
    require_positive(p, "node.intra.uplink_bandwidth_Bps", p.node.intra.uplink_bandwidth_Bps);
  if (p.node.intra.kind == platforms::IntraNodeKind::NVSWITCH && p.node.intra.links_per_gpu < 1)
    throw InputError(fmt::format("{}: node.intra kind nvswitch needs links_per_gpu >= 1", p.file.empty() ? p.name : p.file));
  if (p.node.intra.kind == platforms::IntraNodeKind::PCIE && p.node.intra.devices_per_switch > 0)
    require_positive(p, "node.intra.uplink_bandwidth_Bps", p.node.intra.uplink_bandwidth_Bps);
  if (p.storage.kind != platforms::StorageKind::NONE) {
    require_positive(p, "storage.read_bandwidth_Bps", p.storage.read_bandwidth_Bps);
    require_non_negative(p, "storage.latency_s", p.storage.latency_s);
  }
  if (layout.nodes < 1 || layout.workers_per_node < 1 || layout.dedicated_ps_nodes < 0)
    throw InputError(fmt::format("{}: layout needs >= 1 node and >= 1 worker per node (got {} nodes, {} per node)", file,
                                 layout.nodes, layout.workers_per_node));
  if (p.node.intra.kind == platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH && layout.workers_per_node > 8)
    throw InputError(fmt::format("{}: node.intra NVLink hybrid cube mesh holds at most 8 GPUs (asked {} per node)", file,
                                 layout.workers_per_node));
  if (p.has_gpus() && layout.workers_per_node > p.node.gpus)
    throw InputError(fmt::format("{}: {} workers per node asked but node.gpus is {}", file, layout.workers_per_node,
                                 p.node.gpus));
  const long needed = static_cast<long>(layout.nodes) + layout.dedicated_ps_nodes;
  if (needed > p.nodes)
    throw InputError(fmt::format("{}: {} nodes needed ({} worker + {} parameter-server) but the platform has nodes: {}",
                                 file, needed, layout.nodes, layout.dedicated_ps_nodes, p.nodes));
  const auto& n = p.network;
  if (n.topology == platforms::TopologyKind::FAT_TREE) {
    const auto& f = n.fat_tree;
    if (f.levels < 1 || f.down.size() != static_cast<size_t>(f.levels) || f.up.size() != f.down.size() ||
        f.parallel.size() != f.down.size())
      throw InputError(fmt::format("{}: network.fat_tree needs levels >= 1 and down/up/parallel lists of that length",
                                   file));
    for (size_t i = 0; i < f.down.size(); ++i)
      if (f.down[i] < 1 || f.up[i] < 1 || f.parallel[i] < 1)
        throw InputError(fmt::format("{}: network.fat_tree down/up/parallel entries must be >= 1", file));
  } else if (n.topology == platforms::TopologyKind::DRAGONFLY) {
    const auto& d = n.dragonfly;
    if (d.groups < 1 || d.chassis_per_group < 1 || d.routers_per_chassis < 1 || d.nodes_per_router < 1 ||
        d.group_links < 1 || d.chassis_links < 1 || d.router_links < 1)
      throw InputError(fmt::format("{}: network.dragonfly counts must all be >= 1", file));
    // SimGrid 3.32's dragonfly leaves a group through the router of its chassis whose index is the target
    // group (DragonflyZone::get_local_route, green_links_[target group]): with more groups built than
    // routers per chassis it reads past that table and crashes.
    const long per_group = static_cast<long>(d.chassis_per_group) * d.routers_per_chassis * d.nodes_per_router;
    const long groups = std::min<long>((needed + per_group - 1) / per_group, d.groups);
    if (groups > d.routers_per_chassis)
      throw InputError(fmt::format("{}: network.dragonfly: {} nodes fill {} groups, but SimGrid's dragonfly routes at most "
                                   "routers_per_chassis ({}) groups (a global hop leaves through the router whose index "
                                   "in the chassis is the target group); use larger groups (chassis_per_group)",
                                   file, needed, groups, d.routers_per_chassis));
  } else if (n.topology == platforms::TopologyKind::TORUS) {
    if (n.torus.dims.empty())
      throw InputError(fmt::format("{}: network.torus.dims must list at least one dimension", file));
    for (int d : n.torus.dims)
      if (d < 1) throw InputError(fmt::format("{}: network.torus.dims entries must be >= 1", file));
  }
  if (topology_leaves(p) < needed)
    throw InputError(fmt::format("{}: the network topology has {} node slots, {} needed", file, topology_leaves(p),
                                 needed));
}

LinkRole describe_link(const std::string& name) {
  // Duplex halves end in _UP (away from the node's devices / out of the node) or _DOWN.
  std::string base = name, dir;
  for (const char* suffix : {"_UP", "_DOWN"})
    if (base.ends_with(suffix)) {
      base.resize(base.size() - std::string(suffix).size());
      dir = suffix;
    }
  const bool up = dir == "_UP";
  auto number_after = [](const std::string& s, std::size_t pos, std::size_t* end) {
    std::size_t i = pos;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0) ++i;
    *end = i;
    return i > pos ? std::stoi(s.substr(pos, i - pos)) : -1;
  };
  std::size_t end = 0;
  if (base.starts_with("node")) {
    const int node = number_after(base, 4, &end);
    if (node >= 0 && end < base.size() && base[end] == '-') {
      const std::string part = base.substr(end + 1);
      const std::string where = fmt::format("node {} ", node);
      if (part == "nic") return {"nic", node, where + (up ? "NIC (sending)" : "NIC (receiving)")};
      if (part.starts_with("nic") && part.size() > 3 && std::isdigit(static_cast<unsigned char>(part[3])) != 0) {
        std::size_t e0 = 0;
        return {"nic", node, fmt::format("{}NIC {} ({})", where, number_after(part, 3, &e0), up ? "sending" : "receiving")};
      }
      if (part == "nic-dev") return {"nic", node, where + (up ? "devices' NIC (sending)" : "devices' NIC (receiving)")};
      if (part == "nic-host")
        return {"host-staging", node, where + "host memory between GPUs and NIC (no GPUDirect RDMA)"};
      if (part == "ssd") return {"storage", node, where + "SSD"};
      if (part.starts_with("host") && part.ends_with("-stage")) {
        std::size_t e1 = 0;
        return {"host-staging", node,
                fmt::format("{}socket {} host memory (device bytes staged across sockets)", where, number_after(part, 4, &e1))};
      }
      std::size_t e2 = 0;
      if (part.starts_with("sw") && part.ends_with("-up"))
        return {"pcie-switch", node,
                fmt::format("{}PCIe switch {} uplink ({})", where, number_after(part, 2, &e2), up ? "to host" : "to devices")};
      if (part.starts_with("w") && part.ends_with("-link"))
        return {"device-link", node,
                fmt::format("{}device {} link ({})", where, number_after(part, 1, &e2), up ? "to host" : "to device")};
      if (part.starts_with("nvl") || part.starts_with("nvsw-port")) return {"nvlink", node, where + "NVLink " + part};
    }
  }
  if (base.starts_with("port")) {
    const int node = number_after(base, 4, &end);
    if (node >= 0 && end == base.size())
      return {"switch-port", node, fmt::format("node {} switch port ({})", node, up ? "sending" : "receiving")};
  }
  if (base == "backbone") return {"fabric", -1, "switch backbone"};
  if (base == "pfs") return {"storage", -1, "parallel file system"};
  return {"fabric", -1, "fabric link " + name};
}

void configure_network_model(const platforms::Platform& /*p*/) {
  // CM02: plain max-min sharing, no TCP/WAN calibration (LV08's x13.01 latency would be wrong for
  // HPC fabrics). The latency and bandwidth factors are per flow, set by the platform's transports
  // (install_transport_factors in sim/src/transport.cpp, docs/transports.md): SimGrid refuses factor
  // callbacks when network/latency-factor or network/bandwidth-factor is configured, so neither is.
  // Per-message overhead is carried as latency on the NIC links (builder).
  s4u::Engine::set_config("network/model:CM02");
  s4u::Engine::set_config("network/crosstraffic:0");  // RDMA/TCP acks are not modelled as reverse flows
  // The TCP window bound (gamma / 2 latency) is off: fabrics here are RDMA or tuned TCP; the TCP
  // transport's per-connection cap stands for what one connection sustains.
  s4u::Engine::set_config("network/TCP-gamma:0");
}

namespace {
// A split node's link to its switch (the topology's, e.g. SimGrid's dragonfly router-to-node link) is
// shared by its two roles: given twice its bandwidth, neither role's traffic is limited by the
// other's there, each being bounded by its own NIC. Found as the first link outside the node's zone
// on its route to another node (its switch side), and the last one on the way back.
void widen_split_nodes(BuiltPlatform& out, const Layout& layout) {
  const int split = std::min(layout.server_nic_nodes, layout.nodes);
  if (split < 1 || out.node_hosts.size() < 2) return;
  out.split_switch_links.assign(static_cast<std::size_t>(split), {});
  for (int node = 0; node < split; ++node) {
    s4u::Host* self = out.node_hosts[static_cast<std::size_t>(node)];
    s4u::Host* other = out.node_hosts[static_cast<std::size_t>((node + 1) % out.node_hosts.size())];
    const std::string own_prefix = fmt::format("node{}-", node);
    const auto outside = [&own_prefix](const s4u::Link* l) { return !l->get_name().starts_with(own_prefix); };
    std::vector<s4u::Link*> there, back;
    self->route_to(other, there, nullptr);
    other->route_to(self, back, nullptr);
    const auto up = std::find_if(there.begin(), there.end(), outside);
    const auto down = std::find_if(back.rbegin(), back.rend(), outside);
    if (up == there.end() || down == back.rend())
      throw Failure(fmt::format("split node {}: no link to its switch found (internal error)", node));
    for (s4u::Link* l : {*up, *down}) {
      l->set_bandwidth(2 * l->get_bandwidth());
      out.split_switch_links[static_cast<std::size_t>(node)].push_back(l);
    }
  }
}
}  // namespace

BuiltPlatform build_platform(const platforms::Platform& p, const Layout& layout) {
  BuiltPlatform out;
  out.workers_per_node = layout.workers_per_node;
  out.nodes = layout.nodes;
  out.dedicated_nodes = layout.dedicated_ps_nodes;
  out.rails = node_rails(p);
  const int total_nodes = layout.nodes + layout.dedicated_ps_nodes;
  NodeBuilder nb{p, layout.workers_per_node, nullptr, &out, {}, {}};
  const auto split = [&layout](int node) { return node < layout.nodes && node < layout.server_nic_nodes; };
  const auto& n = p.network;
  const double port_Bps = n.link_bandwidth_Bps;
  // The topology is built detached from SimGrid's root, an empty zone made first, and attached to it once
  // wired. Every link and host SimGrid creates is checked for a unique name by a walk of all zones from the
  // root (StandardLinkImpl and HostImpl constructors), and every zone seal lists its hosts by such a walk
  // (NetZoneImpl::get_all_hosts): with the node zones in reach, that made building quadratic in the node
  // count (75% of a 4,096-worker Piz Daint prediction). Detached, the walks see an empty root. Names stay
  // unique by construction (node tags, SimGrid's own counters), and nothing else changes: same zones,
  // links, hosts, creation order and routes (the root is above the topology's zone, never on a route).
  s4u::NetZone* top = s4u::create_empty_zone("dtsim");
  const auto adopt_models = [top](s4u::NetZone* zone) {  // what set_parent(top) would copy
    auto* from = top->get_impl();
    auto* to = zone->get_impl();
    if (to->get_network_model() != nullptr) return;
    to->set_network_model(from->get_network_model());
    to->set_cpu_pm_model(from->get_cpu_pm_model());
    to->set_cpu_vm_model(from->get_cpu_vm_model());
    to->set_disk_model(from->get_disk_model());
    to->set_host_model(from->get_host_model());
  };
  // Unused leaves of a fixed topology hold a bare host.
  auto leaf = [&](s4u::NetZone* zone, const std::vector<unsigned long>& /*coord*/,
                  unsigned long id) -> std::pair<NetPoint*, NetPoint*> {
    adopt_models(zone);  // SimGrid's cluster zones made without a parent have no models yet
    if (static_cast<long>(id) < total_nodes)
      return nb.build(zone, static_cast<int>(id), static_cast<int>(id) >= layout.nodes, split(static_cast<int>(id)));
    return {zone->create_host(fmt::format("spare{}", id), NOMINAL_HOST_SPEED_FLOPS)->get_netpoint(), nullptr};
  };

  s4u::NetZone* root = nullptr;
  switch (n.topology) {
    case platforms::TopologyKind::STAR: {
      //   node0 --port-- +           The switch: one split-duplex port per node (all its NICs),
      //   node1 --port-- + backbone  plus a shared backbone link when the switch is blocking.
      //   ...           +
      root = s4u::create_star_zone("cluster");
      adopt_models(root);
      s4u::Link* backbone = nullptr;
      if (n.backbone_bandwidth_Bps > 0)
        backbone = root->create_link("backbone", n.backbone_bandwidth_Bps)->set_latency(0);
      for (int i = 0; i < total_nodes; ++i) {
        auto [np, gw] = nb.build(root, i, i >= layout.nodes, split(i));
        auto* port = root->create_split_duplex_link(fmt::format("port{}", i), port_Bps * std::max(1, p.node.nics))
                         ->set_latency(n.latency_s);
        std::vector<LinkInRoute> links{LinkInRoute(port, Dir::UP)};
        if (backbone != nullptr) links.emplace_back(backbone);
        root->add_route(np, nullptr, gw, nullptr, links, true);
      }
      root->set_parent(top);
      break;
    }
    case platforms::TopologyKind::FAT_TREE: {
      // Trimmed to the leaves needed: the top level keeps its shape but only as many children as used.
      const auto& f = n.fat_tree;
      std::vector<unsigned> down(f.down.begin(), f.down.end()), up(f.up.begin(), f.up.end()),
          par(f.parallel.begin(), f.parallel.end());
      long below = 1;
      for (size_t i = 0; i + 1 < down.size(); ++i) below *= down[i];
      down.back() = static_cast<unsigned>(std::max<long>(1, (total_nodes + below - 1) / below));
      s4u::ClusterCallbacks cb(leaf);
      root = s4u::create_fatTree_zone("cluster", nullptr, s4u::FatTreeParams(f.levels, down, up, par), cb, port_Bps,
                                      n.latency_s, s4u::Link::SharingPolicy::SPLITDUPLEX);
      root->set_parent(top);
      if (node_rails(p) > 1) widen_rail_leaf_links(p, down, up);
      break;
    }
    case platforms::TopologyKind::DRAGONFLY: {
      //   group 0 ══ global (optical) ══ group 1 ...   every pair of groups; group_links merged into one
      //     chassis ── chassis_links ── chassis        all-to-all inside a group
      //       router ── router_links ── router         all-to-all inside a chassis; nodes per router
      // Trimmed to the groups needed, as the fat tree is: leaf ids map to the same group, chassis and
      // router whatever the group count, and a route between two used groups takes their own global
      // link, so predictions do not change, and the zone holds only the links the job can use.
      const auto& d = n.dragonfly;
      const long per_group = static_cast<long>(d.chassis_per_group) * d.routers_per_chassis * d.nodes_per_router;
      const auto groups = static_cast<unsigned>(std::clamp<long>((total_nodes + per_group - 1) / per_group, 1, d.groups));
      s4u::ClusterCallbacks cb(leaf);
      s4u::DragonflyParams params({groups, d.group_links}, {d.chassis_per_group, d.chassis_links},
                                  {d.routers_per_chassis, d.router_links}, d.nodes_per_router);
      root = s4u::create_dragonfly_zone("cluster", nullptr, params, cb, port_Bps, n.latency_s,
                                        s4u::Link::SharingPolicy::SPLITDUPLEX);
      root->set_parent(top);
      if (d.global_link_bandwidth_Bps > 0) rate_global_links(d, groups);
      break;
    }
    case platforms::TopologyKind::TORUS: {
      std::vector<unsigned long> dims(n.torus.dims.begin(), n.torus.dims.end());
      s4u::ClusterCallbacks cb(leaf);
      root = s4u::create_torus_zone("cluster", nullptr, dims, cb, port_Bps, n.latency_s,
                                    s4u::Link::SharingPolicy::SPLITDUPLEX);
      root->set_parent(top);
      break;
    }
  }
  top->seal();
  widen_split_nodes(out, layout);
  return out;
}

}  // namespace dtsim::sim
