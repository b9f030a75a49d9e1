// PyTorch nn.DataParallel on one node: device 0 broadcasts the parameters and scatters the input,
// every replica runs forward, device 0 gathers the outputs, computes the loss and sends the output
// gradients back; after backward every replica's gradients are summed on device 0, which updates.
#include <numeric>

#include "sim/src/coll/collective.hpp"
#include "sim/src/exchange/exchange.hpp"

namespace dtsim::sim {
namespace {

class DataParallelExchange final : public Exchange {
 public:
  explicit DataParallelExchange(ReplayServices& replay)
      : Exchange(replay), ranks_(static_cast<std::size_t>(replay.workers())) {
    std::iota(ranks_.begin(), ranks_.end(), 0);
    iters_.assign(static_cast<std::size_t>(replay.iterations()), Iter{});
  }

  // Parameters for every replica, plus the scattered input slice for replicas other than device 0.
  int forward_gates(int rank, int /*it*/) const override { return rank > 0 ? 2 : 1; }

  void iteration_start(int rank, int it) override {
    if (rank == replay_.workers() - 1) scatter_replicate(it);  // once every replica has started
  }

  void forward_done(int rank, int it) override {
    auto& w = replay_.world();
    auto after_gather = [this, it] {
      if (++iter(it).gathered < replay_.workers()) return;
      // Loss on device 0, then the output gradients go back to every replica.
      auto& world = replay_.world();
      for (int q = 0; q < replay_.workers(); ++q)
        replay_.transfer(world.worker_host(0), 0, world.worker_host(q), 0, q == 0 ? 0.0 : output_bytes(),
                         [this, q, it] { backward_whole(q, it); });
    };
    if (rank == 0) {
      after_gather();
    } else {
      replay_.transfer(w.worker_host(rank), 0, w.worker_host(0), 0, output_bytes(), after_gather);
    }
  }

  void bucket_ready(int, int, std::size_t) override {}

  // Every replica's gradients are summed on device 0 (reduce_add), which then updates.
  void backward_done(int rank, int it) override {
    auto& w = replay_.world();
    const double t0 = w.now();
    auto arrived = [this, it, t0, rank] {
      replay_.record_comm(rank, it, t0, replay_.world().now());
      if (++iter(it).reduced < replay_.workers()) return;
      replay_.compute(0, it, replay_.plan().update_s * replay_.factor(0, it), "optimizer update", [this, it] {
        for (int q = 0; q < replay_.workers(); ++q) replay_.end_iteration(q, it);
      });
    };
    if (rank == 0) {
      arrived();
    } else {
      replay_.transfer(w.worker_host(rank), 0, w.worker_host(0), 0, replay_.plan().grad_bytes, arrived);
    }
  }

 private:
  struct Iter {
    int gathered = 0, reduced = 0;
  };
  Iter& iter(int it) { return iters_[static_cast<std::size_t>(it)]; }
  double output_bytes() const { return replay_.profile().batch * replay_.point().output_bytes_per_sample; }

  void scatter_replicate(int it) {
    auto& w = replay_.world();
    const double t0 = w.now();
    const int n = replay_.workers();
    auto after_bcast = [this, it, t0, n] {
      replay_.record_comm(0, it, t0, replay_.world().now());
      for (int q = 0; q < n; ++q) replay_.release_gate(q, it);
    };
    if (n == 1) {
      after_bcast();
      return;
    }
    replay_.count_activity();
    const auto& bcast = *collective_or_null("broadcast", "binomial");
    start_collective(w, bcast, ranks_, replay_.plan().grad_bytes, replay_.point().comm_mode, after_bcast);
    replay_.count_collective_bytes(0, replay_.plan().grad_bytes * (n - 1));
    for (int q = 1; q < n; ++q)
      replay_.transfer(w.worker_host(0), 0, w.worker_host(q), 0,
                       replay_.profile().batch * replay_.point().input_bytes_per_sample,
                       [this, q, it] { replay_.release_gate(q, it); });
  }

  void backward_whole(int rank, int it) {
    const auto& plan = replay_.plan();
    double bwd = plan.bwd_tail_s;
    for (double s : plan.bwd_segment_s) bwd += s;
    replay_.compute(rank, it, bwd * replay_.factor(rank, it), "backward", [this, rank, it] { backward_done(rank, it); });
  }

  std::vector<int> ranks_;
  std::vector<Iter> iters_;
};

}  // namespace

std::unique_ptr<Exchange> make_dp_single_node_exchange(ReplayServices& replay, const Strategy& /*strategy*/) {
  return std::make_unique<DataParallelExchange>(replay);
}

}  // namespace dtsim::sim
