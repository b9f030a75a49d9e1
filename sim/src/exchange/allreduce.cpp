// Allreduce family: gradients fused into buckets (Horovod's fusion buffer, DDP's buckets) are
// allreduced in backward order by every worker with the strategy's collective, one bucket at a time,
// overlapped with the remaining backward (or after it with overlap off). With a cycle (Horovod) the plan's
// buckets are the tensors of about one cycle of backward, and each cycle tick fuses those ready on every
// rank, up to the fusion threshold, into one collective (docs/frameworks.md "Cycle and tensor fusion").
#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "sim/src/coll/collective.hpp"
#include "sim/src/coll/library.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {

constexpr double EPS_S = 1e-12;
// Horovod's response cache (0.15+) negotiates with a bit vector, one bit per cached tensor, packed in
// 64-bit words and allreduced among all ranks each cycle (horovod/common/response_cache.cc); the
// message is tiny, so the cost is the small-message allreduce latency, which grows with log2(ranks).
constexpr double NEGOTIATION_WORD_B = 8;
constexpr int TENSORS_PER_WORD = 64;
// A device-to-device copy reads and writes every byte: it moves at half the memory bandwidth.
constexpr double COPY_TRAFFIC_PER_BYTE = 2;

class AllreduceExchange final : public Exchange {
 public:
  AllreduceExchange(ReplayServices& replay, const Strategy& strategy)
      : Exchange(replay),
        library_(collective_library_by_name(resolve_collective_library(replay.platform(), replay.point()).name,
                                            "--collective-library")),
        forced_(strategy.collective == "auto" ? "" : strategy.collective),
        ranks_(static_cast<std::size_t>(replay.workers())) {
    if (!forced_.empty()) (void)collective_by_name("allreduce", forced_, "--strategy");
    std::iota(ranks_.begin(), ranks_.end(), 0);
    int tensors = 0;
    for (const auto& l : replay.profile().layers) tensors += l.grad_bytes > 0 ? 1 : 0;
    negotiation_B_ = NEGOTIATION_WORD_B * ((tensors + TENSORS_PER_WORD - 1) / TENSORS_PER_WORD);
    if (replay.point()
            .runtime.framework.fusion_copies) {  // only then is the device's memory bandwidth needed
      // A host fusion buffer (library_.framework_stages_to_host) is filled by one host core's memcpy.
      const double mem_Bps = library_.framework_stages_to_host
                                 ? library_call(replay.platform(), replay.workers(), 1, 0).host_core_Bps
                                 : replay.platform().worker_device().mem_bandwidth_Bps;
      copy_s_per_B_ = mem_Bps > 0 ? COPY_TRAFFIC_PER_BYTE / mem_Bps : 0;
    }
    fuse_ready_ = replay.point().runtime.cycle_s > 0;
    // A cycle runs a negotiation and a fused collective per tick, hundreds per iteration, most of them
    // latency-bound (the 8-byte words, the small tensors): those skip the max-min solver, as PS messages do
    // (World::set_latency_bound_bypass, docs/simulation-training.md).
    if (fuse_ready_) replay.world().set_latency_bound_bypass(true);
    // One collective at a time over the workers, and no other flow on their links (input reads take the
    // storage links): a collective alone may be solved in closed form (World::set_solve_together).
    replay.world().set_solve_together(true);
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
    if (!replay_.point().runtime.overlap) try_start(it);
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
    if (!point.runtime.overlap && st.bwd_done < replay_.workers()) return;
    if (point.runtime.cycle_s > 0) {
      // Horovod's background thread only looks for ready tensors once per cycle.
      auto& w = replay_.world();
      const double tick = std::ceil(w.now() / point.runtime.cycle_s - EPS_S) * point.runtime.cycle_s;
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
    const auto& buckets = replay_.plan().buckets;
    const std::size_t k = st.next_bucket;
    // Tensor fusion at a cycle tick: the next buckets ready on every rank, while the fused size stays
    // within the threshold (a tensor larger than it goes alone).
    std::size_t end = k + 1;
    double bytes = buckets[k].bytes;
    std::size_t tensors = buckets[k].layers.size();
    if (fuse_ready_)
      while (end < buckets.size() && st.ready[end] == replay_.workers() &&
             bytes + buckets[end].bytes <= replay_.point().runtime.fusion_bytes) {
        bytes += buckets[end].bytes;
        tensors += buckets[end].layers.size();
        ++end;
      }
    st.in_flight = true;
    replay_.count_activity();
    const double t0 = w.now();
    const auto& layout = replay_.layout();
    LibraryCall call = library_call(replay_.platform(), replay_.workers(), layout.nodes, bytes);
    call.rank_threads = std::max(1, replay_.profile().threads);
    const LibraryChoice choice = library_.choose(call, forced_);
    if (replay_.workers() > 1) {
      const auto& algorithm = collective_by_name("allreduce", choice.algorithm, "collective library " + library_.name);
      const auto split = algorithm.bytes_moved({replay_.workers(), layout.nodes, layout.workers_per_node}, bytes);
      replay_.count_collective_bytes(split.inter_node_B, split.intra_node_B);
    }
    auto done = [this, it, k, end, t0] {
      auto& s = iter(it);
      const double now = replay_.world().now();
      s.in_flight = false;
      s.next_bucket = end;
      replay_.record_comm(-1, it, t0, now);
      if (replay_.tracing(it)) {
        Bucket fused;
        for (std::size_t j = k; j < end; ++j) {
          const auto& b = replay_.plan().buckets[j];
          fused.bytes += b.bytes;
          fused.layers.insert(fused.layers.end(), b.layers.begin(), b.layers.end());
        }
        replay_.trace().add(TraceRecorder::Group::EXCHANGES, 0,
                            fmt::format("allreduce bucket {}: {}", k, bucket_layer_range(replay_.profile(), fused)),
                            "allreduce", t0, now,
                            {{"bucket", static_cast<double>(k)},
                             {"bytes", fused.bytes},
                             {"layers", static_cast<double>(fused.layers.size())},
                             {"iteration", static_cast<double>(it)}});
      }
      if (s.next_bucket == replay_.plan().buckets.size()) {
        for (int r = 0; r < replay_.workers(); ++r) maybe_finish(r, it);
      } else {
        try_start(it);
      }
    };
    // The framework's runtime around the collective: negotiation, then the copy into the fusion
    // buffer, the collective, and the copy back out (only fused buckets of several tensors are copied).
    const auto& fw = replay_.point().runtime.framework;
    const double copy_s = fw.fusion_copies && tensors > 1 ? bytes * copy_s_per_B_ : 0;
    auto collective = [this, call, copy_s, done = std::move(done)]() mutable {
      auto& world = replay_.world();
      auto copy_out = [&world, copy_s, done = std::move(done)]() mutable {
        if (copy_s > 0) {
          world.after(copy_s, std::move(done));
        } else {
          done();
        }
      };
      auto run = [this, call, copy_out = std::move(copy_out)]() mutable {
        // The collective's kernels hold every worker's device until it ends; a host collective runs none.
        const bool kernels = !library_.framework_stages_to_host;
        if (kernels) replay_.comm_begin(-1);
        start_library_allreduce(replay_.world(), library_, call, ranks_, forced_,
                                replay_.point().fidelity.comm_mode,
                                [this, kernels, copy_out = std::move(copy_out)]() mutable {
                                  if (kernels) replay_.comm_end(-1);
                                  copy_out();
                                });
      };
      if (copy_s > 0) {
        world.after(copy_s, std::move(run));
      } else {
        run();
      }
    };
    if (fw.negotiation && replay_.workers() > 1) {
      if (negotiation_s_ >= 0) {  // the same latency-bound exchange again: its measured duration
        w.after(negotiation_s_, std::move(collective));
      } else {
        start_collective(w, *collective_or_null("allreduce", "rhd"), ranks_, negotiation_B_, CommMode::FINE,
                         [this, t0, collective = std::move(collective)]() mutable {
                           negotiation_s_ = replay_.world().now() - t0;
                           collective();
                         });
      }
    } else {
      collective();
    }
  }

  void maybe_finish(int rank, int it) {
    auto& rs = done_[static_cast<std::size_t>(rank)];
    if (rs.it != it || !rs.bwd_done || rs.finishing || iter(it).next_bucket < replay_.plan().buckets.size()) return;
    rs.finishing = true;
    replay_.update_and_end(rank, it);
  }

  const CollectiveLibrary& library_;
  std::string forced_;  // the strategy's algorithm; empty: the library picks (allreduce-auto)
  bool fuse_ready_ = false;   // a framework cycle: fuse the ready plan buckets at each tick
  double negotiation_B_ = 0;  // bytes of one negotiation allreduce
  // Duration of the first negotiation, simulated message by message on the network; later ones reuse it
  // (a latency-bound exchange of a few words: its time hardly depends on the traffic around it, and
  // hundreds per iteration at 1,024 ranks would cost ~20,000 messages each). -1: none run yet.
  double negotiation_s_ = -1;
  double copy_s_per_B_ = 0;   // seconds per byte of one fusion-buffer copy
  std::vector<int> ranks_;
  std::vector<Iter> iters_;
  std::vector<RankIter> done_;  // per rank: the iteration whose backward is over
};

}  // namespace

std::optional<StepPrograms> plan_allreduce_family(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                                  const TrainingPoint& point) {
  if (point.layout.active()) return plan_layout(profile, point);
  if (point.runtime.cycle_s > 0 || point.runtime.framework.negotiation ||
      point.runtime.framework.fusion_copies)
    return std::nullopt;
  return plan_data_parallel(plan, profile, point.workers, {.overlap = point.runtime.overlap});
}

std::unique_ptr<Exchange> make_allreduce_exchange(ReplayServices& replay, const Strategy& strategy) {
  return std::make_unique<AllreduceExchange>(replay, strategy);
}

}  // namespace dtsim::sim
