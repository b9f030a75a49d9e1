// Recursive halving-doubling allreduce (Rabenseifner 2004; MPICH's and Open MPI's large-message
// allreduce): a reduce-scatter by recursive halving, partner distance 1, 2, 4, ... with the largest
// half exchanged first at distance 1, then an allgather by recursive doubling in the reverse order.
// Non-powers of two fold the excess ranks into the first ones before and unfold them after.
#include <simgrid/s4u/Host.hpp>

#include <cstdint>
#include <memory>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
namespace {

struct Steps {
  int p = 1, log_p = 0;
  explicit Steps(int n) {
    while (p * 2 <= n) {
      p *= 2;
      ++log_p;
    }
  }
  // Step s of 2 log p: partner distance and bytes exchanged each way.
  int distance(int s) const { return s < log_p ? 1 << s : p >> (s - log_p + 1); }
  double size(int s, double bytes) const {
    return s < log_p ? bytes / static_cast<double>(1 << (s + 1))
                     : bytes / p * static_cast<double>(1 << (s - log_p));
  }
};

void rhd_start(World& w, const std::vector<int>& ranks, double bytes, CommMode /*mode*/, Done done) {
  // O(n log n) messages of distinct sizes: both modes send every message.
  struct State {
    int n;
    Steps steps{1};
    double bytes;
    std::vector<s4u::Host*> hosts;
    std::vector<std::uint64_t> sent_mask, recv_mask;  // per core rank: bit s set once step s sent / received
    std::vector<int> step;                             // per core rank: current step, 0 .. 2 log p
    std::vector<char> arrived;                         // per core rank: waiting at its step for the partner
    Done done;
  };
  auto st = std::make_shared<State>();
  st->n = static_cast<int>(ranks.size());
  st->steps = Steps(st->n);
  const int p = st->steps.p;
  st->bytes = bytes;
  for (int r : ranks) st->hosts.push_back(w.worker_host(r));
  st->sent_mask.assign(p, 0);
  st->recv_mask.assign(p, 0);
  st->step.assign(p, 0);
  st->arrived.assign(p, 0);
  const int excess = st->n - p;
  st->done = std::move(done);
  auto all_done = coll::countdown(p + excess, [st]() { st->done(); });
  // Partners exchange once both have reached the step (rendezvous, as MPI does for large messages).
  auto advance = std::make_shared<std::function<void(int)>>();
  *advance = [&w, st, all_done, excess, weak = std::weak_ptr<std::function<void(int)>>(advance)](int r) {
    auto self = weak.lock();
    const int s = st->step[r];
    if (s == 2 * st->steps.log_p) {  // core done: hand the result back to the folded rank, if any
      if (r < excess) w.transfer(st->hosts[r], st->hosts[st->steps.p + r], st->bytes, all_done);
      all_done();
      return;
    }
    const int partner = r ^ st->steps.distance(s);
    if (st->step[partner] != s || !st->arrived[partner]) {
      st->arrived[r] = true;  // wait for the partner, which launches the exchange
      return;
    }
    st->arrived[partner] = false;
    const double size = st->steps.size(s, st->bytes);
    for (const auto& ends : {std::pair{r, partner}, std::pair{partner, r}}) {
      const int src = ends.first, dst = ends.second;  // named copies: clang 14 cannot capture bindings
      w.transfer(st->hosts[src], st->hosts[dst], size, [st, self, src, dst, s]() {
        const auto bit = std::uint64_t{1} << s;
        st->sent_mask[src] |= bit;
        st->recv_mask[dst] |= bit;
        for (int x : {src, dst}) {
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
  for (int r = 0; r < p; ++r) {
    if (r < excess) {
      w.transfer(st->hosts[p + r], st->hosts[r], bytes, [advance, r]() { (*advance)(r); });
    } else {
      (*advance)(r);
    }
  }
}

ByteSplit rhd_bytes(const RankGeometry& g, double bytes) {
  const Steps steps(g.ranks);
  const int excess = g.ranks - steps.p;
  const auto node = [&](int r) { return r / g.ranks_per_node; };
  ByteSplit out;
  auto add = [&](int a, int b, double b_) { (node(a) == node(b) ? out.intra_node_B : out.inter_node_B) += b_; };
  for (int r = 0; r < excess; ++r) {
    add(steps.p + r, r, bytes);  // fold
    add(r, steps.p + r, bytes);  // unfold
  }
  for (int s = 0; s < 2 * steps.log_p; ++s)
    for (int r = 0; r < steps.p; ++r) add(r, r ^ steps.distance(s), steps.size(s, bytes));
  return out;
}

}  // namespace

CollectiveAlgorithm allreduce_rhd() {
  return {
      "allreduce", "rhd",
      "recursive halving reduce-scatter + recursive doubling allgather, distance 1 first (MPICH, Open MPI)",
      rhd_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      rhd_bytes,
      [](const UniformNetwork& net, int n, double bytes) {
        const Steps steps(n);
        double t = 0;
        for (int s = 0; s < 2 * steps.log_p; ++s) t += net.latency_s + steps.size(s, bytes) / net.bandwidth_Bps;
        if (n > steps.p) t += 2 * (net.latency_s + bytes / net.bandwidth_Bps);
        return t;
      },
  };
}

}  // namespace dtsim::sim
