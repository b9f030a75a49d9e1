// Collectives and parameter-server exchange as callback-driven state machines on a World. Fine mode
// sends every message of the algorithm; coarse mode merges identical steps into fewer, larger flows
// and adds the merged steps' latencies in closed form (docs/simulation-comm.md).
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <unordered_set>

#include "common/errors.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;

namespace {

using Done = std::function<void()>;

// Calls `done` once `count` calls of the returned function have happened.
std::function<void()> countdown(int count, Done done) {
  auto left = std::make_shared<int>(count);
  auto fn = std::make_shared<Done>(std::move(done));
  return [left, fn]() {
    if (--*left == 0) (*fn)();
  };
}

void check_ranks(const World& world, const std::vector<int>& ranks, double bytes) {
  if (ranks.empty()) throw Failure("collective over an empty rank list");
  if (!(bytes >= 0 && bytes < 1e18)) throw Failure(fmt::format("collective of {} bytes", bytes));
  std::unordered_set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= world.workers()) throw Failure(fmt::format("collective rank {} out of range", r));
    if (!seen.insert(r).second) throw Failure(fmt::format("collective rank {} listed twice", r));
  }
}

// ---- ring: reduce-scatter then allgather, 2(n-1) steps of bytes/n around the ring ----
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
  st->done = std::move(done);
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
  // The lambdas hold the shared function; break the cycle when the collective ends.
  auto keep = try_issue;
  auto user_done = std::move(st->done);
  st->done = [&w, keep, user_done]() mutable {
    w.after(0, [keep]() { *keep = nullptr; });  // break the self-reference once no callback of ours runs
    user_done();
  };
  for (int i = 0; i < st->n; ++i) (*try_issue)(i);
}

void ring_coarse(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  const int n = static_cast<int>(ranks.size());
  const int steps = 2 * (n - 1);
  double step_latency_s = 0;
  for (int i = 0; i < n; ++i)
    step_latency_s = std::max(step_latency_s, w.route_latency_s(w.worker_host(ranks[i]), w.worker_host(ranks[(i + 1) % n])));
  // One flow per ring edge carries all 2(n-1) chunks; it pays one step latency, the others come after.
  auto all = countdown(n, [&w, steps, step_latency_s, done = std::move(done)]() {
    w.after((steps - 1) * step_latency_s, done);
  });
  for (int i = 0; i < n; ++i)
    w.transfer(w.worker_host(ranks[i]), w.worker_host(ranks[(i + 1) % n]), steps * bytes / n, all);
}

// ---- binary tree: reduce to rank 0 of the list, then broadcast back (heap numbering) ----
void tree_allreduce(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  struct State {
    int n;
    std::vector<int> waiting;  // children not yet reduced in
    std::vector<s4u::Host*> hosts;
    Done done;
  };
  auto st = std::make_shared<State>();
  st->n = static_cast<int>(ranks.size());
  for (int r : ranks) st->hosts.push_back(w.worker_host(r));
  st->waiting.assign(st->n, 0);
  for (int i = 1; i < st->n; ++i) ++st->waiting[(i - 1) / 2];
  st->done = std::move(done);
  auto down_done = countdown(st->n - 1, [st]() { st->done(); });
  // Broadcast from i to its children, recursively.
  auto bcast = std::make_shared<std::function<void(int)>>();
  *bcast = [&w, st, bytes, down_done, weak = std::weak_ptr<std::function<void(int)>>(bcast)](int i) {
    auto self = weak.lock();
    for (int c = 2 * i + 1; c <= 2 * i + 2 && c < st->n; ++c)
      w.transfer(st->hosts[i], st->hosts[c], bytes, [self, down_done, c]() {
        (*self)(c);
        down_done();
      });
  };
  auto up = std::make_shared<std::function<void(int)>>();
  *up = [&w, st, bytes, bcast, weak = std::weak_ptr<std::function<void(int)>>(up)](int i) {
    if (i == 0) {
      (*bcast)(0);
      return;
    }
    auto self = weak.lock();
    const int parent = (i - 1) / 2;
    w.transfer(st->hosts[i], st->hosts[parent], bytes, [st, self, parent]() {
      if (--st->waiting[parent] == 0) (*self)(parent);
    });
  };
  auto user_done = std::move(st->done);
  st->done = [&w, bcast, up, user_done]() mutable {
    w.after(0, [bcast, up]() {  // break the self-references once no callback of ours is running
      *bcast = nullptr;
      *up = nullptr;
    });
    user_done();
  };
  for (int i = 0; i < st->n; ++i)
    if (st->waiting[i] == 0) (*up)(i);
}

// ---- recursive halving-doubling (Rabenseifner); non-powers of two fold the excess ranks first ----
void rhd_allreduce(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  struct State {
    int n, p, log_p;
    double bytes;
    std::vector<s4u::Host*> hosts;
    std::vector<std::uint64_t> sent_mask, recv_mask;  // per core rank: bit s set once step s sent / received
    std::vector<int> step;                             // per core rank: current step, 0 .. 2 log p
    std::vector<char> arrived;                         // per core rank: waiting at its step for the partner
    int finished = 0;
    Done done;
  };
  auto st = std::make_shared<State>();
  st->n = static_cast<int>(ranks.size());
  st->p = 1;
  st->log_p = 0;
  while (st->p * 2 <= st->n) {
    st->p *= 2;
    ++st->log_p;
  }
  st->bytes = bytes;
  for (int r : ranks) st->hosts.push_back(w.worker_host(r));
  st->sent_mask.assign(st->p, 0);
  st->recv_mask.assign(st->p, 0);
  st->step.assign(st->p, 0);
  st->arrived.assign(st->p, 0);
  const int excess = st->n - st->p;
  st->done = std::move(done);
  auto all_done = countdown(st->p + excess, [st]() { st->done(); });
  // Core rank r at step s: halving for s < log p (partner at distance p/2^(s+1), size bytes/2^(s+1)),
  // doubling after (distance 2^(s-log p), size bytes/p * 2^(s-log p)). Partners exchange once both
  // have reached the step (rendezvous, as MPI does for large messages).
  auto advance = std::make_shared<std::function<void(int)>>();
  *advance = [&w, st, all_done, excess, weak = std::weak_ptr<std::function<void(int)>>(advance)](int r) {
    auto self = weak.lock();
    const int s = st->step[r];
    if (s == 2 * st->log_p) {  // core done: hand the result back to the folded rank, if any
      if (r < excess) w.transfer(st->hosts[r], st->hosts[st->p + r], st->bytes, all_done);
      all_done();
      return;
    }
    const bool halving = s < st->log_p;
    const int dist = halving ? st->p >> (s + 1) : 1 << (s - st->log_p);
    const int partner = r ^ dist;
    if (st->step[partner] != s || !st->arrived[partner]) {
      st->arrived[r] = true;  // wait for the partner, which launches the exchange
      return;
    }
    st->arrived[partner] = false;
    const double size = halving ? st->bytes / static_cast<double>(1 << (s + 1))
                                : st->bytes / st->p * static_cast<double>(1 << (s - st->log_p));
    for (auto [src, dst] : {std::pair{r, partner}, std::pair{partner, r}}) {
      w.transfer(st->hosts[src], st->hosts[dst], size, [st, self, src, dst, s]() {
        st->sent_mask[src] |= std::uint64_t{1} << s;
        st->recv_mask[dst] |= std::uint64_t{1} << s;
        for (int x : {src, dst}) {
          const auto bit = std::uint64_t{1} << s;
          if (st->step[x] == s && (st->sent_mask[x] & bit) && (st->recv_mask[x] & bit)) {
            ++st->step[x];
            (*self)(x);
          }
        }
      });
    }
  };
  auto user_done = std::move(st->done);
  st->done = [&w, advance, user_done]() mutable {
    w.after(0, [advance]() { *advance = nullptr; });  // break the self-reference once no callback runs
    user_done();
  };
  // Fold: excess rank p+i sends its whole buffer to core rank i, which starts when it has arrived.
  for (int r = 0; r < st->p; ++r) {
    if (r < excess) {
      w.transfer(st->hosts[st->p + r], st->hosts[r], bytes, [advance, r]() { (*advance)(r); });
    } else {
      (*advance)(r);
    }
  }
}

// ---- hierarchical: intra-node reduce to the node leader, leaders' allreduce, intra-node broadcast ----
void hier_allreduce(World& w, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
  std::vector<std::vector<int>> by_node;  // in order of first appearance
  std::vector<int> node_ids;
  for (int r : ranks) {
    const int node = w.node_of(r);
    auto it = std::find(node_ids.begin(), node_ids.end(), node);
    if (it == node_ids.end()) {
      node_ids.push_back(node);
      by_node.push_back({r});
    } else {
      by_node[it - node_ids.begin()].push_back(r);
    }
  }
  std::vector<int> leaders;
  for (auto& g : by_node) leaders.push_back(g.front());
  auto groups = std::make_shared<std::vector<std::vector<int>>>(std::move(by_node));
  auto broadcast_phase = [&w, groups, bytes, done = std::move(done)]() {
    int members = 0;
    for (auto& g : *groups) members += static_cast<int>(g.size()) - 1;
    if (members == 0) {
      w.after(0, done);
      return;
    }
    auto all = countdown(members, done);
    for (auto& g : *groups)
      for (size_t i = 1; i < g.size(); ++i) w.transfer(w.worker_host(g[0]), w.worker_host(g[i]), bytes, all);
  };
  auto inter_phase = [&w, leaders, bytes, mode, broadcast_phase]() {
    start_allreduce(w, CommPattern::ALLREDUCE_RING, leaders, bytes, mode, broadcast_phase);
  };
  int members = 0;
  for (auto& g : *groups) members += static_cast<int>(g.size()) - 1;
  if (members == 0) {
    inter_phase();
    return;
  }
  auto reduced = countdown(members, inter_phase);
  for (auto& g : *groups)
    for (size_t i = 1; i < g.size(); ++i) w.transfer(w.worker_host(g[i]), w.worker_host(g[0]), bytes, reduced);
}

std::string ring_signature(const std::vector<int>& ranks, double bytes) {
  std::string key = fmt::format("ring {:.17g}:", bytes);
  for (int r : ranks) key += fmt::format("{},", r);
  return key;
}

}  // namespace

CommMode resolve_mode(CommMode mode, int ranks) {
  if (mode != CommMode::AUTO) return mode;
  return ranks > COARSE_ABOVE_RANKS ? CommMode::COARSE : CommMode::FINE;
}

void start_allreduce(World& world, CommPattern algorithm, const std::vector<int>& ranks, double bytes, CommMode mode,
                     std::function<void()> done) {
  check_ranks(world, ranks, bytes);
  if (ranks.size() == 1) {
    world.after(0, std::move(done));
    return;
  }
  const CommMode used = resolve_mode(mode, static_cast<int>(ranks.size()));
  switch (algorithm) {
    case CommPattern::ALLREDUCE_RING:
      if (used == CommMode::FINE) {
        ring_fine(world, ranks, bytes, std::move(done));
        return;
      }
      if (world.transfers_in_flight() == 0) {
        // Reuse: an identical ring that ran alone on the network took exactly this long; only when
        // nothing else is in flight now either (later flows starting inside the window are not seen).
        const std::string key = ring_signature(ranks, bytes);
        auto& cache = world.duration_cache();
        if (auto it = cache.find(key); it != cache.end()) {
          world.after(it->second, std::move(done));
          return;
        }
        const double t0 = world.now();
        const std::int64_t f0 = world.flows_started();
        const auto own_flows = static_cast<std::int64_t>(ranks.size());
        ring_coarse(world, ranks, bytes, [&world, key, t0, f0, own_flows, done = std::move(done)]() {
          if (world.flows_started() - f0 == own_flows) world.duration_cache()[key] = world.now() - t0;
          done();
        });
        return;
      }
      ring_coarse(world, ranks, bytes, std::move(done));
      return;
    case CommPattern::ALLREDUCE_TREE:  // O(n) messages: the same in both modes
      tree_allreduce(world, ranks, bytes, std::move(done));
      return;
    case CommPattern::ALLREDUCE_RHD:  // O(n log n) messages of distinct sizes: the same in both modes
      rhd_allreduce(world, ranks, bytes, std::move(done));
      return;
    case CommPattern::ALLREDUCE_HIER:
      hier_allreduce(world, ranks, bytes, used, std::move(done));
      return;
    case CommPattern::BROADCAST:
      start_broadcast(world, ranks.front(), ranks, bytes, mode, std::move(done));
      return;
    case CommPattern::PS:
      break;
  }
  throw Failure("start_allreduce: pattern " + to_string(algorithm) + " is not an allreduce");
}

void start_broadcast(World& world, int root, const std::vector<int>& ranks, double bytes, CommMode /*mode*/,
                     std::function<void()> done) {
  // Binomial tree: ceil(log2 n) rounds; O(n) messages, so both modes send every message.
  check_ranks(world, ranks, bytes);
  std::vector<int> order{root};
  for (int r : ranks)
    if (r != root) order.push_back(r);
  if (order.size() != ranks.size()) throw Failure(fmt::format("broadcast root {} is not among the ranks", root));
  const int n = static_cast<int>(order.size());
  if (n == 1) {
    world.after(0, std::move(done));
    return;
  }
  auto all = countdown(n - 1, std::move(done));
  // Relative rank v holding the data sends to v + 2^j for every j above its highest bit, in order.
  auto send_from = std::make_shared<std::function<void(int, int)>>();
  *send_from = [&world, order, n, bytes, all, weak = std::weak_ptr<std::function<void(int, int)>>(send_from)](int v,
                                                                                                          int j) {
    auto self = weak.lock();
    if (!self || v + (1 << j) >= n) return;
    const int child = v + (1 << j);
    world.transfer(world.worker_host(order[v]), world.worker_host(order[child]), bytes, [self, all, v, j, child]() {
      (*self)(v, j + 1);
      (*self)(child, j + 1);
      all();
    });
  };
  (*send_from)(0, 0);  // the transfer callbacks keep the function alive until the last one
}

void start_ps_exchange(World& world, const std::vector<int>& ranks, const std::vector<s4u::Host*>& servers,
                       double bytes, CommMode mode, std::function<void()> done) {
  check_ranks(world, ranks, bytes);
  if (servers.empty()) throw Failure("parameter-server exchange without servers");
  const double shard = bytes / static_cast<double>(servers.size());
  const CommMode used = resolve_mode(mode, static_cast<int>(ranks.size()));
  // Flows per server: in fine mode one per rank; in coarse mode one per node from the node's CPU side
  // carrying its ranks' bytes, except towards a server on that very node (per rank: PCIe, no NIC).
  struct End {
    s4u::Host* host;
    double weight;
  };
  std::vector<std::vector<End>> ends(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    std::vector<int> nodes;         // merged nodes, in order of first rank
    std::vector<size_t> merged_at;  // their entry in ends[s]
    for (int r : ranks) {
      const int node = world.node_of(r);
      if (used == CommMode::FINE || servers[s] == world.node_host(node)) {
        ends[s].push_back({world.worker_host(r), 1.0});
        continue;
      }
      auto it = std::find(nodes.begin(), nodes.end(), node);
      if (it == nodes.end()) {
        nodes.push_back(node);
        merged_at.push_back(ends[s].size());
        ends[s].push_back({world.node_host(node), 1.0});
      } else {
        ends[s][merged_at[it - nodes.begin()]].weight += 1.0;
      }
    }
  }
  int total = 0;
  for (auto& e : ends) total += static_cast<int>(e.size());
  auto all = countdown(total, std::move(done));
  for (size_t s = 0; s < servers.size(); ++s) {
    auto* server = servers[s];
    const auto& mine = ends[s];
    auto pull = [&world, mine, server, shard, all]() {
      for (const auto& e : mine) world.transfer(server, e.host, shard * e.weight, all);
    };
    auto pushed = countdown(static_cast<int>(mine.size()), pull);
    for (const auto& e : mine) world.transfer(e.host, server, shard * e.weight, pushed);
  }
}

}  // namespace dtsim::sim
