// Allreduce family: gradients fused into buckets (Horovod's fusion buffer, DDP's buckets) are
// allreduced in backward order by every worker with the strategy's collective, one bucket at a time,
// overlapped with the remaining backward (or after it with overlap off), at most once per cycle.
#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "sim/src/coll/collective.hpp"
#include "sim/src/exchange/exchange.hpp"

namespace dtsim::sim {
namespace {

constexpr double EPS_S = 1e-12;

class AllreduceExchange final : public Exchange {
 public:
  AllreduceExchange(ReplayServices& replay, const Strategy& strategy)
      : Exchange(replay),
        algorithm_(collective_by_name("allreduce", strategy.collective, "--strategy")),
        ranks_(static_cast<std::size_t>(replay.workers())) {
    std::iota(ranks_.begin(), ranks_.end(), 0);
    iters_.resize(static_cast<std::size_t>(replay.iterations()));
    for (auto& it : iters_) it.ready.assign(replay.plan().buckets.size(), 0);
    done_.assign(static_cast<std::size_t>(replay.workers()), RankIter{});
  }

  void name_tracks() override { replay_.trace().name_track(TraceRecorder::Group::EXCHANGES, 0, "collectives"); }

  void bucket_ready(int /*rank*/, int it, std::size_t k) override {
    ++iter(it).ready[k];
    try_start(it);
  }

  void backward_done(int rank, int it) override {
    auto& rs = done_[static_cast<std::size_t>(rank)];
    rs = {it, true, false};
    ++iter(it).bwd_done;
    if (!replay_.point().overlap) try_start(it);
    maybe_finish(rank, it);
  }

 private:
  struct Iter {
    std::vector<int> ready;  // workers whose bucket k is ready
    std::size_t next_bucket = 0;
    bool in_flight = false;
    bool waiting_tick = false;
    int bwd_done = 0;
  };
  struct RankIter {
    int it = -1;
    bool bwd_done = false;
    bool finishing = false;
  };

  Iter& iter(int it) { return iters_[static_cast<std::size_t>(it)]; }

  void try_start(int it) {
    auto& st = iter(it);
    const auto& plan = replay_.plan();
    const auto& point = replay_.point();
    if (st.in_flight || st.waiting_tick || st.next_bucket >= plan.buckets.size()) return;
    if (st.ready[st.next_bucket] < replay_.workers()) return;
    if (!point.overlap && st.bwd_done < replay_.workers()) return;
    if (point.cycle_s > 0) {
      // Horovod's background thread only looks for ready tensors once per cycle.
      auto& w = replay_.world();
      const double tick = std::ceil(w.now() / point.cycle_s - EPS_S) * point.cycle_s;
      if (tick > w.now() + EPS_S) {
        st.waiting_tick = true;
        w.after(tick - w.now(), [this, it] {
          iter(it).waiting_tick = false;
          start(it);
        });
        return;
      }
    }
    start(it);
  }

  void start(int it) {
    auto& st = iter(it);
    auto& w = replay_.world();
    const std::size_t k = st.next_bucket;
    st.in_flight = true;
    replay_.count_activity();
    const double t0 = w.now();
    const double bytes = replay_.plan().buckets[k].bytes;
    const auto& layout = replay_.layout();
    if (replay_.workers() > 1) {
      const auto split = algorithm_.bytes_moved({replay_.workers(), layout.nodes, layout.workers_per_node}, bytes);
      replay_.count_collective_bytes(split.inter_node_B, split.intra_node_B);
    }
    auto done = [this, it, k, t0] {
      auto& s = iter(it);
      const double now = replay_.world().now();
      s.in_flight = false;
      ++s.next_bucket;
      replay_.record_comm(-1, it, t0, now);
      if (replay_.tracing(it))
        replay_.trace().add(TraceRecorder::Group::EXCHANGES, 0,
                            fmt::format("bucket {} ({:.1f} MB)", k, replay_.plan().buckets[k].bytes / 1e6),
                            "allreduce", t0, now);
      if (s.next_bucket == replay_.plan().buckets.size()) {
        for (int r = 0; r < replay_.workers(); ++r) maybe_finish(r, it);
      } else {
        try_start(it);
      }
    };
    start_collective(w, algorithm_, ranks_, bytes, replay_.point().comm_mode, std::move(done));
  }

  void maybe_finish(int rank, int it) {
    auto& rs = done_[static_cast<std::size_t>(rank)];
    if (rs.it != it || !rs.bwd_done || rs.finishing || iter(it).next_bucket < replay_.plan().buckets.size()) return;
    rs.finishing = true;
    replay_.update_and_end(rank, it);
  }

  const CollectiveAlgorithm& algorithm_;
  std::vector<int> ranks_;
  std::vector<Iter> iters_;
  std::vector<RankIter> done_;  // per rank: the iteration whose backward is over
};

}  // namespace

std::unique_ptr<Exchange> make_allreduce_exchange(ReplayServices& replay, const Strategy& strategy) {
  return std::make_unique<AllreduceExchange>(replay, strategy);
}

}  // namespace dtsim::sim
