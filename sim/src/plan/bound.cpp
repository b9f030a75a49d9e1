// A lower bound on the iteration time the executor gives a layout's step programs, without SimGrid:
// the longest path through rank 0's pipeline with each collective and transfer at the least time its
// bytes need on the platform's links, or the busiest pipeline rank's compute or communication stream
// (plan/layout.cpp computes them on the schedules; programs_schedule_bound is its reference on the
// programs themselves). Why it is a bound: docs/layout-search.md "Pruning by bound".
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "common/errors.hpp"
#include "sim/layout_bound.hpp"
#include "sim/src/library_resolution.hpp"
#include "sim/src/plan/planners.hpp"
#include "sim/src/platform_builder.hpp"
#include "sim/src/training_checks.hpp"

namespace dtsim::sim {
namespace {

constexpr double UNREACHED = -std::numeric_limits<double>::infinity();

// Seconds a task holds its rank at the least: computes and delays their own time (the executor runs a
// compute at factor >= 1 on a device shared at rate <= 1) and their inline collectives', collectives,
// sends and receives their lower bound (nothing without `comm`).
double least_seconds(const StepPrograms& pr, const CommLowerBound* comm, int rank, const Task& t) {
  if (t.kind == TaskKind::DELAY) return t.seconds;
  if (!comm) return t.kind == TaskKind::COMPUTE ? t.seconds : 0.0;
  switch (t.kind) {
    case TaskKind::COMPUTE: {
      double s = t.seconds;
      for (const auto& c : t.inline_collectives) {
        const int g = pr.group_of_slot(rank, c.group);
        if (g >= 0)
          s += c.count * comm->collective_s(c.operation, c.bytes, comm->geometry(pr.groups[static_cast<std::size_t>(g)].ranks));
      }
      return s;
    }
    case TaskKind::COLLECTIVE:
      return comm->collective_s(t.operation, t.bytes, comm->geometry(pr.groups[static_cast<std::size_t>(pr.group_of(rank, t))].ranks));
    case TaskKind::SEND:
      return comm->p2p_s(t.bytes, rank, pr.peer_of(rank, t));
    case TaskKind::RECV:
      return comm->p2p_s(t.bytes, pr.peer_of(rank, t), rank);
    default:
      return 0.0;
  }
}

}  // namespace

CommLowerBound::CommLowerBound(const platforms::Platform& platform, int workers_per_node)
    : workers_per_node_(std::max(1, workers_per_node)) {
  const NetworkCapacity c = network_capacity(platform);
  rank_intra_Bps_ = c.rank_intra_Bps;
  rank_inter_Bps_ = c.rank_inter_Bps;
  node_inter_Bps_ = c.node_inter_Bps;
}

GroupGeometry CommLowerBound::geometry(const std::vector<int>& ranks) const {
  GroupGeometry g;
  g.ranks = static_cast<int>(ranks.size());
  std::unordered_map<int, int> per_node;
  for (int r : ranks) g.on_node = std::max(g.on_node, ++per_node[node_of(r)]);
  g.spans = per_node.size() > 1;
  return g;
}

double CommLowerBound::collective_s(const std::string& operation, double bytes, const GroupGeometry& group) const {
  if (group.ranks < 2 || !(bytes > 0)) return 0;
  const double n = group.ranks, k = group.on_node;
  // Bytes a member on the fullest node must receive (or send) through its own links, and that node's
  // members together through its NICs: information that exists only elsewhere (allgather: the n - 1 pieces it lacks;
  // reduce-scatter: its contributions to the n - 1 other shards; allreduce and broadcast: one value per
  // element, whatever the algorithm, in-switch reduction included; alltoall: a distinct piece from each peer).
  double rank_B = 0, node_B = 0;
  if (operation == "allgather" || operation == "reduce-scatter") {
    rank_B = (n - 1) / n * bytes;
    node_B = (n - k) / n * bytes;
  } else if (operation == "allreduce" || operation == "broadcast") {
    rank_B = node_B = bytes;
  } else if (operation == "alltoall") {
    rank_B = (n - 1) / n * bytes;
    node_B = k * (n - k) / n * bytes;
  } else {
    return 0;
  }
  const double rank_Bps = (k > 1 ? rank_intra_Bps_ : 0.0) + (group.spans ? rank_inter_Bps_ : 0.0);
  double s = rank_Bps > 0 ? rank_B / rank_Bps : 0.0;
  if (group.spans) {
    const double node_Bps = std::min(k * rank_inter_Bps_, node_inter_Bps_);
    if (node_Bps > 0) s = std::max(s, node_B / node_Bps);
  }
  return s;
}

double streams_lower_bound_s(double compute_s, double inline_s, double comm_s, double overlap_slowdown) {
  // The rank computes a seconds alone and x overlapped (compute = a + x / slowdown), its compute stream is
  // busy a + x + inline, and its collectives hold the device (slowing what overlaps them) for comm seconds
  // outside a: the iteration is at least compute + max(x (1 - 1 / slowdown) + inline, comm - x / slowdown),
  // least at x = comm - inline within [0, slowdown x compute].
  const double s = std::max(1.0, overlap_slowdown);
  const double x = std::clamp(comm_s - inline_s, 0.0, s * compute_s);
  return compute_s + std::max(x * (1 - 1 / s) + inline_s, comm_s - x / s);
}

double CommLowerBound::p2p_s(double bytes, int src, int dst) const {
  if (!(bytes > 0) || src == dst) return 0;
  const double Bps = node_of(src) == node_of(dst) ? rank_intra_Bps_ : rank_inter_Bps_;
  return Bps > 0 ? bytes / Bps : 0.0;
}

LayoutScheduleBound programs_schedule_bound(const StepPrograms& pr, const CommLowerBound* comm, double overlap_slowdown) {
  if (pr.ranks() == 0) return {};
  // The ranks rank 0 exchanges with, transitively (its pipeline).
  std::vector<int> ranks{0};
  std::unordered_map<int, int> local{{0, 0}};
  for (std::size_t i = 0; i < ranks.size(); ++i)
    for (int q : pr.rank_peers[static_cast<std::size_t>(ranks[i])])
      if (q >= 0 && local.emplace(q, static_cast<int>(ranks.size())).second) ranks.push_back(q);
  // Every compute of a rank's iteration (with its inline collectives) runs on its one compute stream, and
  // every collective on its one communication stream, inside the iteration.
  double busiest = 0, comm_busiest = 0, overlapped = 0;
  for (int r : ranks) {
    double compute = 0, inline_s = 0, collectives = 0;
    for (const Task& t : pr.of(r).tasks) {
      if (t.kind == TaskKind::COMPUTE) {
        compute += t.seconds;
        inline_s += least_seconds(pr, comm, r, t) - t.seconds;
      }
      if (t.kind == TaskKind::COLLECTIVE) collectives += least_seconds(pr, comm, r, t);
    }
    busiest = std::max(busiest, compute + inline_s);
    comm_busiest = std::max(comm_busiest, collectives);
    overlapped = std::max(overlapped, streams_lower_bound_s(compute, inline_s, collectives, overlap_slowdown));
  }
  std::vector<std::size_t> offset(ranks.size() + 1, 0);
  for (std::size_t i = 0; i < ranks.size(); ++i) offset[i + 1] = offset[i] + pr.of(ranks[i]).tasks.size();
  const std::size_t n = offset.back();
  // Matched sends and receives complete together, once both ends are ready: each end also waits for the
  // other end's dependencies. The n-th send of (sender, receiver, tag) meets the n-th receive.
  std::vector<std::size_t> partner(n, n);
  {
    std::map<std::tuple<int, int, int>, std::pair<std::vector<std::size_t>, std::vector<std::size_t>>> ends;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int r = ranks[i];
      const auto& tasks = pr.of(r).tasks;
      for (std::size_t k = 0; k < tasks.size(); ++k) {
        const Task& t = tasks[k];
        if (t.kind != TaskKind::SEND && t.kind != TaskKind::RECV) continue;
        const int q = pr.peer_of(r, t);
        auto& e = ends[t.kind == TaskKind::SEND ? std::make_tuple(r, q, t.tag) : std::make_tuple(q, r, t.tag)];
        (t.kind == TaskKind::SEND ? e.first : e.second).push_back(offset[i] + k);
      }
    }
    for (const auto& [key, e] : ends)
      for (std::size_t j = 0; j < std::min(e.first.size(), e.second.size()); ++j) {
        partner[e.first[j]] = e.second[j];
        partner[e.second[j]] = e.first[j];
      }
  }
  // Edges: each dependency, and each dependency of a matched end to its partner.
  std::vector<std::vector<std::size_t>> after(n);
  std::vector<int> waiting(n, 0);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto& tasks = pr.of(ranks[i]).tasks;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      const std::size_t v = offset[i] + k;
      for (int d : tasks[k].deps) {
        const std::size_t u = offset[i] + static_cast<std::size_t>(d);
        after[u].push_back(v);
        ++waiting[v];
        if (partner[v] < n) {
          after[u].push_back(partner[v]);
          ++waiting[partner[v]];
        }
      }
    }
  }
  // Rank 0's iteration starts at 0; the other ranks' may have started earlier (they do not wait for
  // rank 0's optimizer update), so their own starts bound nothing: only what rank 0's start reaches.
  std::vector<double> ready(n, UNREACHED), finish(n, UNREACHED);
  std::fill(ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(offset[1]), 0.0);
  std::vector<std::size_t> queue;
  for (std::size_t v = 0; v < n; ++v)
    if (waiting[v] == 0) queue.push_back(v);
  std::size_t done = 0;
  auto rank_at = [&](std::size_t v) {
    return static_cast<std::size_t>(std::upper_bound(offset.begin(), offset.end(), v) - offset.begin()) - 1;
  };
  while (done < queue.size()) {
    const std::size_t v = queue[done++];
    const std::size_t i = rank_at(v);
    finish[v] = ready[v] == UNREACHED ? UNREACHED
                                      : ready[v] + least_seconds(pr, comm, ranks[i], pr.of(ranks[i]).tasks[v - offset[i]]);
    for (std::size_t w : after[v]) {
      ready[w] = std::max(ready[w], finish[v]);
      if (--waiting[w] == 0) queue.push_back(w);
    }
  }
  if (done != n) throw Failure("step programs wait on each other in a cycle (planner bug)");
  double rank0 = 0;
  for (std::size_t v = 0; v < offset[1]; ++v) rank0 = std::max(rank0, finish[v]);
  return {rank0, busiest, comm_busiest, overlapped};
}

double layout_iteration_lower_bound_s(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                                      const TrainingPoint& point) {
  // Jitter draws per-iteration factors below 1 as well as above: no compute time is then certain.
  if (point.variability.jitter_cv > 0) return 0;
  // The platform as the simulation builds it for this point's software, its ranks placed node-major.
  const int per_node = effective_workers_per_node(platform, point);
  const CommLowerBound comm(platform_for_library(platform, point), per_node);
  // The device spread: a synchronous point's ranks all compute at its slowest device's factor (>= 1, device
  // 0 being at 1); an asynchronous one's each at its own, the fastest of which bounds them all.
  double factor = 1;
  if (const double cv = resolve_device_spread(platform, point).cv; cv > 0) {
    const int last = point.workers - 1;
    const int sockets = std::max(1, platform.node.cpu_sockets);
    const int devices = platform.has_gpus() ? point.workers : last / per_node * sockets + last % per_node * sockets / per_node + 1;
    const auto f = persistent_device_factors(devices, cv, point.variability.seed);
    factor = asynchronous(point.strategy) ? *std::min_element(f.begin(), f.end()) : *std::max_element(f.begin(), f.end());
  }
  calibrate::ComputeProfile at_pace = profile;
  for (auto& l : at_pace.layers) {
    l.fwd_s *= factor;
    l.bwd_data_s *= factor;
    l.bwd_weights_s *= factor;
  }
  at_pace.update_s *= factor;
  // GPUs: a compute overlapped by one of its rank's collectives runs OVERLAP_COMPUTE_SLOWDOWN times slower.
  const double slowdown = point.fidelity.interference && platform.has_gpus() ? OVERLAP_COMPUTE_SLOWDOWN : 1.0;
  const LayoutScheduleBound b = layout_schedule_bound(at_pace, point, &comm, slowdown);
  return std::max({b.rank0_path_s, b.busiest_s, b.comm_busiest_s, b.overlapped_s});
}

}  // namespace dtsim::sim
