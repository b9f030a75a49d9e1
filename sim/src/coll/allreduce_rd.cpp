// Recursive doubling allreduce (Thakur, Rabenseifner & Gropp 2005; MPICH's, Open MPI's and MVAPICH2's
// small-message allreduce): log2 p steps in which each rank exchanges its whole vector with the partner
// at distance 1, 2, 4, ... and reduces. Non-powers of two fold the excess ranks into the first ones
// before (whole vector) and hand them the result after.
#include <simgrid/s4u/Host.hpp>

#include <memory>

#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
namespace {

struct Core {
  int p = 1, log_p = 0;
  explicit Core(int n) {
    while (p * 2 <= n) {
      p *= 2;
      ++log_p;
    }
  }
};

void rd_start(World& w, const std::vector<int>& ranks, double bytes, CommMode /*mode*/, Done done) {
  // n log n messages of the full vector: both modes send every message.
  struct State {
    Core core{1};
    std::vector<s4u::Host*> hosts;
    std::vector<int> step;      // per core rank: steps finished
    std::vector<char> waiting;  // per core rank: arrived at its step, partner not yet there
    std::vector<int> halves;    // per core rank: transfers of the current exchange still in flight
  };
  auto st = std::make_shared<State>();
  const int n = static_cast<int>(ranks.size());
  st->core = Core(n);
  const int p = st->core.p;
  const int excess = n - p;
  for (int r : ranks) st->hosts.push_back(w.worker_host(r));
  st->step.assign(p, 0);
  st->waiting.assign(p, 0);
  st->halves.assign(p, 0);
  auto all_done = coll::countdown(p + excess, std::move(done));
  auto advance = std::make_shared<std::function<void(int)>>();
  *advance = [&w, st, all_done, excess, bytes, weak = std::weak_ptr<std::function<void(int)>>(advance)](int r) {
    auto self = weak.lock();
    const int s = st->step[r];
    if (s == st->core.log_p) {  // done: hand the result to the folded rank, if any
      if (r < excess) w.transfer(st->hosts[r], st->hosts[st->core.p + r], bytes, all_done);
      all_done();
      return;
    }
    const int partner = r ^ (1 << s);
    if (st->step[partner] != s || !st->waiting[partner]) {
      st->waiting[r] = 1;  // the partner launches the exchange when it arrives
      return;
    }
    st->waiting[partner] = 0;
    // Both directions at once; both sides move on when its exchange (send and receive) is complete.
    auto both = coll::countdown(2, [st, self, r, partner]() {
      for (int x : {r, partner}) {
        ++st->step[x];
        (*self)(x);
      }
    });
    w.transfer(st->hosts[r], st->hosts[partner], bytes, both);
    w.transfer(st->hosts[partner], st->hosts[r], bytes, both);
  };
  for (int r = 0; r < p; ++r) {
    if (r < excess) {
      w.transfer(st->hosts[p + r], st->hosts[r], bytes, [advance, r]() { (*advance)(r); });
    } else {
      (*advance)(r);
    }
  }
}

ByteSplit rd_bytes(const RankGeometry& g, double bytes) {
  const Core core(g.ranks);
  const int excess = g.ranks - core.p;
  const auto node = [&](int r) { return r / g.ranks_per_node; };
  ByteSplit out;
  auto add = [&](int a, int b) { (node(a) == node(b) ? out.intra_node_B : out.inter_node_B) += bytes; };
  for (int r = 0; r < excess; ++r) {
    add(core.p + r, r);
    add(r, core.p + r);
  }
  for (int s = 0; s < core.log_p; ++s)
    for (int r = 0; r < core.p; ++r) add(r, r ^ (1 << s));
  return out;
}

}  // namespace

CollectiveAlgorithm allreduce_rd() {
  return {
      "allreduce", "rd",
      "recursive doubling: log2 p exchanges of the whole vector, distance 1 first (MPI small messages)",
      rd_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      rd_bytes,
      [](const UniformNetwork& net, int n, double bytes) {
        const Core core(n);
        double t = core.log_p * (net.latency_s + bytes / net.bandwidth_Bps);
        if (n > core.p) t += 2 * (net.latency_s + bytes / net.bandwidth_Bps);
        return t;
      },
  };
}

}  // namespace dtsim::sim
