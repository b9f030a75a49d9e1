// The collective-algorithm table: one row per algorithm file. Adding an algorithm is one file, one row
// here and one closed-form test (tests/sim/test_collectives.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {

CollectiveAlgorithm allreduce_ring();
CollectiveAlgorithm allreduce_tree();
CollectiveAlgorithm allreduce_rhd();
CollectiveAlgorithm allreduce_hier();
CollectiveAlgorithm allreduce_rd();
CollectiveAlgorithm allreduce_nvls();
CollectiveAlgorithm broadcast_binomial();
CollectiveAlgorithm reduce_scatter_ring();
CollectiveAlgorithm allgather_ring();
CollectiveAlgorithm alltoall_pairwise();

const std::vector<CollectiveAlgorithm>& collective_table() {
  static const std::vector<CollectiveAlgorithm> table{
      allreduce_ring(),
      allreduce_tree(),
      allreduce_rhd(),
      allreduce_hier(),
      allreduce_rd(),
      allreduce_nvls(),
      broadcast_binomial(),
      reduce_scatter_ring(),
      allgather_ring(),
      alltoall_pairwise(),
  };
  return table;
}

const CollectiveAlgorithm* collective_or_null(const std::string& operation, const std::string& name) {
  for (const auto& a : collective_table())
    if (a.operation == operation && a.name == name) return &a;
  return nullptr;
}

std::vector<std::string> collective_operations() {
  std::vector<std::string> out;
  for (const auto& a : collective_table())
    if (std::find(out.begin(), out.end(), a.operation) == out.end()) out.push_back(a.operation);
  return out;
}

const CollectiveAlgorithm* collective_by_full_name_or_null(const std::string& full_name) {
  for (const auto& a : collective_table())
    if (a.full_name() == full_name) return &a;
  return nullptr;
}

std::string collective_names(const std::string& operation) {
  std::string out;
  for (const auto& a : collective_table())
    if (a.operation == operation) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

const CollectiveAlgorithm& collective_by_name(const std::string& operation, const std::string& name,
                                              const std::string& what) {
  if (const auto* a = collective_or_null(operation, name)) return *a;
  throw InputError(fmt::format("{}: unknown {} algorithm '{}' (expected one of: {})", what, operation, name,
                               collective_names(operation)));
}

CommMode resolve_mode(CommMode mode, int ranks) {
  if (mode != CommMode::AUTO) return mode;
  return ranks > COARSE_ABOVE_RANKS ? CommMode::COARSE : CommMode::FINE;
}

void start_collective(World& world, const CollectiveAlgorithm& algorithm, const std::vector<int>& ranks,
                      double bytes, CommMode mode, Done done) {
  if (ranks.empty()) throw Failure("collective over an empty rank list");
  if (!(bytes >= 0 && bytes < 1e18)) throw Failure(fmt::format("collective of {} bytes", bytes));
  std::unordered_set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= world.workers()) throw Failure(fmt::format("collective rank {} out of range", r));
    if (!seen.insert(r).second) throw Failure(fmt::format("collective rank {} listed twice", r));
  }
  if (ranks.size() == 1) {
    world.after(0, std::move(done));
    return;
  }
  algorithm.start(world, ranks, bytes, resolve_mode(mode, static_cast<int>(ranks.size())), std::move(done));
}

namespace coll {

std::string collective_signature(const std::string& algorithm, const std::vector<std::vector<int>>& channels, double bytes) {
  std::string key = fmt::format("{} {:.17g}:", algorithm, bytes);
  for (const auto& c : channels) {
    for (int r : c) key += fmt::format("{},", r);
    key += ';';
  }
  return key;
}

void run_alone_or_reuse(World& w, const std::string& key, std::int64_t own_flows, const std::function<void(Done)>& run,
                        Done done) {
  if (w.transfers_in_flight() != 0 || w.recording_link_usage()) {
    run(std::move(done));
    return;
  }
  auto& cache = w.duration_cache();
  if (auto it = cache.find(key); it != cache.end()) {
    w.after(it->second.duration_s, [&w, &charge = it->second.link_B, done = std::move(done)]() {
      w.charge_links(charge);  // counted when the reused collective ends, as a flow's bytes are
      done();
    });
    return;
  }
  const double t0 = w.now();
  const std::int64_t f0 = w.flows_started();
  run([&w, key, t0, f0, own_flows, before = w.flow_link_bytes(), done = std::move(done)]() {
    if (w.flows_started() - f0 == own_flows) {
      World::CachedCollective entry{w.now() - t0, {}};
      const std::vector<double> after = w.flow_link_bytes();
      for (std::size_t id = 0; id < after.size(); ++id) {
        const double moved = after[id] - (id < before.size() ? before[id] : 0.0);
        if (moved > 0) entry.link_B.emplace_back(static_cast<int>(id), moved);
      }
      w.duration_cache()[key] = std::move(entry);
    }
    done();
  });
}

std::function<void()> countdown(int count, Done done) {
  auto left = std::make_shared<int>(count);
  auto fn = std::make_shared<Done>(std::move(done));
  return [left, fn]() {
    if (--*left == 0) (*fn)();
  };
}

std::vector<std::vector<int>> group_by_node(const World& world, const std::vector<int>& ranks) {
  std::vector<std::vector<int>> groups;
  std::vector<int> node_ids;
  for (int r : ranks) {
    const int node = world.node_of(r);
    std::size_t i = 0;
    while (i < node_ids.size() && node_ids[i] != node) ++i;
    if (i == node_ids.size()) {
      node_ids.push_back(node);
      groups.push_back({r});
    } else {
      groups[i].push_back(r);
    }
  }
  return groups;
}

ByteSplit ring_like_bytes(const RankGeometry& g, double bytes) {
  if (g.ranks < 2) return {};
  const double per_rank = 2.0 * (g.ranks - 1) / g.ranks * bytes;
  if (g.nodes <= 1) return {0, per_rank * g.ranks};
  const double inter = per_rank / g.ranks_per_node * g.nodes;
  return {inter, std::max(0.0, per_rank * g.ranks - inter)};
}

}  // namespace coll
}  // namespace dtsim::sim
