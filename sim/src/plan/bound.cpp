// A lower bound on the iteration time the executor gives a layout's step programs, without SimGrid:
// the longest path through rank 0's pipeline with communication free, or the busiest program's compute
// (plan/layout.cpp computes both on the schedules; programs_schedule_bound is its reference on the
// programs themselves). Why it is a bound: docs/layout-search.md "Pruning by bound".
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "common/errors.hpp"
#include "sim/layout_bound.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {

constexpr double UNREACHED = -std::numeric_limits<double>::infinity();

// Seconds a task holds its rank at the least: computes and delays their own time (the executor runs a
// compute at factor >= 1 on a device shared at rate <= 1); collectives, sends and receives nothing.
double least_seconds(const Task& t) {
  return t.kind == TaskKind::COMPUTE || t.kind == TaskKind::DELAY ? t.seconds : 0.0;
}

}  // namespace

LayoutScheduleBound programs_schedule_bound(const StepPrograms& pr) {
  // Every compute of a rank's iteration runs on its one compute stream, inside the iteration.
  double busiest = 0;
  for (const auto& p : pr.programs) {
    double sum = 0;
    for (const Task& t : p.tasks)
      if (t.kind == TaskKind::COMPUTE) sum += t.seconds;
    busiest = std::max(busiest, sum);
  }
  if (pr.ranks() == 0) return {0, busiest};
  // The ranks rank 0 exchanges with, transitively (its pipeline).
  std::vector<int> ranks{0};
  std::unordered_map<int, int> local{{0, 0}};
  for (std::size_t i = 0; i < ranks.size(); ++i)
    for (int q : pr.rank_peers[static_cast<std::size_t>(ranks[i])])
      if (q >= 0 && local.emplace(q, static_cast<int>(ranks.size())).second) ranks.push_back(q);
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
  auto task_at = [&](std::size_t v) -> const Task& {
    const std::size_t i = static_cast<std::size_t>(std::upper_bound(offset.begin(), offset.end(), v) - offset.begin()) - 1;
    return pr.of(ranks[i]).tasks[v - offset[i]];
  };
  while (done < queue.size()) {
    const std::size_t v = queue[done++];
    finish[v] = ready[v] == UNREACHED ? UNREACHED : ready[v] + least_seconds(task_at(v));
    for (std::size_t w : after[v]) {
      ready[w] = std::max(ready[w], finish[v]);
      if (--waiting[w] == 0) queue.push_back(w);
    }
  }
  if (done != n) throw Failure("step programs wait on each other in a cycle (planner bug)");
  double rank0 = 0;
  for (std::size_t v = 0; v < offset[1]; ++v) rank0 = std::max(rank0, finish[v]);
  return {rank0, busiest};
}

double layout_iteration_lower_bound_s(const calibrate::ComputeProfile& profile, const TrainingPoint& point) {
  // Jitter draws per-iteration factors below 1 as well as above: no compute time is then certain.
  if (point.variability.jitter_cv > 0) return 0;
  const LayoutScheduleBound b = layout_schedule_bound(profile, point);
  return std::max(b.rank0_path_s, b.busiest_s);
}

}  // namespace dtsim::sim
