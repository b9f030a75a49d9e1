// Parameter-server family (TensorFlow's variable_update modes): variables placed on server shards
// (greedy by bytes, or round robin); each worker pulls every shard before forward and pushes each
// variable's gradient as soon as backward produces it; each server's CPU applies every push as it
// arrives, one after another (TrainingPoint::ps_apply_s_per_B; without it, one update per iteration).
// `ps`: synchronous, the next pulls wait until every worker's pushes are applied; `ps-async`: no barrier,
// each worker goes on alone; `ps-replicated`: the GPUs of a node sum their gradients on the node's
// first GPU, which pushes and pulls for the node.
// Coarse mode (docs/simulation-training.md) merges a unit's per-layer pushes into at most
// COARSE_PUSH_GROUPS groups of about equal bytes: one push flow per group and server, one pull per shard.
// It also folds the worker nodes of each switch onto one representative that sends every flow for all
// of them, on its own links scaled by the fold (World::fold_nodes); the others mirror its events. Exact
// for max-min sharing (docs/simulation-training.md, "Folded workers"): with dedicated servers every
// switch; with colocated servers on one-device nodes every switch too, the roles split (a NIC each,
// "Split roles"); on other colocated nodes the switches that host none, their flows weighted by the fold.
// Asynchronous workers fold only beyond the flow budget, at their group's mean pace (approximate).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <unordered_map>

#include "common/errors.hpp"
#include "platforms/transport.hpp"
#include "sim/src/exchange/exchange.hpp"

namespace dtsim::sim {
namespace {

enum class Variant { SYNC, ASYNC, REPLICATED };

// Coarse mode: push groups per iteration (each sent when its last layer's gradient is ready), so a
// (unit, server) pair carries at most 1 + COARSE_PUSH_GROUPS flows per iteration. Eight groups keep
// the pushes overlapped with the remaining backward nearly as well as per-layer pushes (ResNet-50,
// 16-64 workers: within 1.1% of fine mode; four groups were 6% slow).
constexpr int COARSE_PUSH_GROUPS = 8;

// Asynchronous workers folded in step: at least this many independent paces (fold groups x devices per
// node) are kept, since the groups drifting apart is what spreads their bursts. Folded against every
// worker simulated (ResNet-50, 6 iterations): taiwania2-10gbe 256 x 16 dedicated with 8, 32, 64 and 128
// paces -12.2%, +0.5%, -0.7%, -1.6%; Piz Daint 128 and 256 x 64 with 32 and 64 paces -2.9%, -1.1%.
constexpr int ASYNC_MIN_PACES = 32;

// Asynchronous workers are also folded beyond this many, whatever their flows per iteration: with few
// servers their flows queue at the servers, so many are in flight at every event and the cost grows
// with the square of the workers (Piz Daint ResNet-50, 6 iterations, every worker simulated: 256 x 1
// 5.5 s, 512 x 1 26 s, 1,024 x 1 past 90 s; 256 x 4 35 s, 512 x 4 309 s), while folded they took
// 0.6-11 s at -0.2% (256 x 1), -1.4% (256 x 4), 0.0% (512 x 1) and -1.7% (512 x 4) throughput.
constexpr int ASYNC_MAX_UNFOLDED_WORKERS = 128;

// The worker nodes under one switch (leaf switch, dragonfly router; a star's single switch): the
// unit the folds keep alike. 1 on a torus, whose nodes route through each other.
int nodes_per_switch(const platforms::Platform& platform, int nodes) {
  const auto& net = platform.network;
  switch (net.topology) {
    case platforms::TopologyKind::STAR: return nodes;
    case platforms::TopologyKind::FAT_TREE: return net.fat_tree.down.empty() ? 1 : net.fat_tree.down[0];
    case platforms::TopologyKind::DRAGONFLY: return net.dragonfly.nodes_per_router;
    case platforms::TopologyKind::TORUS: return 1;
  }
  return 1;
}

class PsExchange final : public Exchange {
 public:
  PsExchange(ReplayServices& replay, const Strategy& strategy) : Exchange(replay) {
    variant_ = strategy.exchange == "ps-async"        ? Variant::ASYNC
               : strategy.exchange == "ps-replicated" ? Variant::REPLICATED
                                                      : Variant::SYNC;
    const auto& point = replay.point();
    servers_ = point.ps.servers;
    const auto placement = place_variables(replay.profile(), servers_, point.ps.balance);
    shard_bytes_ = server_bytes(replay.profile(), placement, servers_);
    bucket_bytes_ = bucket_server_bytes(replay.profile(), replay.plan(), placement, servers_);
    count_calls(replay.profile(), replay.plan(), placement);
    if (!point.ps.transport.empty())
      rpc_ = &platforms::transport_by_name(point.ps.transport, platforms::TransportScope::RPC);
    if (rpc_ && rpc_->rpc_server_cpu_per_call_s > 0)
      server_queues_.assign(static_cast<std::size_t>(servers_),
                            platforms::RpcServerQueue(rpc_->rpc_server_threads, rpc_->rpc_server_cpu_per_call_s));
    group_buckets(resolve_mode(point.fidelity.comm_mode, replay.workers()) == CommMode::COARSE);
    const double total = std::accumulate(shard_bytes_.begin(), shard_bytes_.end(), 0.0);
    max_shard_fraction_ = total > 0 ? *std::max_element(shard_bytes_.begin(), shard_bytes_.end()) / total : 0;
    apply_s_per_B_ = point.ps.apply_s_per_B;
    if (!(std::isfinite(apply_s_per_B_) && apply_s_per_B_ >= 0))
      throw InputError(fmt::format("ps_apply_s_per_B: expected a finite number >= 0, got {}", apply_s_per_B_));
    apply_free_s_.assign(static_cast<std::size_t>(servers_), 0.0);
    ranks_.assign(static_cast<std::size_t>(replay.workers()), RankState{});
    units_done_.assign(static_cast<std::size_t>(replay.iterations()), 0);
    nodes_.resize(static_cast<std::size_t>(replay.layout().nodes));
    fold_nodes(resolve_mode(point.fidelity.comm_mode, replay.workers()) == CommMode::COARSE);
    // A shard of a bias or batch-norm variable (bytes to kilobytes) is latency-bound; outside the solver
    // it costs no solver work (docs/simulation-training.md "Latency-bound messages").
    replay.world().set_latency_bound_bypass(point.fidelity.ps_latency_bound_bypass);
  }

  int servers() const override { return servers_; }

  void name_tracks() override {
    for (int s = 0; s < servers_; ++s)
      replay_.trace().name_track(TraceRecorder::Group::SERVERS, s, fmt::format("PS shard {} (node {})", s, server_node(s)));
  }

  int forward_gates(int /*rank*/, int /*it*/) const override {
    return 1;  // the parameters (ps-replicated: the leader's copy)
  }

  void iteration_start(int rank, int it) override {
    auto& rs = ranks_[static_cast<std::size_t>(rank)];
    rs = RankState{};
    auto& w = replay_.world();
    if (folded(rank)) {  // its parameters arrive when its representative's do
      mirror_wait(representative(rank), it, GATE_EVENT, [this, rank, it] { replay_.release_gate(rank, it); });
      return;
    }
    if (variant_ != Variant::REPLICATED) {
      pull_all(rank, it, w.worker_host(rank), node_of(rank), [this, rank, it] { release(rank, it); });
      return;
    }
    const int n = node_of(rank);
    if (rank != leader_of(n)) return;  // the leader pulls for the node, then copies to each local GPU
    pull_all(rank, it, w.worker_host(rank), n, [this, n, rank, it] {
      auto& world = replay_.world();
      for (int q = leader_of(n) + 1; q < leader_of(n) + local_count(n); ++q)
        replay_.transfer(world.worker_host(rank), n, world.worker_host(q), n, replay_.plan().grad_bytes * fold(n),
                         [this, q, it] { release(q, it); });
      release(rank, it);
    });
  }

  void bucket_ready(int rank, int it, std::size_t k) override {
    if (!closes_group_[k]) return;  // merged into its group's push (coarse mode)
    const std::size_t g = group_of_[k];
    if (variant_ == Variant::REPLICATED) {
      replicated_group_ready(rank, it, g);
      return;
    }
    auto& rs = ranks_[static_cast<std::size_t>(rank)];
    push_group(rank, it, g, replay_.world().worker_host(rank), node_of(rank), &rs.pushes_outstanding,
               [this, rank, it] { maybe_rank_done(rank, it); });
  }

  void backward_done(int rank, int it) override {
    ranks_[static_cast<std::size_t>(rank)].bwd_done = true;
    if (variant_ != Variant::REPLICATED) {
      maybe_rank_done(rank, it);
      return;
    }
    ++node_iter(node_of(rank), it).bwd_done;
    maybe_node_done(node_of(rank), it);
  }

  double busiest_server_update_s() const override {
    if (apply_s_per_B_ > 0) {  // every unit's push to the busiest shard, applied one after another
      const int units = variant_ == Variant::REPLICATED ? layout().nodes : replay_.workers();
      return units * *std::max_element(shard_bytes_.begin(), shard_bytes_.end()) * apply_s_per_B_;
    }
    return variant_ == Variant::ASYNC ? 0 : iteration_update_s();
  }

  int server_on_node(int node) const override {
    for (int s = 0; s < servers_; ++s)
      if (server_node(s) == node) return s;
    return -1;
  }

 private:
  struct RankState {
    bool bwd_done = false;
    bool finishing = false;
    int pushes_outstanding = 0;
  };
  struct NodeIter {
    std::vector<int> local_ready;  // local contributions per push group
    int pushes_outstanding = 0;
    int buckets_pushed = 0;  // push groups sent
    int bwd_done = 0;
    bool done = false;
  };

  // Push groups: every bucket alone (fine), or consecutive buckets merged into at most
  // COARSE_PUSH_GROUPS groups of about equal bytes (coarse).
  void group_buckets(bool coarse) {
    const auto& buckets = replay_.plan().buckets;
    const double total = std::accumulate(buckets.begin(), buckets.end(), 0.0,
                                         [](double a, const auto& b) { return a + b.bytes; });
    const double target = coarse ? total / COARSE_PUSH_GROUPS : 0;
    double in_group = 0;
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      if (group_bytes_.empty() || closes_group_.back()) {
        group_bytes_.emplace_back(static_cast<std::size_t>(servers_), 0.0);
        group_total_B_.push_back(0);
        in_group = 0;
      }
      group_of_.push_back(group_bytes_.size() - 1);
      if (group_calls_.size() < group_bytes_.size()) group_calls_.emplace_back(static_cast<std::size_t>(servers_), 0.0);
      for (int s = 0; s < servers_; ++s) {
        group_bytes_.back()[static_cast<std::size_t>(s)] += bucket_bytes_[k][static_cast<std::size_t>(s)];
        group_calls_.back()[static_cast<std::size_t>(s)] += bucket_calls_[k][static_cast<std::size_t>(s)];
      }
      group_total_B_.back() += buckets[k].bytes;
      in_group += buckets[k].bytes;
      closes_group_.push_back(k + 1 == buckets.size() || in_group >= target);
    }
  }

  // Folding (coarse mode). Events a folded rank mirrors: its parameters (gate) and each push group.
  static constexpr int GATE_EVENT = 0;
  struct Mirror {
    bool done = false;
    std::vector<Callback> waiters;
  };

  // Folds the worker nodes switch by switch (leaf switch, dragonfly router; a star's single switch)
  // onto each switch's first node, where that is exact for max-min sharing: every flow on a shared link
  // then stands for the same number of workers (docs/simulation-training.md). So only with dedicated
  // servers (a colocated server makes its node unlike the others), coarse mode, synthetic input (no
  // per-node I/O flows), equal compute times, full nodes and whole switches. Asynchronous workers, each
  // at its own device's pace, fold when those paces are persistent (device spread; no per-iteration
  // jitter or stragglers): a group then runs at its devices' mean compute rate (pace_groups).
  void fold_nodes(bool coarse) {
    const int nodes = layout().nodes;
    rep_node_.resize(static_cast<std::size_t>(nodes));
    std::iota(rep_node_.begin(), rep_node_.end(), 0);
    fold_of_.assign(static_cast<std::size_t>(nodes), 1);
    const auto& point = replay_.point();
    if (!coarse || !point.fidelity.ps_fold || point.input.data != DataMode::SYNTHETIC || nodes < 2) return;
    if (replay_.workers() != nodes * layout().workers_per_node) return;
    const bool async = variant_ == Variant::ASYNC;
    for (int it = 0; it < replay_.iterations(); ++it)
      for (int r = 1; r < replay_.workers(); ++r)
        if (async ? replay_.factor(r, it) != replay_.factor(r, 0) : replay_.factor(r, it) != replay_.factor(0, it))
          return;
    // The used servers: the folds check routes against their hosts (a spread sample for the exact
    // dedicated fold) and the load-scaled fold weighs links by one device's bytes to and from each.
    std::vector<int> used;
    for (int s = 0; s < servers_; ++s)
      if (shard_bytes_[static_cast<std::size_t>(s)] > 0) used.push_back(s);
    // Flows a representative starts per iteration: a pull per used shard, a push per push group and server.
    double rep_flows = static_cast<double>(used.size());
    for (const auto& g : group_bytes_) rep_flows += static_cast<double>(std::count_if(g.begin(), g.end(), [](double b) { return b > 0; }));
    rep_flows *= layout().workers_per_node;
    // Asynchronous workers drift apart (their own paces, the order the servers serve them in), which a
    // folded group in step cannot: 1-3% less throughput with 32 paces or more (docs/simulation-training.md).
    // So each is simulated while that stays under the flow budget and ASYNC_MAX_UNFOLDED_WORKERS, and
    // folded only beyond them.
    if (async && nodes * rep_flows <= point.fidelity.ps_fold_max_flows &&
        replay_.workers() <= ASYNC_MAX_UNFOLDED_WORKERS)
      return;
    int per_switch = nodes_per_switch(replay_.platform(), nodes);
    if (per_switch < 2 || nodes % per_switch != 0) return;
    // Asynchronous groups stay in step: keep enough of them to drift apart (async_min_groups), with
    // fewer nodes per group than a switch holds where needed (any of its nodes are alike).
    if (async) {
      while (per_switch >= 2 && nodes / per_switch < async_min_groups()) {
        int d = per_switch / 2;
        while (d >= 2 && per_switch % d != 0) --d;
        per_switch = d;
      }
      if (per_switch < 2) return;
    }
    std::vector<simgrid::s4u::Host*> refs;
    for (int s : used) refs.push_back(server_host(s));
    if (!dedicated() && layout().server_nic_nodes == 0) {
      fold_colocated(per_switch, refs);
      return;
    }
    // Exact while the representatives' flows stay under the budget; beyond it, groups of up to 2, 4, ...
    // switches folded with load-scaled links (World::fold_nodes_scaled), the fewest that fit. Only
    // switches whose nodes' routes cross the same busy links are grouped (World::route_classes), so
    // those links keep their loads exactly; a switch with a colocated server holding variables (split
    // roles) folds alone: its own server is local to it (grouped by position it was 12% fast at
    // 1,024 x 256 on Piz Daint, docs/simulation-training.md "Split roles").
    std::vector<double> push_B, pull_B;  // one device's bytes to and from each ref per iteration
    for (int s : used) {
      pull_B.push_back(shard_bytes_[static_cast<std::size_t>(s)]);
      double push = 0;
      for (const auto& g : group_bytes_) push += g[static_cast<std::size_t>(s)];
      push_B.push_back(push);
    }
    const std::vector<std::vector<int>> switches = node_groups(0, per_switch);
    // Per switch: its nodes' route class, or -1 (folds alone) where its nodes differ on busy links (one
    // representative could not stand for them) or it holds a colocated server.
    std::vector<int> switch_class;
    const auto grouping = [&](int per_group) {  // per_group: switches at most
      if (per_group == 1) return switches;
      if (switch_class.empty()) {
        const std::vector<int> cls = replay_.world().route_classes(refs, push_B, pull_B);
        for (const auto& sw : switches) {
          const int c = cls[static_cast<std::size_t>(sw[0])];
          const bool uniform = std::all_of(sw.begin(), sw.end(), [&](int n) { return cls[static_cast<std::size_t>(n)] == c; });
          switch_class.push_back(uniform ? c : -1);
        }
        if (!dedicated())
          for (int s : used) switch_class[static_cast<std::size_t>(server_node(s) / per_switch)] = -1;
      }
      std::vector<std::vector<int>> out;
      std::unordered_map<int, std::size_t> open;  // class -> its group being filled in `out`
      for (std::size_t i = 0; i < switches.size(); ++i) {
        const int c = switch_class[i];
        const auto it = open.find(c);
        if (c >= 0 && it != open.end() &&
            out[it->second].size() < static_cast<std::size_t>(per_group * per_switch)) {
          out[it->second].insert(out[it->second].end(), switches[i].begin(), switches[i].end());
          continue;
        }
        out.push_back(switches[i]);
        open[c] = out.size() - 1;
      }
      return out;
    };
    // Doubled while over the budget and it still merges switches: once doubling leaves the count as it
    // is, every class fits in one group and larger sizes give the same groups.
    const int n_switches = nodes / per_switch;
    int per_group = 1;
    for (std::size_t count = switches.size();
         static_cast<double>(count) * rep_flows > point.fidelity.ps_fold_max_flows &&
         per_group * 2 <= n_switches;) {
      const std::size_t next = grouping(per_group * 2).size();
      if (next >= count || (async && next < static_cast<std::size_t>(async_min_groups()))) break;
      per_group *= 2;
      count = next;
    }
    const bool scaled = per_group > 1;
    // Every used server for a load-scaled fold (a link's scale depends on which servers' routes cross
    // it); the exact fold checks routes against a spread sample (the zones route a node by its switch).
    const auto spread_sample = [](const std::vector<simgrid::s4u::Host*>& all) {
      constexpr std::size_t ROUTE_CHECK_SERVERS = 8;
      std::vector<simgrid::s4u::Host*> out;
      const std::size_t step = std::max<std::size_t>(1, all.size() / ROUTE_CHECK_SERVERS);
      for (std::size_t i = 0; i < all.size(); i += step) out.push_back(all[i]);
      if (!all.empty() && out.back() != all.back()) out.push_back(all.back());
      return out;
    };
    // A refused grouping (links some members use are busy) is tried again with half as many switches.
    std::vector<std::vector<int>> groups;
    int k = 1;
    for (int p = per_group; scaled && k <= 1 && p > 1; p /= 2) {
      groups = grouping(p);
      k = replay_.world().fold_nodes_scaled(groups, refs, push_B, pull_B);
    }
    if (k <= 1) {  // not scaled, or refused: the exact fold, one representative per switch
      groups = node_groups(0, per_switch);
      k = replay_.world().fold_nodes(groups, spread_sample(refs));
    }
    if (k <= 1) return;
    // Split roles: a representative's flows to its members' servers stand for one flow fewer
    // (server_end), so each flow is weighted as the flows it stands for.
    if (layout().server_nic_nodes > 0) replay_.world().set_weighted_folds(true);
    for (const auto& g : groups) {
      fold_of_[static_cast<std::size_t>(g[0])] = static_cast<int>(g.size());
      for (int m : g) rep_node_[static_cast<std::size_t>(m)] = g[0];
    }
    pace_groups(groups);
  }
  // Groups of nodes an asynchronous fold keeps: at least ASYNC_MIN_PACES paces (groups x devices per node).
  int async_min_groups() const {
    const int per_node = layout().workers_per_node;
    return (ASYNC_MIN_PACES + per_node - 1) / per_node;
  }
  // Asynchronous workers of a folded group: the representative's device j stands for device j of every
  // member node, so they share one pace, the harmonic mean of their factors (their mean compute rate).
  // Exact while compute (c) bounds the workers; with exchange time x, the group's throughput is below
  // its members' by about var(1 / factor) c x / (c + x)^2 of it, at most a quarter of that variance
  // (6e-5 at the 1.5% GPU spread).
  void pace_groups(const std::vector<std::vector<int>>& groups) {
    if (variant_ != Variant::ASYNC) return;
    const int per_node = layout().workers_per_node;
    std::vector<int> ranks;
    for (const auto& g : groups)
      for (int j = 0; j < per_node; ++j) {
        ranks.clear();
        for (int m : g) ranks.push_back(m * per_node + j);
        replay_.share_pace(ranks);
      }
  }
  // Colocated servers (server s on node s mod nodes): the switches whose nodes host no server holding
  // variables are folded exactly, one representative each (a server left empty, as at more servers than
  // variables, sends and receives nothing, so its node is like the others); the nodes of switches with
  // such a server stay as they are, and the representatives' flows are weighted
  // (World::set_weighted_folds) where they share the servers' links with those nodes' flows. Not
  // grouped beyond one switch: the load-scaled fold assumes every flow on a link stands for nodes alike.
  void fold_colocated(int per_switch, const std::vector<simgrid::s4u::Host*>& refs) {
    const int nodes = layout().nodes;
    std::vector<bool> serving(static_cast<std::size_t>(nodes), false);
    for (int s = 0; s < servers_; ++s)
      if (shard_bytes_[static_cast<std::size_t>(s)] > 0) serving[static_cast<std::size_t>(server_node(s))] = true;
    std::vector<std::vector<int>> groups;
    for (const auto& g : node_groups(0, per_switch))
      if (std::none_of(g.begin(), g.end(), [&](int n) { return serving[static_cast<std::size_t>(n)]; }))
        groups.push_back(g);
    if (groups.size() < 2) return;  // fewer than two switches to fold: not worth it
    const int k = replay_.world().fold_nodes(groups, refs);
    if (k <= 1) return;
    replay_.world().set_weighted_folds(true);
    for (const auto& g : groups) {
      fold_of_[static_cast<std::size_t>(g[0])] = k;
      for (int m : g) rep_node_[static_cast<std::size_t>(m)] = g[0];
    }
    pace_groups(groups);
  }
  // Consecutive nodes from `first` to the last, in groups of `size` (whole switches when size is a
  // multiple of the nodes per switch).
  std::vector<std::vector<int>> node_groups(int first, int size) const {
    std::vector<std::vector<int>> out;
    for (int g = first; g < layout().nodes; g += size) {
      out.emplace_back(static_cast<std::size_t>(size));
      std::iota(out.back().begin(), out.back().end(), g);
    }
    return out;
  }
  int fold(int node) const { return fold_of_[static_cast<std::size_t>(node)]; }
  bool folded(int rank) const { return rep_node_[static_cast<std::size_t>(node_of(rank))] != node_of(rank); }
  int representative(int rank) const {
    return rep_node_[static_cast<std::size_t>(node_of(rank))] * layout().workers_per_node + rank % layout().workers_per_node;
  }
  Mirror& mirror(int rank, int it, int event) {
    const auto key = (static_cast<std::int64_t>(rank) * replay_.iterations() + it) *
                         static_cast<std::int64_t>(group_bytes_.size() + 1) + event;
    return mirrors_[key];
  }
  // A representative's event happened: the ranks it stands for go on.
  void mirror_fire(int rank, int it, int event) {
    if (fold(node_of(rank)) <= 1) return;
    auto& m = mirror(rank, it, event);
    m.done = true;
    auto waiters = std::move(m.waiters);
    m.waiters.clear();
    for (auto& w : waiters) w();
  }
  void mirror_wait(int rep, int it, int event, Callback done) {
    auto& m = mirror(rep, it, event);
    if (m.done) {
      replay_.world().after(0, std::move(done));
      return;
    }
    m.waiters.push_back(std::move(done));
  }
  void release(int rank, int it) {
    replay_.release_gate(rank, it);
    mirror_fire(rank, it, GATE_EVENT);
  }

  const Layout& layout() const { return replay_.layout(); }
  int node_of(int r) const { return r / layout().workers_per_node; }
  int leader_of(int n) const { return n * layout().workers_per_node; }
  int local_count(int n) const {
    return std::min(layout().workers_per_node, replay_.workers() - n * layout().workers_per_node);
  }
  bool dedicated() const { return replay_.point().ps.placement == PsPlacement::DEDICATED; }
  int server_node(int s) const { return dedicated() ? layout().nodes + s : s % layout().nodes; }
  simgrid::s4u::Host* server_host(int s) const {
    auto& w = replay_.world();
    return dedicated() ? w.dedicated_ps_host(s) : w.node_host(s % layout().nodes);
  }

  // Where a unit's flows to server `s` go and how many nodes' bytes they carry. A folded representative
  // stands for its members' flows; with split roles (Layout::server_nic_nodes) a server may sit on a
  // member's node, whose own flow to it stays inside that node (left out: it does not touch the
  // network) while the others' cross the network; to its own node's server they enter through the
  // server's NIC, as its members' would (World::split_server_host).
  struct ServerEnd {
    simgrid::s4u::Host* host;
    int flow_fold;
  };
  ServerEnd server_end(int s, int unit_node) const {
    const int k = fold(unit_node);
    const int sn = server_node(s);
    if (k <= 1 || dedicated() || rep_node_[static_cast<std::size_t>(sn)] != unit_node) return {server_host(s), k};
    if (sn != unit_node) return {server_host(s), k - 1};
    auto* end = replay_.world().split_server_host(sn);
    return end != nullptr ? ServerEnd{end, k - 1} : ServerEnd{server_host(s), k};
  }

  // Pulls every shard holding parameters into `dst` (one flow per server).
  void pull_all(int r, int it, simgrid::s4u::Host* dst, int dst_node, Callback done) {
    auto pending = std::make_shared<int>(0);
    auto finish = std::make_shared<Callback>(std::move(done));
    const double t0 = replay_.world().now();
    for (double b : shard_bytes_)
      if (b > 0) ++*pending;
    if (*pending == 0) {
      replay_.world().after(0, [finish] { (*finish)(); });
      return;
    }
    for (int s = 0; s < servers_; ++s) {
      const double bytes = shard_bytes_[static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      const ServerEnd end = server_end(s, dst_node);
      rpc_then_transfer(shard_calls_[static_cast<std::size_t>(s)], s, false, end.host, server_node(s), dst,
                        dst_node, bytes, fold(dst_node), end.flow_fold, [this, pending, finish, r, it, s, t0] {
        const double now = replay_.world().now();
        if (replay_.tracing(it))
          replay_.trace().add(TraceRecorder::Group::SERVERS, s, fmt::format("pull by worker {}", r), "pull", t0, now);
        if (--*pending == 0) {
          replay_.record_comm(r, it, t0, now);
          (*finish)();
        }
      });
    }
  }

  void push_group(int r, int it, std::size_t g, simgrid::s4u::Host* src, int src_node, int* outstanding,
                  Callback on_all_done) {
    const int event = 1 + static_cast<int>(g);
    const bool any = std::any_of(group_bytes_[g].begin(), group_bytes_[g].end(), [](double b) { return b > 0; });
    if (!any) return;
    if (folded(r)) {  // done when the representative's push of the same group is
      ++*outstanding;
      mirror_wait(representative(r), it, event, [outstanding, on_all_done] {
        if (--*outstanding == 0) on_all_done();
      });
      return;
    }
    const double t0 = replay_.world().now();
    const int k = fold(src_node);
    auto group_left = std::make_shared<int>(0);
    for (int s = 0; s < servers_; ++s) {
      const double bytes = group_bytes_[g][static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      ++*outstanding;
      ++*group_left;
      const ServerEnd end = server_end(s, src_node);
      rpc_then_transfer(group_calls_[g][static_cast<std::size_t>(s)], s, true, src, src_node, end.host,
                        server_node(s), bytes, k, end.flow_fold,
                        [this, r, it, s, t0, event, group_left, outstanding, on_all_done] {
                         const double now = replay_.world().now();
                         replay_.record_comm(r, it, t0, now);
                         if (replay_.tracing(it))
                           replay_.trace().add(TraceRecorder::Group::SERVERS, s, fmt::format("push from worker {}", r),
                                               "push", t0, now);
                         if (--*group_left == 0) mirror_fire(r, it, event);
                         if (--*outstanding == 0) on_all_done();
                       });
    }
  }

  // RPC layer (ps_transport): one call per variable (TensorFlow's RecvTensor, a ps-lite push or pull).
  // Its software time runs in series before the flow: rpc_cost_s(calls, bytes) from the transport row.
  double rpc_delay_s(double calls, double bytes) const { return rpc_ ? rpc_->rpc_cost_s(calls, bytes) : 0.0; }

  // Seconds from now until server `s`'s serving threads have run `calls` calls arriving now (queued behind
  // every earlier call to that server); 0 when the RPC layer has no server-side cost.
  double server_wait_s(int s, double calls) {
    if (server_queues_.empty()) return 0;
    const double now = replay_.world().now();
    return server_queues_[static_cast<std::size_t>(s)].admit(now, calls) - now;
  }

  // `done`, called once the server's work `wait_s` (evaluated when the push has arrived) is over.
  Callback after_server(std::function<double()> wait_s, Callback done) {
    return [this, wait_s = std::move(wait_s), done = std::move(done)] {
      const double wait = wait_s();
      if (wait <= 0) return done();
      replay_.count_activity();
      replay_.world().after(wait, done);
    };
  }

  // Seconds from now until server `s` has applied `bytes` of gradient arriving now, behind the pushes it
  // is still applying: the optimizer step runs on the server node's CPU, whose memory bandwidth the
  // applies share, so one push after another (Server apply, docs/simulation-training.md).
  double server_apply_wait_s(int s, double bytes) {
    const double now = replay_.world().now();
    double& free_s = apply_free_s_[static_cast<std::size_t>(s)];
    free_s = std::max(free_s, now) + bytes * apply_s_per_B_;
    return free_s - now;
  }

  // `fold`: the nodes a representative stands for; its flow carries `flow_fold` nodes' bytes (fold, or
  // one less where a member's own server is local, server_end). The client's RPC cost is one node's, the
  // server runs and applies all `fold` nodes' calls and bytes. A pull's calls are served before the
  // response flows; a push's after its flow arrived, and the push ends when they have run.
  void rpc_then_transfer(double calls, int server, bool push, simgrid::s4u::Host* src, int src_node,
                         simgrid::s4u::Host* dst, int dst_node, double bytes, int fold, int flow_fold, Callback done) {
    if (push && apply_s_per_B_ > 0)  // runs after the serving threads below: the gradient is applied once parsed
      done = after_server([this, server, applied_B = bytes * fold] { return server_apply_wait_s(server, applied_B); },
                          std::move(done));
    if (push && !server_queues_.empty())
      done = after_server([this, server, served = calls * fold] { return server_wait_s(server, served); },
                          std::move(done));
    const double delay = rpc_delay_s(calls, bytes) + (push ? 0.0 : server_wait_s(server, calls * fold));
    const double flow_B = bytes * flow_fold;
    const double nodes = flow_fold < fold ? flow_fold : 0.0;  // weighted as the flows it stands for
    if (flow_fold < fold) replay_.count_collective_bytes(0, bytes * (fold - flow_fold));  // the member's own, local
    if (delay <= 0) {
      replay_.transfer(src, src_node, dst, dst_node, flow_B, std::move(done), nodes);
      return;
    }
    replay_.count_activity();
    replay_.world().after(delay, [this, src, src_node, dst, dst_node, flow_B, nodes, done = std::move(done)]() mutable {
      replay_.transfer(src, src_node, dst, dst_node, flow_B, std::move(done), nodes);
    });
  }

  // Variables per shard and per (bucket, shard): the calls an RPC layer makes.
  void count_calls(const calibrate::ComputeProfile& profile, const IterationPlan& plan, const std::vector<int>& placement) {
    shard_calls_.assign(static_cast<std::size_t>(servers_), 0.0);
    bucket_calls_.assign(plan.buckets.size(), std::vector<double>(static_cast<std::size_t>(servers_), 0.0));
    // A variable split over all servers is one call to each.
    const auto one_call = [](std::vector<double>& calls, int placed) {
      if (placed == PLACED_ON_ALL_SERVERS) {
        for (double& c : calls) c += 1;
      } else if (placed >= 0) {
        calls[static_cast<std::size_t>(placed)] += 1;
      }
    };
    for (std::size_t i = 0; i < placement.size() && i < profile.layers.size(); ++i) one_call(shard_calls_, placement[i]);
    for (std::size_t b = 0; b < plan.buckets.size(); ++b)
      for (int li : plan.buckets[b].layers) one_call(bucket_calls_[b], placement[static_cast<std::size_t>(li)]);
  }

  void maybe_rank_done(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (!rs.bwd_done || rs.pushes_outstanding > 0 || rs.finishing) return;
    rs.finishing = true;
    if (variant_ == Variant::ASYNC) {
      replay_.end_iteration(r, it);  // the servers apply this worker's gradients; no one waits
      return;
    }
    unit_done(it, replay_.workers());
  }

  NodeIter& node_iter(int n, int it) {
    auto& iters = nodes_[static_cast<std::size_t>(n)];
    if (iters.empty()) {
      iters.resize(static_cast<std::size_t>(replay_.iterations()));
      for (auto& x : iters) x.local_ready.assign(group_bytes_.size(), 0);
    }
    return iters[static_cast<std::size_t>(it)];
  }

  // Each local gradient goes to the node's leader GPU; when all local copies are summed, the leader
  // pushes the group to the servers.
  void replicated_group_ready(int r, int it, std::size_t g) {
    const int n = node_of(r);
    const int leader = leader_of(n);
    auto arrived = [this, n, it, g, leader] {
      auto& ni = node_iter(n, it);
      if (++ni.local_ready[g] < local_count(n)) return;
      push_group(leader, it, g, replay_.world().worker_host(leader), n, &ni.pushes_outstanding,
                 [this, n, it] { maybe_node_done(n, it); });
      ++ni.buckets_pushed;
      maybe_node_done(n, it);
    };
    if (r == leader || folded(r)) {  // a folded node's copies are its representative's
      arrived();
    } else {
      auto& w = replay_.world();
      replay_.transfer(w.worker_host(r), n, w.worker_host(leader), n, group_total_B_[g] * fold(n), arrived);
    }
  }

  void maybe_node_done(int n, int it) {
    auto& ni = node_iter(n, it);
    if (ni.done || ni.bwd_done < local_count(n) || ni.pushes_outstanding > 0 ||
        ni.buckets_pushed < static_cast<int>(group_bytes_.size()))
      return;
    ni.done = true;
    unit_done(it, layout().nodes);
  }

  // Synchronous: when every unit's pushes are in (and, with server apply, applied), every worker starts
  // the next iteration; without server apply the servers first update once (in parallel, the busiest
  // shard last).
  void unit_done(int it, int units) {
    if (++units_done_[static_cast<std::size_t>(it)] < units) return;
    // With server apply every push was applied as it arrived; else the servers update once, now.
    replay_.count_activity();
    replay_.world().after(apply_s_per_B_ > 0 ? 0.0 : iteration_update_s(), [this, it] {
      for (int r = 0; r < replay_.workers(); ++r) replay_.end_iteration(r, it);
    });
  }

  // Without server apply: the servers' one update per iteration, in parallel, the busiest shard last.
  double iteration_update_s() const { return replay_.plan().update_s * max_shard_fraction_; }

  Variant variant_ = Variant::SYNC;
  int servers_ = 1;
  std::vector<double> shard_bytes_;
  std::vector<std::vector<double>> bucket_bytes_;   // [bucket][server]
  std::vector<std::vector<double>> group_bytes_;    // [push group][server]
  std::vector<double> group_total_B_;               // [push group]: gradient bytes of the group
  std::vector<std::size_t> group_of_;               // [bucket] -> push group
  std::vector<bool> closes_group_;                  // [bucket]: the group's last (its push starts here)
  std::vector<double> shard_calls_;                 // variables per shard (RPC calls per pull)
  std::vector<std::vector<double>> bucket_calls_;   // variables per bucket and shard (RPC calls per push)
  std::vector<std::vector<double>> group_calls_;    // [push group][server]: the group's RPC calls
  const platforms::Transport* rpc_ = nullptr;       // ps_transport row, or none
  std::vector<platforms::RpcServerQueue> server_queues_;  // per server, when the RPC layer has a server cost
  double max_shard_fraction_ = 0;
  double apply_s_per_B_ = 0;                        // TrainingPoint::ps_apply_s_per_B
  std::vector<double> apply_free_s_;                // per server: when its CPU has applied every push so far
  std::vector<RankState> ranks_;
  std::vector<int> units_done_;
  std::vector<std::vector<NodeIter>> nodes_;
  std::vector<int> rep_node_;  // [node]: the node whose flows stand for it (itself when not folded)
  std::vector<int> fold_of_;   // [node]: nodes a representative stands for (1: not folded)
  std::unordered_map<std::int64_t, Mirror> mirrors_;  // [(rank, iteration, event)] of representatives
};

}  // namespace

int ps_split_server_nodes(const platforms::Platform& platform, const TrainingPoint& point, const Layout& layout) {
  if (point.ps.placement == PsPlacement::DEDICATED || !point.fidelity.ps_split_roles ||
      point.input.data != DataMode::SYNTHETIC)
    return 0;
  if (resolve_mode(point.fidelity.comm_mode, point.workers) != CommMode::COARSE) return 0;
  if (layout.workers_per_node != 1 || layout.nodes < 2 || point.workers != layout.nodes) return 0;
  if (point.strategy.exchange == "ps-async" && point.workers <= ASYNC_MAX_UNFOLDED_WORKERS) return 0;
  const int per_switch = nodes_per_switch(platform, layout.nodes);
  if (per_switch < 2 || layout.nodes % per_switch != 0) return 0;
  return std::min(point.ps.servers, layout.nodes);
}

std::unique_ptr<Exchange> make_ps_exchange(ReplayServices& replay, const Strategy& strategy) {
  return std::make_unique<PsExchange>(replay, strategy);
}

}  // namespace dtsim::sim
