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
  // node -> its NVSwitch as an end of flows (NVLink SHARP, nvswitch_reduces); empty or nullptr where none.
  std::vector<simgrid::s4u::Host*> nvswitch_hosts;
  int rails = 1;  // node_rails of the platform
};

// NICs a GPU node's devices use as rails: each GPU reaches the network through its own NIC (the one under
// its PCIe switch) when an NVSwitch node has several; 1 = all devices share the node's NIC ports as one
// link (also on NVLink-mesh nodes such as the DGX-1, whose 8-node fine-mode rings ran 2x slower with
// rails and channels, not understood yet: docs/simulation-comm.md).
int node_rails(const platforms::Platform& platform);
// The rail (NIC index) of GPU `gpu` of a node: GPUs split evenly over the rails in index order.
int rail_of_gpu(const platforms::Platform& platform, int gpu);
// Whether the node's NVSwitch reduces and multicasts in the switch (NVLink SHARP, "NVLS"): third-generation
// NVSwitch with Hopper GPUs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, "NVLink Switch System").
bool nvswitch_reduces(const platforms::Platform& platform);

// Upper bounds on the rates the built platform lets a device move bytes at, one direction (links are
// full duplex, each half of the same bandwidth), from the links the builder below attaches: what a lower
// bound on a collective's time divides its bytes by (sim/layout_bound.hpp). Transport factors are <= 1
// and a protocol's efficiency puts bytes / efficiency on the wire, so no flow beats these.
struct NetworkCapacity {
  // Everything a device exchanges with the other devices of its node crosses its NVSwitch port, or its
  // own link and its NVLink links (PCIe and NVLink meshes, shared memory): their sum.
  double rank_intra_Bps = 0;
  // Everything a device exchanges with other nodes crosses its path to the NIC: its own link (GPUs) and
  // its rail's NIC port, or the node's NIC ports together: the slowest of them.
  double rank_inter_Bps = 0;
  // Everything a node exchanges with other nodes crosses its NIC links: all its ports together.
  double node_inter_Bps = 0;
};
NetworkCapacity network_capacity(const platforms::Platform& platform);

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
