// Internal to sim/: one simulated world per process: the SimGrid engine, the platform built from a
// platforms::Platform (node-major rank order), and just-in-time activities with completion callbacks.
// Used by the standalone comm patterns (comm.cpp) and by the training replay (training.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "platforms/platform.hpp"
#include "sim/comm.hpp"

namespace simgrid::s4u {
class Host;
class Link;
}

namespace dtsim::sim {

struct Layout {
  int nodes = 1;
  int workers_per_node = 1;
  int dedicated_ps_nodes = 0;  // extra nodes holding parameter servers (PsPlacement::DEDICATED)
  // The first this many worker nodes host a colocated parameter server that keeps the node's NIC while
  // the node's devices get one of their own, and their link to the switch is twice as wide ("Split
  // roles", docs/simulation-training.md): what lets their workers fold like any other.
  int server_nic_nodes = 0;
};

class World {
 public:
  World(const platforms::Platform& platform, const Layout& layout);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int workers() const;
  int nodes() const;             // worker nodes (dedicated PS nodes not counted)
  int workers_per_node() const;
  int node_of(int rank) const;
  simgrid::s4u::Host* worker_host(int rank) const;     // rank order is node-major
  simgrid::s4u::Host* node_host(int node) const;       // the node's CPU/NIC-side host (servers, I/O)
  simgrid::s4u::Host* dedicated_ps_host(int i) const;
  // A split node's (Layout::server_nic_nodes) server as reached over the network from the node's own
  // devices: out through their NIC and in through the server's, where node_host is reached inside the
  // node. nullptr for other nodes.
  simgrid::s4u::Host* split_server_host(int node) const;
  // NICs each node's devices use as rails, one per GPU group (node_rails); 1 when they share the ports.
  int rails_per_node() const;
  // The node's NVSwitch as a flow end (in-switch reduction, NVLink SHARP); nullptr where there is none.
  simgrid::s4u::Host* nvswitch_host(int node) const;
  // Whether a flow from src to dst leaves a node (the network transport's factors apply, its bytes are
  // inter-node): hosts on different nodes, or a split node's server end reached from its own devices.
  bool crosses_network(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;
  simgrid::s4u::Host* storage_host() const;            // node 0's storage end; nullptr when storage is NONE
  // The storage end serving `node`: its local SSD, or its client side of the shared parallel file
  // system (one shared link of the PFS aggregate bandwidth); nullptr when the platform has no storage.
  simgrid::s4u::Host* storage_host_for(int node) const;
  // Sum of link latencies from src to dst (what World::transfer waits before the flow starts).
  double route_latency_s(simgrid::s4u::Host* src, simgrid::s4u::Host* dst) const;
  // The slowest link's bandwidth on the route from src to dst (0 for src == dst).
  double route_bandwidth_Bps(simgrid::s4u::Host* src, simgrid::s4u::Host* dst) const;
  // What a message of `bytes` pays before bandwidth on an idle network: the route latency times its
  // transport's latency factor, plus the host-staged pipeline fill (closed forms in coarse mode).
  double message_latency_s(simgrid::s4u::Host* src, simgrid::s4u::Host* dst, double bytes) const;
  bool idle() const;                    // no activity of this world in flight
  std::int64_t flows_started() const;   // transfers created so far
  std::int64_t activities_started() const;  // execs + transfers + timers created so far
  std::int64_t transfers_in_flight() const; // network flows started and not finished
  // Links measured: every link a transfer of this world has crossed, by id in order of first use.
  // Bytes are SimGrid's link usage (B/s) integrated over simulated time, so sharing, transport
  // factors and idle gaps are all in them.
  int links_used() const;
  const std::string& link_name(int id) const;
  double link_bandwidth_Bps(int id) const;
  std::vector<double> link_bytes() const;  // bytes each link has carried since the start, by id
  // While on, every change of a used link's usage is recorded (trace counters).
  void record_link_usage(bool on);
  struct UsageChange {
    double time_s;
    int link;
    double usage_Bps;  // from time_s until the link's next change
  };
  const std::vector<UsageChange>& link_usage_changes() const;
  // Folding (docs/simulation-training.md, "Folded parameter-server workers"): each group's first node
  // stands for the group (nodes of one shape whose routes to and from `refs`, and between their own
  // devices, are alike but for links private to each node). All groups must have the same size k; the
  // first nodes' private links get k x their bandwidth, and the caller sends, for a first node, one
  // flow of k x the bytes for every flow of each node, and none for the others. Returns k, or 1 and
  // changes nothing when a group's routes are not symmetric.
  int fold_nodes(const std::vector<std::vector<int>>& groups, const std::vector<simgrid::s4u::Host*>& refs);
  // Folds groups whose routes differ beyond private links (several switches per group): each link on a
  // first node's routes to and from `refs` (and between its devices) gets bandwidth x n_fold / n_real,
  // where n_real counts the node flows that cross it unfolded and n_fold the flows it carries folded
  // (k per first node), so every link keeps its load fraction when flows to one server are alike.
  // Groups may differ in size (k each, e.g. one switch alone beside groups of several): their flows are
  // then weighted by the nodes they stand for (set_weighted_folds is turned on). A ref on a node itself
  // (a split node's server) is counted as the flows go: local to that node's own flows, k - 1 nodes
  // for a representative's flow to it, through split_server_host from the representative's own node.
  // Moves a typical member (the most common route lengths) to the front of each group as its
  // representative. Exact where fold_nodes is; otherwise an approximation
  // (docs/simulation-training.md). Returns the largest k.
  // bytes_to/bytes_from: what one device sends to / receives from each ref per iteration. Refused
  // (returns 1, nothing changed) where links that only some members use are busy enough to matter.
  int fold_nodes_scaled(std::vector<std::vector<int>>& groups, const std::vector<simgrid::s4u::Host*>& refs,
                        const std::vector<double>& bytes_to, const std::vector<double>& bytes_from);
  // Route classes of the worker nodes (an id per node): nodes whose routes to and from `refs` cross
  // the same busy shared links in the same places (PARTIAL_LINK_MAX_BUSY of the busiest link's time,
  // every node's flows of bytes_to/bytes_from per ref counted) share a class, so a fold of one class
  // keeps every busy link's load exact (fold_nodes_scaled).
  std::vector<int> route_classes(const std::vector<simgrid::s4u::Host*>& refs, const std::vector<double>& bytes_to,
                                 const std::vector<double>& bytes_from) const;
  // Collectives that ran alone on the network, by signature (coarse-mode reuse): how long one took and
  // the bytes it moved over each link (World::link_bytes ids, per node on folded links), which a reuse
  // charges to the links again so that measured link use counts it (charge_links).
  struct CachedCollective {
    double duration_s = 0;
    std::vector<std::pair<int, double>> link_B;
  };
  std::unordered_map<std::string, CachedCollective>& duration_cache();
  // Adds bytes to links' meters (ids and units of link_bytes) without a flow: a reused collective's.
  void charge_links(const std::vector<std::pair<int, double>>& link_B);
  // link_bytes() less what charge_links added: the bytes flows moved (what a collective that runs
  // while a reused one ends must not take for its own).
  std::vector<double> flow_link_bytes() const;
  // Whether link usage over time is being recorded (--trace): a reuse could not replay it.
  bool recording_link_usage() const;

  // Busy-waits `rank`'s device for `seconds` of its full speed, then calls done. Computations are
  // timers, not SimGrid execs: a device shares its speed max-min between the computations on it and
  // its loads (start_load), as SimGrid's CPU model would, and each end is rescheduled when the share
  // changes; the engine's activity list, walked on every completion, holds only transfers.
  void compute(int rank, double seconds, std::function<void()> done);
  // On: a transfer no larger than its route's bandwidth-delay product (one node's bytes x the route's
  // latency x its slowest link, per node on folded links) takes latency + its own serialisation on a
  // timer, outside the max-min solver. Off by default; the parameter-server family turns it on.
  void set_latency_bound_bypass(bool on);
  // On: a flow over a folded node's links (World::fold_nodes) takes, in max-min sharing, the share of
  // the `fold` node flows it stands for (SimGrid's per-flow sharing penalty, 1 / fold), so folded and
  // unfolded flows can share a link exactly: what a partial fold needs (colocated parameter servers,
  // whose nodes are not folded). Off by default: where every flow on a shared link is a representative
  // of one fold the plain fold is already exact (docs/simulation-training.md, "Folded workers").
  void set_weighted_folds(bool on);
  std::int64_t latency_bound_flows() const;  // transfers that took that path
  // Flows of one collective started together on an idle network, solved in closed form instead of by
  // SimGrid (docs/simulation-comm.md, "Flows solved together"): where solving is on, no other transfer
  // is in flight, link usage is not recorded, no link is folded, no flow is bounded or latency-bound,
  // and every flow takes the same work (its bytes x its links' charge per byte), max-min sharing ends
  // flow f by d_f + w / r_f (its start latency, and the smallest fair share, bandwidth over flows, of
  // its links). Calls done[g] when the last flow of group groups[f] == g ends, counts the flows as
  // started and charges their bytes to their links as if they had run, and returns true; else does
  // nothing and returns false. Not one SimGrid activity is started: 16,380 concurrent flows made SimGrid
  // walk its activity list on every completion (docs/simgrid-notes.md).
  bool transfer_together(const std::vector<std::pair<simgrid::s4u::Host*, simgrid::s4u::Host*>>& flows,
                         const std::vector<int>& groups, double bytes, std::vector<std::function<void()>> done);
  // On: the caller starts one collective at a time and nothing else over its links while it runs (the
  // data-parallel exchanges, `dtsim comm`), so transfer_together may solve it. Off by default. A
  // transfer started over the links of flows being solved together is an internal error (Failure).
  void set_solve_together(bool on);
  // Process-wide: whether worlds created after may solve flows together at all (on by default); for
  // tests comparing against SimGrid's own sharing of the same flows.
  static void allow_solving_together(bool on);
  // Any host to host: one flow of `bytes`, then done (latency and sharing by SimGrid). `nodes`: the
  // nodes' flows it stands for, where fewer than its route's fold (a representative's flow that one
  // member does not take part in); 0: the route's fold.
  void transfer(simgrid::s4u::Host* src, simgrid::s4u::Host* dst, double bytes, std::function<void()> done,
                double nodes = 0);
  // Holds `share` (0..1) of `rank`'s device until stop_load: a computation running meanwhile gets the
  // rest (max-min sharing of the device, the load bounded at its share). Returns a handle for stop_load.
  std::int64_t start_load(int rank, double share);
  void stop_load(std::int64_t handle);
  // Calls fn at simulated time now()+delay.
  void after(double delay_s, std::function<void()> fn);
  double now() const;
  void run();  // until no activity is left

 private:
  void scale_link(simgrid::s4u::Link* l, double scale);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::sim
