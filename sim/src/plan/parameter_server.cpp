// Planner: the parameter-server families (TensorFlow's variable_update modes). Variables are placed on
// server shards (greedy by bytes, round robin, or MXNet's hash and split: place_variables); each worker
// pulls every shard before forward (one flow per server), pushes each variable's gradient to its shard as
// soon as backward produces it, and each server's CPU applies every push as it arrives, one after another
// (a SERVE on the server's processor; TrainingPoint::ps_apply_s_per_B). With an RPC layer (--ps-transport)
// each call costs the client its software time before the flow, and the server's serving threads run the
// calls (a SERVE on the "rpc threads" queue): a pull's before its response, a push's once it has arrived.
// `ps`: every worker's step ends at a barrier once every worker's pushes are applied (without server apply,
// one update of the busiest shard after it). `ps-replicated`: the GPUs of a node copy their gradients to
// its first GPU, which pushes the sum and pulls for the node, then copies the parameters back; the same
// barrier. `ps-async`: no barrier, each worker goes on once its own pushes are applied.
// Coarse mode merges the per-layer pushes into at most COARSE_PUSH_GROUPS groups of about equal bytes and
// folds the worker nodes of each switch onto one representative (StepPrograms::fold; docs/
// simulation-training.md "Folded workers", "Split roles"); asynchronous workers only beyond the flow
// budget, each group at its devices' mean pace (approximate).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "common/errors.hpp"
#include "platforms/transport.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {

// Coarse mode: push groups per iteration (each sent when its last layer's gradient is ready), so a
// (unit, server) pair carries at most 1 + COARSE_PUSH_GROUPS flows per iteration. Eight groups keep
// the pushes overlapped with the remaining backward nearly as well as per-layer pushes (ResNet-50,
// 16-64 workers: within 1.1% of fine mode; four groups were 6% slow).
constexpr int COARSE_PUSH_GROUPS = 8;

// The exact fold checks a representative's routes against this many servers spread over the used ones
// (the zones route a node by its switch, so a sample finds any difference).
constexpr std::size_t ROUTE_CHECK_SERVERS = 8;

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

}  // namespace

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

PsTraffic ps_traffic(const calibrate::ComputeProfile& profile, const IterationPlan& plan, const TrainingPoint& point) {
  PsTraffic out;
  const int servers = point.ps.servers;
  const auto placement = place_variables(profile, servers, point.ps.balance);
  out.shard_B = server_bytes(profile, placement, servers);
  const auto bucket_B = bucket_server_bytes(profile, plan, placement, servers);
  // Variables per shard and per (bucket, shard): the calls an RPC layer makes; a variable split over all
  // servers is one call to each.
  const auto one_call = [](std::vector<double>& calls, int placed) {
    if (placed == PLACED_ON_ALL_SERVERS) {
      for (double& c : calls) c += 1;
    } else if (placed >= 0) {
      calls[static_cast<std::size_t>(placed)] += 1;
    }
  };
  out.shard_calls.assign(static_cast<std::size_t>(servers), 0.0);
  for (std::size_t i = 0; i < placement.size() && i < profile.layers.size(); ++i) one_call(out.shard_calls, placement[i]);
  std::vector<std::vector<double>> bucket_calls(plan.buckets.size(), std::vector<double>(static_cast<std::size_t>(servers), 0.0));
  for (std::size_t b = 0; b < plan.buckets.size(); ++b)
    for (int li : plan.buckets[b].layers) one_call(bucket_calls[b], placement[static_cast<std::size_t>(li)]);
  // Push groups: every bucket alone (fine), or consecutive buckets merged into at most COARSE_PUSH_GROUPS
  // groups of about equal bytes (coarse).
  const bool coarse = resolve_mode(point.fidelity.comm_mode, point.workers) == CommMode::COARSE;
  const double total = std::accumulate(plan.buckets.begin(), plan.buckets.end(), 0.0,
                                       [](double a, const auto& b) { return a + b.bytes; });
  const double target = coarse ? total / COARSE_PUSH_GROUPS : 0;
  double in_group = 0;
  for (std::size_t k = 0; k < plan.buckets.size(); ++k) {
    if (out.group_B.empty() || out.closes_group.back()) {
      out.group_B.emplace_back(static_cast<std::size_t>(servers), 0.0);
      out.group_calls.emplace_back(static_cast<std::size_t>(servers), 0.0);
      out.group_total_B.push_back(0);
      in_group = 0;
    }
    out.group_of.push_back(out.group_B.size() - 1);
    for (int s = 0; s < servers; ++s) {
      out.group_B.back()[static_cast<std::size_t>(s)] += bucket_B[k][static_cast<std::size_t>(s)];
      out.group_calls.back()[static_cast<std::size_t>(s)] += bucket_calls[k][static_cast<std::size_t>(s)];
    }
    out.group_total_B.back() += plan.buckets[k].bytes;
    in_group += plan.buckets[k].bytes;
    out.closes_group.push_back(k + 1 == plan.buckets.size() || in_group >= target);
  }
  return out;
}

namespace {

// The fold of a job's worker nodes (coarse mode): each switch's nodes onto its first, where that is exact
// for max-min sharing (every flow on a shared link then stands for the same number of workers). So only
// in coarse mode, with synthetic input (no per-node I/O flows), full nodes and whole switches; equal
// compute times the executor checks (asynchronous workers: persistent ones, the group at its mean pace,
// and only beyond the flow budget or ASYNC_MAX_UNFOLDED_WORKERS, in at least ASYNC_MIN_PACES paces). With dedicated servers, or colocated ones on split
// nodes (a NIC each, Layout::server_nic_nodes), every switch, and beyond the flow budget groups of
// switches of one route class with load-scaled links (a switch with a colocated server holding variables
// folds alone: its own server is local to it); with other colocated servers, the switches that host none,
// their flows weighted by the fold.
NodeFold ps_fold(const PsTraffic& traffic, const TrainingPoint& point, const platforms::Platform& platform,
                 const Layout& layout) {
  NodeFold fold;
  const int nodes = layout.nodes;
  const bool coarse = resolve_mode(point.fidelity.comm_mode, point.workers) == CommMode::COARSE;
  if (!coarse || !point.fidelity.ps_fold || point.input.data != DataMode::SYNTHETIC || nodes < 2) return fold;
  if (point.workers != nodes * layout.workers_per_node) return fold;
  const bool dedicated = point.ps.placement == PsPlacement::DEDICATED;
  const bool async = point.strategy.exchange == "ps-async";
  std::vector<int> used;  // servers holding variables
  for (int s = 0; s < point.ps.servers; ++s)
    if (traffic.shard_B[static_cast<std::size_t>(s)] > 0) used.push_back(s);
  // Flows a representative starts per iteration: a pull per used shard, a push per push group and server.
  double rep_flows = static_cast<double>(used.size());
  for (const auto& g : traffic.group_B)
    rep_flows += static_cast<double>(std::count_if(g.begin(), g.end(), [](double b) { return b > 0; }));
  rep_flows *= layout.workers_per_node;
  // Asynchronous workers drift apart (their own paces, the order the servers serve them in), which a
  // folded group in step cannot: 1-3% less throughput with 32 paces or more (docs/simulation-training.md).
  // So each is simulated while that stays under the flow budget and ASYNC_MAX_UNFOLDED_WORKERS, and
  // folded only beyond them.
  if (async && nodes * rep_flows <= point.fidelity.ps_fold_max_flows && point.workers <= ASYNC_MAX_UNFOLDED_WORKERS) return fold;
  int per_switch = nodes_per_switch(platform, nodes);
  if (per_switch < 2 || nodes % per_switch != 0) return fold;
  // Asynchronous groups stay in step: keep enough of them to drift apart (min_groups), with fewer nodes
  // per group than a switch holds where needed (any of its nodes are alike).
  const int min_groups = async ? (ASYNC_MIN_PACES + layout.workers_per_node - 1) / layout.workers_per_node : 0;
  while (async && per_switch >= 2 && nodes / per_switch < min_groups) {
    int d = per_switch / 2;
    while (d >= 2 && per_switch % d != 0) --d;
    per_switch = d;
  }
  if (per_switch < 2) return fold;
  fold.shared_pace = async;
  fold.min_groups = min_groups;
  std::vector<std::vector<int>> switches;
  for (int first = 0; first < nodes; first += per_switch) {
    switches.emplace_back(static_cast<std::size_t>(per_switch));
    std::iota(switches.back().begin(), switches.back().end(), first);
  }
  if (!dedicated && layout.server_nic_nodes == 0) {
    std::vector<bool> serving(static_cast<std::size_t>(nodes), false);
    for (int s : used) serving[static_cast<std::size_t>(s % nodes)] = true;
    for (const auto& g : switches)
      if (std::none_of(g.begin(), g.end(), [&](int n) { return serving[static_cast<std::size_t>(n)]; }))
        fold.groups.push_back(g);
    if (fold.groups.size() < 2) return {};  // fewer than two switches to fold: not worth it
    fold.max_flows = 0;                     // not grouped beyond one switch: the weights assume alike flows
    for (int s : used) fold.refs.push_back({RoleKind::SERVER, s});
    fold.weighted = true;
    return fold;
  }
  fold.groups = switches;
  fold.flows_per_group = rep_flows;
  fold.max_flows = point.fidelity.ps_fold_max_flows;
  for (int s : used) {
    fold.scale_refs.push_back({RoleKind::SERVER, s});
    fold.bytes_from.push_back(traffic.shard_B[static_cast<std::size_t>(s)]);
    double push = 0;
    for (const auto& g : traffic.group_B) push += g[static_cast<std::size_t>(s)];
    fold.bytes_to.push_back(push);
  }
  const std::size_t step = std::max<std::size_t>(1, used.size() / ROUTE_CHECK_SERVERS);
  for (std::size_t i = 0; i < used.size(); i += step) fold.refs.push_back({RoleKind::SERVER, used[i]});
  if (!used.empty() && fold.refs.back().index != used.back()) fold.refs.push_back({RoleKind::SERVER, used.back()});
  fold.alone.assign(switches.size(), false);
  if (!dedicated)
    for (int s : used) fold.alone[static_cast<std::size_t>((s % nodes) / per_switch)] = true;
  fold.weighted = layout.server_nic_nodes > 0;
  return fold;
}

// Tags of the copies between a node's GPUs (ps-replicated), in order per pair.
enum Tag : int { PARAMETERS, GRADIENTS };

// One program of a parameter-server job. `pushes`: this rank pulls and pushes for its unit (a worker, or
// a node's first GPU); `copies_from` local GPUs send it their gradients (peer slots 0 ..), and it sends them
// the parameters; `copy_to_leader`: it sends its gradients to the node's first GPU (peer slot 0) and
// takes the parameters from it.
struct ProgramShape {
  bool pushes = true;
  int copies_from = 0;
  bool copy_to_leader = false;
  bool barrier = true;  // false: the step ends when this rank's own work is done (ps-async)
};

class PsProgramBuilder {
 public:
  PsProgramBuilder(const IterationPlan& plan, const calibrate::ComputeProfile& profile, const TrainingPoint& point,
                   const PsTraffic& traffic, double barrier_s)
      : plan_(plan), profile_(profile), traffic_(traffic), servers_(point.ps.servers), apply_s_per_B_(point.ps.apply_s_per_B),
        barrier_s_(barrier_s) {
    if (!point.ps.transport.empty())
      rpc_ = &platforms::transport_by_name(point.ps.transport, platforms::TransportScope::RPC);
  }
  bool server_threads() const { return rpc_ != nullptr && rpc_->rpc_server_cpu_per_call_s > 0; }
  const platforms::Transport* rpc() const { return rpc_; }

  RankProgram build(const ProgramShape& shape) const {
    RankProgram p;
    std::vector<int> forward_deps{p.add({.kind = TaskKind::INPUT, .label = "input batch"})};
    // Gradient copies arrive whenever the local GPUs send them: posted at once.
    std::vector<std::vector<int>> copies(traffic_.group_B.size());
    for (std::size_t g = 0; g < copies.size(); ++g)
      for (int j = 0; j < shape.copies_from; ++j)
        copies[g].push_back(p.add({.kind = TaskKind::RECV, .phase = TaskPhase::BACKWARD, .label = "local gradients",
                                   .peer = j, .bytes = traffic_.group_total_B[g], .tag = GRADIENTS}));
    if (shape.copy_to_leader)
      forward_deps.push_back(p.add({.kind = TaskKind::RECV, .phase = TaskPhase::FORWARD, .label = "local parameters",
                                    .peer = 0, .bytes = plan_.grad_bytes, .tag = PARAMETERS}));
    std::vector<int> pulls;
    if (shape.pushes) pulls = add_pulls(p);
    // The parameters go on to each local GPU as soon as they are in; this GPU's forward starts with them.
    for (int j = 0; j < shape.copies_from; ++j)
      p.add({.kind = TaskKind::SEND, .phase = TaskPhase::FORWARD, .label = "local parameters", .peer = j,
             .bytes = plan_.grad_bytes, .tag = PARAMETERS, .deps = pulls});
    forward_deps.insert(forward_deps.end(), pulls.begin(), pulls.end());
    int previous = p.add({.kind = TaskKind::COMPUTE, .label = "forward", .seconds = plan_.fwd_s, .deps = forward_deps});
    std::vector<int> barrier_deps;
    for (std::size_t k = 0; k < plan_.buckets.size(); ++k) {
      previous = p.add(backward_segment_task(plan_, profile_, k, previous));
      if (!traffic_.closes_group[k]) continue;  // merged into its group's push (coarse mode)
      const std::size_t g = traffic_.group_of[k];
      if (shape.copy_to_leader) {
        barrier_deps.push_back(p.add({.kind = TaskKind::SEND, .phase = TaskPhase::BACKWARD, .label = "local gradients",
                                      .peer = 0, .bytes = traffic_.group_total_B[g], .tag = GRADIENTS, .deps = {previous}}));
        continue;
      }
      std::vector<int> ready = copies[g];
      ready.push_back(previous);
      add_pushes(p, g, ready, barrier_deps);
    }
    barrier_deps.push_back(p.add({.kind = TaskKind::COMPUTE,
                                  .phase = TaskPhase::BACKWARD,
                                  .label = "backward (layers without parameters)",
                                  .seconds = plan_.bwd_tail_s,
                                  .deps = {previous}}));
    if (shape.barrier)
      p.add({.kind = TaskKind::BARRIER, .phase = TaskPhase::COMMUNICATION, .label = "every push applied",
             .seconds = barrier_s_, .group = 0, .deps = barrier_deps});
    return p;
  }

 private:
  double client_s(double calls, double bytes) const { return rpc_ ? rpc_->rpc_cost_s(calls, bytes) : 0.0; }

  // Pulls: the server's threads serve the calls, the client's RPC software runs, then the response flows.
  std::vector<int> add_pulls(RankProgram& p) const {
    std::vector<int> out;
    for (int s = 0; s < servers_; ++s) {
      const double bytes = traffic_.shard_B[static_cast<std::size_t>(s)], calls = traffic_.shard_calls[static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      const Role server{RoleKind::SERVER, s};
      std::vector<int> deps;
      if (server_threads())
        deps = {p.add({.kind = TaskKind::SERVE, .phase = TaskPhase::COMMUNICATION, .label = "serve pull", .dst = server,
                       .queue = RPC_THREADS, .calls = calls})};
      if (const double c = client_s(calls, bytes); c > 0)
        deps = {p.add({.kind = TaskKind::DELAY, .phase = TaskPhase::COMMUNICATION, .label = "pull call", .seconds = c, .deps = deps})};
      out.push_back(p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "pull", .bytes = bytes,
                           .src = server, .dst = {RoleKind::RANK}, .deps = deps}));
    }
    return out;
  }

  // Pushes of group g: the client's RPC software, the flow, the server's threads, then its CPU applies the
  // gradient; each push's last task joins `ends`.
  void add_pushes(RankProgram& p, std::size_t g, const std::vector<int>& ready, std::vector<int>& ends) const {
    for (int s = 0; s < servers_; ++s) {
      const double bytes = traffic_.group_B[g][static_cast<std::size_t>(s)];
      const double calls = traffic_.group_calls[g][static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      const Role server{RoleKind::SERVER, s};
      std::vector<int> deps = ready;
      if (const double c = client_s(calls, bytes); c > 0)
        deps = {p.add({.kind = TaskKind::DELAY, .phase = TaskPhase::COMMUNICATION, .label = "push call", .seconds = c, .deps = deps})};
      int last = p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "push", .bytes = bytes,
                        .src = {RoleKind::RANK}, .dst = server, .deps = deps});
      if (server_threads())
        last = p.add({.kind = TaskKind::SERVE, .phase = TaskPhase::COMMUNICATION, .label = "serve push", .dst = server,
                      .queue = RPC_THREADS, .calls = calls, .deps = {last}});
      if (apply_s_per_B_ > 0)
        last = p.add({.kind = TaskKind::SERVE, .phase = TaskPhase::COMMUNICATION, .label = "apply push",
                      .seconds = bytes * apply_s_per_B_, .dst = server, .deps = {last}});
      ends.push_back(last);
    }
  }

  static constexpr int RPC_THREADS = 0;  // serve queue slot
  const IterationPlan& plan_;
  const calibrate::ComputeProfile& profile_;
  const PsTraffic& traffic_;
  int servers_;
  double apply_s_per_B_, barrier_s_;
  const platforms::Transport* rpc_ = nullptr;
};

}  // namespace

StepPrograms plan_parameter_server(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                   const TrainingPoint& point, const platforms::Platform& platform, const Layout& layout) {
  const bool replicated = point.strategy.exchange == "ps-replicated", async = point.strategy.exchange == "ps-async";
  if (!replicated && !async && point.strategy.exchange != "ps")
    throw Failure(fmt::format("plan_parameter_server: family '{}' (internal error)", point.strategy.exchange));
  const double apply_s_per_B = point.ps.apply_s_per_B;
  if (!(std::isfinite(apply_s_per_B) && apply_s_per_B >= 0))
    throw InputError(fmt::format("ps_apply_s_per_B: expected a finite number >= 0, got {}", apply_s_per_B));
  const PsTraffic traffic = ps_traffic(profile, plan, point);
  // With server apply every push was applied as it arrived; else the servers update once after the last
  // push, in parallel, the busiest shard last.
  const double total_B = std::accumulate(traffic.shard_B.begin(), traffic.shard_B.end(), 0.0);
  const double busiest_B = traffic.shard_B.empty() ? 0.0 : *std::max_element(traffic.shard_B.begin(), traffic.shard_B.end());
  const double update_s = plan.update_s * (total_B > 0 ? busiest_B / total_B : 0.0);
  const PsProgramBuilder builder(plan, profile, point, traffic, apply_s_per_B > 0 ? 0.0 : update_s);

  StepPrograms out;
  out.servers = point.ps.servers;
  out.groups.push_back(world_group(point.workers));
  if (builder.server_threads())
    out.serve_queues.push_back({"rpc threads", builder.rpc()->rpc_server_threads, builder.rpc()->rpc_server_cpu_per_call_s});
  const int workers = point.workers;
  out.program_of.assign(static_cast<std::size_t>(workers), 0);
  out.rank_groups.assign(static_cast<std::size_t>(workers), {0});
  out.rank_peers.assign(static_cast<std::size_t>(workers), {});
  int units = workers;  // pushing units: workers, or nodes (ps-replicated)
  if (async) {
    out.groups.clear();  // no barrier
    out.rank_groups.assign(static_cast<std::size_t>(workers), {});
    out.programs = {builder.build({.barrier = false})};
  } else if (!replicated) {
    out.programs = {builder.build({})};
  } else {
    // Every node's first GPU sums its node's gradients, pushes and pulls for it; the others copy to it.
    const int per_node = layout.workers_per_node;
    units = layout.nodes;
    std::map<int, int> leader_program;  // local GPUs -> program
    int copier = -1;
    for (int n = 0; n < layout.nodes; ++n) {
      const int first = n * per_node, local = std::min(per_node, workers - first);
      auto [at, fresh] = leader_program.emplace(local, static_cast<int>(out.programs.size()));
      if (fresh) out.programs.push_back(builder.build({.pushes = true, .copies_from = local - 1}));
      out.program_of[static_cast<std::size_t>(first)] = at->second;
      for (int q = first + 1; q < first + local; ++q) {
        out.rank_peers[static_cast<std::size_t>(first)].push_back(q);
        if (copier < 0) {
          copier = static_cast<int>(out.programs.size());
          out.programs.push_back(builder.build({.pushes = false, .copy_to_leader = true}));
        }
        out.program_of[static_cast<std::size_t>(q)] = copier;
        out.rank_peers[static_cast<std::size_t>(q)] = {first};
      }
    }
  }
  out.busiest_server_s = apply_s_per_B > 0 ? units * busiest_B * apply_s_per_B : async ? 0.0 : update_s;
  out.latency_bound_bypass = point.fidelity.ps_latency_bound_bypass;
  out.fold = ps_fold(traffic, point, platform, layout);
  return out;
}

int ps_split_server_nodes(const platforms::Platform& platform, const TrainingPoint& point, const Layout& layout) {
  if (point.ps.placement == PsPlacement::DEDICATED || !point.fidelity.ps_split_roles || point.input.data != DataMode::SYNTHETIC) return 0;
  if (resolve_mode(point.fidelity.comm_mode, point.workers) != CommMode::COARSE) return 0;
  if (layout.workers_per_node != 1 || layout.nodes < 2 || point.workers != layout.nodes) return 0;
  if (point.strategy.exchange == "ps-async" && point.workers <= ASYNC_MAX_UNFOLDED_WORKERS) return 0;
  const int per_switch = nodes_per_switch(platform, layout.nodes);
  if (per_switch < 2 || layout.nodes % per_switch != 0) return 0;
  return std::min(point.ps.servers, layout.nodes);
}

}  // namespace dtsim::sim
