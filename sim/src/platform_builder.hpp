// Internal to sim/: turns a platforms::Platform into SimGrid zones (one zone per node inside a star,
// fat-tree, dragonfly or torus zone) and sets the network model. See docs/simulation-comm.md.
#pragma once
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace simgrid::s4u {
class Host;
class Link;
}

namespace dtsim::sim {

struct Layout;

// What the builder created, in node-major rank order.
struct BuiltPlatform {
  std::vector<simgrid::s4u::Host*> workers;        // rank -> device host (GPU or CPU process)
  std::vector<simgrid::s4u::Host*> node_hosts;     // node -> CPU/NIC-side host; dedicated PS nodes follow the worker nodes
  std::vector<simgrid::s4u::Host*> storage_hosts;  // node -> storage end (local SSD or the node's PFS client); empty if none
  int workers_per_node = 1;
  int nodes = 1;           // worker nodes
  int dedicated_nodes = 0; // parameter-server nodes after the worker nodes
  // Split nodes (Layout::server_nic_nodes): node -> its link to its switch, both directions (widened),
  // and its server's network end (World::split_server_host).
  std::vector<std::vector<simgrid::s4u::Link*>> split_switch_links;
  std::vector<simgrid::s4u::Host*> split_server_hosts;
};

// Nominal host speed in flop/s. Compute is given to the World in seconds (calibrated elsewhere), so
// the speed only converts seconds to an Exec size; it is not a hardware figure.
inline constexpr double NOMINAL_HOST_SPEED_FLOPS = 1e9;

// Checks the platform's network and intra-node figures (positive, finite) and the layout against the
// platform's capacity; throws InputError naming the platform file and field.
void validate_for_simulation(const platforms::Platform& platform, const Layout& layout);

// Sets the SimGrid network model and its factors from the platform. Must run after the Engine is
// created and before any zone exists.
void configure_network_model(const platforms::Platform& platform);

// What a link built here is, read back from the name the builder gave it (the names are made below).
struct LinkRole {
  std::string kind;   // nic | switch-port | fabric | pcie-switch | device-link | nvlink | storage
  int node = -1;      // the node it belongs to, -1 for shared fabric and storage
  std::string label;  // in words: "node 3 NIC (sending)"
};
LinkRole describe_link(const std::string& name);

// Builds every zone, host and link; the root zone is sealed on return.
BuiltPlatform build_platform(const platforms::Platform& platform, const Layout& layout);

}  // namespace dtsim::sim
