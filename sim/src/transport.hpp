// Internal to sim/: applies the platform's transports (platforms/transport.hpp) to SimGrid flows:
// size-dependent latency/bandwidth factors through the network model's callbacks, and per-flow
// start delays (host-staged pipeline fill) and rate caps (TCP connections, staged pipeline rate).
#pragma once
#include <memory>
#include <unordered_map>

#include "platforms/platform.hpp"
#include "platforms/transport.hpp"

namespace simgrid::s4u {
class Host;
class Link;
}

namespace dtsim::sim {

struct BuiltPlatform;

// What World::transfer does to one flow before SimGrid shares it.
struct FlowPlan {
  double start_delay_s = 0;  // host-staged: pipeline fill and drain of the copies
  double rate_cap_Bps = 0;   // 0 = none; else the flow's rate bound (TCP connections, staged pipeline rate)
  bool cap_only = false;     // staged inside a node: the cap alone bounds the flow (its stages hold the DMA rate)
  // The cap bounds the flow's rate and takes no link capacity beyond that rate (World::transfer sets it
  // as the action's bound): a TCP connection's own limit (copy and segment processing on one core), and a
  // staged pipeline inside a node, whose links (the host-memory path) are capacities in bytes moved.
  // Otherwise the cap is folded into the bandwidth factor, and SimGrid 3.32 charges the flow rate / factor
  // on every link of its route (the inter-node host-staged pipeline; docs/transports.md).
  bool cap_is_bound = false;
};

class FlowTransports {
 public:
  FlowTransports(const platforms::Platform& platform, const BuiltPlatform& built);
  // Whether a flow leaves its node: hosts of different places (a split node's server end is a place of
  // its own, reached over the network from the node's devices). Unplaced hosts: false.
  bool inter_node(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;
  // The transport carrying a flow: the network's between nodes, the node's intra transport inside one.
  const platforms::Transport& transport_of(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;
  FlowPlan plan(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst, double bytes) const;
  double latency_factor(double bytes, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;
  // `route_min_Bps`: the flow's slowest link; the factor also carries FlowPlan::rate_cap_Bps.
  double bandwidth_factor(double bytes, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst,
                          double route_min_Bps) const;
  // The factor SimGrid gets for a flow of `bytes` over `links` (the callback install_transport_factors
  // sets): a folded flow keeps one node's factor. World's link meter charges each link bytes / it.
  double route_bandwidth_factor(double bytes, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst,
                                const std::vector<const simgrid::s4u::Link*>& links,
                                const std::unordered_map<const simgrid::s4u::Link*, double>& folds) const;

 private:
  struct Place {
    int node = -1;
    bool device = false;  // a GPU (its buffers sit behind the device link)
    int gpu = -1;         // a GPU's index in its node
  };
  const Place* place(const simgrid::s4u::Host* h) const;

  const platforms::Transport* network_;
  const platforms::Transport* intra_;
  double efficiency_;
  double port_Bps_;          // one NIC port
  double copy_Bps_;          // device <-> host copy rate (the device's PCIe link x the pcie DMA efficiency)
  double copy_latency_s_;
  // [a * gpus + b]: GPUs a and b of a node stage through host memory (platforms::Platform::gpus_staged)
  std::vector<char> staged_pairs_;
  int node_gpus_ = 0;
  double host_stage_Bps_;       // one socket's host-memory path for staged device bytes
  int connections_;
  // Rails (node_rails > 1): a flow with a CPU-side end (a process, not a GPU on its rail NIC) goes through
  // one NIC port, as one MPI connection uses one HCA; the node's ports together serve several flows.
  double one_port_cap_Bps_ = 0;
  std::unordered_map<const simgrid::s4u::Host*, Place> places_;
};

// Links whose bandwidth World::fold_nodes multiplied, with the multiplier (the fold).
using LinkFolds = std::unordered_map<const simgrid::s4u::Link*, double>;

// Installs `transports`' factor callbacks on the root zone's network model (after build_platform). A
// flow crossing a folded link stands for `fold` flows of size / fold and gets one such flow's factor.
void install_transport_factors(std::shared_ptr<const FlowTransports> transports,
                               std::shared_ptr<const LinkFolds> folds);

}  // namespace dtsim::sim
