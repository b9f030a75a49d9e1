// Ring allreduce: reduce-scatter then allgather, 2(n-1) steps of bytes/n around the ring (Patarasuk &
// Yuan 2009; NCCL's and Horovod's large-message algorithm). Fine mode sends every step; coarse mode
// sends one flow per ring edge carrying all 2(n-1) chunks and adds the other steps' latencies. Across
// nodes whose GPUs each have a rail NIC, NCCL runs several rings (channels), each leaving and entering
// the nodes at other GPUs and so through other NICs: one ring per GPU offset, bytes split evenly.
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <memory>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
namespace {

void ring_fine(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  struct State {
    int n, steps;
    double chunk;
    std::vector<int> sent, issued;
    std::vector<s4u::Host*> hosts;
    int completed = 0;
    Done done;
  };
  auto st = std::make_shared<State>();
  st->n = static_cast<int>(ranks.size());
  st->steps = 2 * (st->n - 1);
  st->chunk = bytes / st->n;
  st->sent.assign(st->n, 0);
  st->issued.assign(st->n, 0);
  for (int r : ranks) st->hosts.push_back(w.worker_host(r));
  // Rank i sends step k once its step k-1 send finished and it received step k-1 from its left.
  auto try_issue = std::make_shared<std::function<void(int)>>();
  *try_issue = [&w, st, weak = std::weak_ptr<std::function<void(int)>>(try_issue)](int i) {
    const int left = (i + st->n - 1) % st->n;
    const int k = st->issued[i];
    if (k >= st->steps || st->sent[i] < k || st->sent[left] < k) return;
    ++st->issued[i];
    auto self = weak.lock();
    w.transfer(st->hosts[i], st->hosts[(i + 1) % st->n], st->chunk, [st, self, i]() {
      ++st->sent[i];
      if (++st->completed == st->n * st->steps) {
        st->done();
        return;
      }
      (*self)(i);
      (*self)((i + 1) % st->n);
    });
  };
  // The lambdas hold the shared function; break the cycle once no callback of ours runs.
  st->done = [&w, keep = try_issue, user_done = std::move(done)]() mutable {
    w.after(0, [keep]() { *keep = nullptr; });
    user_done();
  };
  for (int i = 0; i < st->n; ++i) (*try_issue)(i);
}

void ring_coarse(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  const int n = static_cast<int>(ranks.size());
  const int steps = 2 * (n - 1);
  double step_latency_s = 0;
  // Each merged step is a message of bytes/n: its latency follows the route's transport at that size.
  for (int i = 0; i < n; ++i)
    step_latency_s = std::max(step_latency_s, w.message_latency_s(w.worker_host(ranks[i]),
                                                                  w.worker_host(ranks[(i + 1) % n]), bytes / n));
  // One flow per ring edge carries all 2(n-1) chunks; it pays one step latency, the others come after.
  auto all = coll::countdown(n, [&w, steps, step_latency_s, done = std::move(done)]() {
    w.after((steps - 1) * step_latency_s, done);
  });
  for (int i = 0; i < n; ++i)
    w.transfer(w.worker_host(ranks[i]), w.worker_host(ranks[(i + 1) % n]), steps * bytes / n, all);
}


// Every channel's ring over its share of the bytes, at once; done when the last one ends.
void rings_coarse(World& w, const std::vector<std::vector<int>>& channels, double bytes, Done done) {
  if (channels.size() == 1) {
    ring_coarse(w, channels.front(), bytes, std::move(done));
    return;
  }
  auto all = coll::countdown(static_cast<int>(channels.size()), std::move(done));
  for (const auto& ranks : channels) ring_coarse(w, ranks, bytes / static_cast<double>(channels.size()), all);
}

void ring_start(World& world, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
  const auto channels = coll::rail_channels(world, ranks);
  if (mode == CommMode::FINE) {
    if (channels.size() == 1) {
      ring_fine(world, ranks, bytes, std::move(done));
      return;
    }
    auto all = coll::countdown(static_cast<int>(channels.size()), std::move(done));
    for (const auto& c : channels) ring_fine(world, c, bytes / static_cast<double>(channels.size()), all);
    return;
  }
  // Reuse of an identical ring that ran alone (coll::run_alone_or_reuse): exact where nothing else is
  // in flight now either (later flows starting inside the window are not seen).
  coll::run_alone_or_reuse(world, coll::collective_signature("ring", channels, bytes), static_cast<std::int64_t>(ranks.size() * channels.size()),
                           [&world, channels, bytes](Done d) { rings_coarse(world, channels, bytes, std::move(d)); },
                           std::move(done));
}

}  // namespace

namespace coll {
std::vector<std::vector<int>> rail_channels(const World& world, const std::vector<int>& ranks) {
  const auto groups = group_by_node(world, ranks);
  const std::size_t per_node = groups.front().size();
  const bool even = std::all_of(groups.begin(), groups.end(), [&](const auto& g) { return g.size() == per_node; });
  if (world.rails_per_node() < 2 || groups.size() < 2 || per_node < 2 || !even) return {ranks};
  std::vector<std::vector<int>> channels;
  for (std::size_t c = 0; c < per_node; ++c) {
    std::vector<int> order;
    for (const auto& g : groups)
      for (std::size_t i = 0; i < per_node; ++i) order.push_back(g[(i + c) % per_node]);
    channels.push_back(std::move(order));
  }
  return channels;
}
}  // namespace coll

CollectiveAlgorithm allreduce_ring() {
  return {
      "allreduce", "ring", "reduce-scatter + allgather around a ring, 2(n-1) steps of bytes/n (NCCL, Horovod)",
      ring_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      coll::ring_like_bytes,
      [](const UniformNetwork& net, int n, double bytes) {
        return 2.0 * (n - 1) * (net.latency_s + bytes / n / net.bandwidth_Bps);
      },
  };
}

}  // namespace dtsim::sim
