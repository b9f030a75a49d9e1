// A ring pass shared by the ring-shaped collectives: `steps` steps, each rank sending bytes/n to its right
// neighbour once it has sent its previous step and received that step from its left. Reduce-scatter and
// allgather are n-1 steps (NCCL's ring algorithm for both; Thakur, Rabenseifner & Gropp 2005).
#include <fmt/format.h>

#include <memory>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim::coll {

namespace {
// One flow per ring edge carries every step's chunk; it pays one step latency, the others come after.
void ring_pass_coarse(World& w, const std::vector<int>& ranks, double bytes, int steps, Done done) {
  const int n = static_cast<int>(ranks.size());
  double step_latency_s = 0;
  for (int i = 0; i < n; ++i)
    step_latency_s = std::max(step_latency_s, w.message_latency_s(w.worker_host(ranks[i]),
                                                                  w.worker_host(ranks[(i + 1) % n]), bytes / n));
  auto all = countdown(n, [&w, steps, step_latency_s, done = std::move(done)]() {
    w.after((steps - 1) * step_latency_s, done);
  });
  for (int i = 0; i < n; ++i)
    w.transfer(w.worker_host(ranks[i]), w.worker_host(ranks[(i + 1) % n]), steps * bytes / n, all);
}
}  // namespace

// Every step sent: rank i sends step k once its step k-1 send is done and it received step k-1 from its left.
void ring_pass_fine(World& w, const std::vector<int>& ranks, double bytes, int steps, Done done) {
  const int n = static_cast<int>(ranks.size());
  struct State {
    int n = 0, steps = 0, completed = 0;
    double chunk = 0;
    std::vector<int> sent, issued;
    Done done;
  };
  auto st = std::make_shared<State>();
  st->n = n;
  st->steps = steps;
  st->chunk = bytes / n;
  st->sent.assign(static_cast<std::size_t>(n), 0);
  st->issued.assign(static_cast<std::size_t>(n), 0);
  auto issue = std::make_shared<std::function<void(int)>>();
  *issue = [&w, st, ranks, weak = std::weak_ptr<std::function<void(int)>>(issue)](int i) {
    const int left = (i + st->n - 1) % st->n;
    const int k = st->issued[static_cast<std::size_t>(i)];
    if (k >= st->steps || st->sent[static_cast<std::size_t>(i)] < k || st->sent[static_cast<std::size_t>(left)] < k) return;
    ++st->issued[static_cast<std::size_t>(i)];
    auto self = weak.lock();
    w.transfer(w.worker_host(ranks[static_cast<std::size_t>(i)]), w.worker_host(ranks[static_cast<std::size_t>((i + 1) % st->n)]),
               st->chunk, [st, self, i]() {
                 ++st->sent[static_cast<std::size_t>(i)];
                 if (++st->completed == st->n * st->steps) {
                   st->done();
                   return;
                 }
                 (*self)(i);
                 (*self)((i + 1) % st->n);
               });
  };
  st->done = [&w, keep = issue, user_done = std::move(done)]() mutable {
    w.after(0, [keep]() { *keep = nullptr; });  // the lambdas hold the shared function: break the cycle
    user_done();
  };
  for (int i = 0; i < n; ++i) (*issue)(i);
}

void ring_pass(World& w, const std::vector<int>& ranks, double bytes, int steps, CommMode mode, Done done) {
  // Channels over rail NICs (rail_channels): on nodes whose GPUs each have a NIC, one ring per GPU offset
  // carries its share, as NCCL's rings do; elsewhere one ring over the ranks.
  const auto channels = rail_channels(w, ranks);
  const double share_B = bytes / static_cast<double>(channels.size());
  auto run = [&w, channels, share_B, steps, mode](Done d) {
    auto all = countdown(static_cast<int>(channels.size()), std::move(d));
    for (const auto& c : channels) {
      if (mode == CommMode::COARSE) {
        ring_pass_coarse(w, c, share_B, steps, all);
      } else {
        ring_pass_fine(w, c, share_B, steps, all);
      }
    }
  };
  if (mode != CommMode::COARSE) {
    run(std::move(done));
    return;
  }
  run_alone_or_reuse(w, collective_signature(fmt::format("ring-pass {}", steps), channels, bytes),
                     static_cast<std::int64_t>(ranks.size() * channels.size()), run, std::move(done));
}

ByteSplit ring_pass_bytes(const RankGeometry& g, double bytes, int steps) {
  if (g.ranks < 2) return {};
  const double per_rank = static_cast<double>(steps) / g.ranks * bytes;
  if (g.nodes <= 1) return {0, per_rank * g.ranks};
  // Node-major ring order: each node's last rank sends across to the next node.
  const double inter = per_rank * g.nodes;
  return {inter, std::max(0.0, per_rank * g.ranks - inter)};
}

}  // namespace dtsim::sim::coll
