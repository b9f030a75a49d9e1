// Data-parallel training replayed on a World: every activity (a worker's merged compute segment, one
// transfer, one collective) is created just in time from the completion of its predecessors, so the
// cost grows with workers x buckets, not with a pre-built DAG (docs/simulation-training.md).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "sim/src/trace.hpp"
#include "sim/src/training_checks.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {

using Callback = std::function<void()>;
constexpr double EPS_S = 1e-12;

struct Interval {
  double start_s, end_s;
};

// Length of the union of intervals clipped to [lo, hi].
double union_length(std::vector<Interval> v, double lo, double hi) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start_s < b.start_s; });
  double total = 0, cur_a = 0, cur_b = -1;
  for (auto iv : v) {
    iv.start_s = std::max(iv.start_s, lo);
    iv.end_s = std::min(iv.end_s, hi);
    if (iv.end_s <= iv.start_s) continue;
    if (iv.start_s > cur_b) {
      if (cur_b > cur_a) total += cur_b - cur_a;
      cur_a = iv.start_s;
      cur_b = iv.end_s;
    } else {
      cur_b = std::max(cur_b, iv.end_s);
    }
  }
  if (cur_b > cur_a) total += cur_b - cur_a;
  return total;
}

// A first-come first-served resource (metadata server, SSD) modelled by its service time.
struct FifoResource {
  double free_at_s = 0;
};

CommPattern pattern_of(Strategy s) {
  switch (s) {
    case Strategy::ALLREDUCE_TREE: return CommPattern::ALLREDUCE_TREE;
    case Strategy::ALLREDUCE_RHD: return CommPattern::ALLREDUCE_RHD;
    case Strategy::ALLREDUCE_HIER: return CommPattern::ALLREDUCE_HIER;
    default: return CommPattern::ALLREDUCE_RING;
  }
}

bool is_ps(Strategy s) { return s == Strategy::PS || s == Strategy::PS_REPLICATED || s == Strategy::PS_ASYNC; }

class Replay {
 public:
  Replay(World& world, const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
         const TrainingPoint& point, const Layout& layout)
      : world_(world), platform_(platform), profile_(profile), point_(point), layout_(layout) {
    workers_ = point.workers;
    iters_ = point.iterations;
    servers_ = is_ps(point.strategy) ? point.ps_servers : 0;
    // TF pushes each variable's gradient as soon as it is produced: one "bucket" per parameter layer.
    plan_ = plan_iteration(profile, is_ps(point.strategy) ? 0.0 : point.fusion_bytes);
    if (is_ps(point.strategy)) {
      placement_ = place_variables(profile, servers_, point.ps_balance);
      shard_bytes_ = server_bytes(profile, placement_, servers_);
      bucket_bytes_ = bucket_server_bytes(profile, plan_, placement_, servers_);
      const double total = std::accumulate(shard_bytes_.begin(), shard_bytes_.end(), 0.0);
      max_shard_fraction_ = total > 0 ? *std::max_element(shard_bytes_.begin(), shard_bytes_.end()) / total : 0;
    }
    draw_compute_factors();
    ranks_.resize(static_cast<std::size_t>(workers_));
    for (auto& r : ranks_) r.ends_s.assign(static_cast<std::size_t>(iters_), 0.0);
    iter_state_.resize(static_cast<std::size_t>(iters_));
    for (auto& it : iter_state_) it.ready.assign(plan_.buckets.size(), 0);
    all_ranks_.resize(static_cast<std::size_t>(workers_));
    std::iota(all_ranks_.begin(), all_ranks_.end(), 0);
    const int node_count = layout.nodes + layout.dedicated_ps_nodes;
    nic_in_B_.assign(static_cast<std::size_t>(node_count), 0.0);
    nic_out_B_.assign(static_cast<std::size_t>(node_count), 0.0);
    ssd_.assign(static_cast<std::size_t>(layout.nodes), FifoResource{});
    rank0_.resize(static_cast<std::size_t>(iters_));
    node_state_.resize(static_cast<std::size_t>(layout.nodes));
    trace_iter_ = iters_ - 1;
    if (!point.trace_path.empty()) setup_trace_tracks();
  }

  void start() {
    if (point_.data == DataMode::REAL)
      for (int r = 0; r < workers_; ++r) kick_reader(r);
    for (int r = 0; r < workers_; ++r) start_iteration(r, 0);
  }

  PointResult result() const;
  const TraceRecorder& trace() const { return trace_; }

 private:
  struct RankState {
    int iter = 0;
    bool bwd_done = false;
    bool finishing = false;
    int gate = 0;               // events still needed before forward (parameters, input)
    int pushes_outstanding = 0;
    std::vector<double> ends_s;  // end of each iteration
    double iter_start_s = 0;
    // input pipeline
    int batches_read = 0, batches_consumed = 0;
    bool reading = false;
    Callback waiting_input;
    double stall_start_s = 0;
  };
  struct IterState {
    std::vector<int> ready;  // workers (or nodes) whose bucket k is ready
    std::size_t next_bucket = 0;
    bool in_flight = false;
    bool waiting_tick = false;
    int bwd_done_count = 0;
    int units_done = 0;          // PS: ranks (or nodes) whose pushes are complete
    int ranks_finished = 0;
    bool params_broadcast = false;  // data-parallel-single-node
    int gathered = 0, reduced = 0;
  };
  struct NodeIter {
    std::vector<int> local_ready;  // ps-replicated: local contributions per bucket
    int pushes_outstanding = 0;
    int buckets_pushed = 0;
    int bwd_done = 0;
    bool done = false;
  };
  struct NodeState {
    std::vector<NodeIter> iters;
  };
  struct Rank0Iter {
    std::vector<Interval> compute, comm;
    double io_stall_s = 0;
  };

  // ---- helpers -------------------------------------------------------------------------------
  int node_of_rank(int r) const { return r / layout_.workers_per_node; }
  int leader_of_node(int n) const { return n * layout_.workers_per_node; }
  int local_count(int n) const { return std::min(layout_.workers_per_node, workers_ - n * layout_.workers_per_node); }
  int server_node(int s) const {
    return point_.ps_placement == PsPlacement::DEDICATED ? layout_.nodes + s : s % layout_.nodes;
  }
  simgrid::s4u::Host* server_host(int s) const {
    return point_.ps_placement == PsPlacement::DEDICATED ? world_.dedicated_ps_host(s)
                                                         : world_.node_host(s % layout_.nodes);
  }
  double factor(int r, int it) const { return factors_[static_cast<std::size_t>(it) * workers_ + r]; }
  bool tracing() const { return !point_.trace_path.empty(); }

  void draw_compute_factors() {
    factors_.assign(static_cast<std::size_t>(iters_) * workers_, 1.0);
    const auto& v = point_.variability;
    if (v.jitter_cv <= 0 && v.straggler_probability <= 0) return;
    std::mt19937_64 rng(v.seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    // Jitter is log-normal with the requested coefficient of variation (never negative).
    const double sigma = std::sqrt(std::log1p(v.jitter_cv * v.jitter_cv));
    for (auto& f : factors_) {
      double x = 1.0;
      if (v.jitter_cv > 0) x *= std::exp(sigma * normal(rng) - 0.5 * sigma * sigma);
      if (v.straggler_probability > 0 && uniform(rng) < v.straggler_probability) x *= v.straggler_slowdown;
      f = x;
    }
  }

  void setup_trace_tracks() {
    for (int r = 0; r < workers_; ++r) {
      trace_.name_track(TraceRecorder::Group::WORKERS, r, fmt::format("worker {} (node {})", r, node_of_rank(r)));
      if (point_.data == DataMode::REAL)
        trace_.name_track(TraceRecorder::Group::INPUT, r, fmt::format("worker {} input", r));
    }
    for (int s = 0; s < servers_; ++s)
      trace_.name_track(TraceRecorder::Group::SERVERS, s, fmt::format("PS shard {} (node {})", s, server_node(s)));
    if (!is_ps(point_.strategy)) trace_.name_track(TraceRecorder::Group::EXCHANGES, 0, "collectives");
  }

  // A worker's compute of `seconds` (already jittered); records rank 0's timeline and the trace.
  void compute(int r, int it, double seconds, const char* what, Callback done) {
    ++activities_;
    const double t0 = world_.now();
    world_.compute(r, seconds, [this, r, it, t0, what, done = std::move(done)] {
      const double t1 = world_.now();
      if (r == 0) rank0_[static_cast<std::size_t>(it)].compute.push_back({t0, t1});
      if (tracing() && it == trace_iter_) trace_.add(TraceRecorder::Group::WORKERS, r, what, "compute", t0, t1);
      done();
    });
  }

  // One flow; counts bytes by node boundary. src_node/dst_node: -1 for storage.
  void transfer(simgrid::s4u::Host* src, int src_node, simgrid::s4u::Host* dst, int dst_node, double bytes,
                Callback done) {
    if (bytes <= 0) {
      world_.after(0, std::move(done));  // never re-enter the caller synchronously
      return;
    }
    ++activities_;
    if (src_node < 0) {
      nic_in_B_[static_cast<std::size_t>(dst_node)] += bytes;  // input data: not exchange traffic
    } else if (src_node != dst_node) {
      inter_node_B_ += bytes;
      if (src_node >= 0) nic_out_B_[static_cast<std::size_t>(src_node)] += bytes;
      if (dst_node >= 0) nic_in_B_[static_cast<std::size_t>(dst_node)] += bytes;
    } else {
      intra_node_B_ += bytes;
    }
    world_.transfer(src, dst, bytes, std::move(done));
  }

  void record_comm(int r, int it, double t0, double t1) {
    if (r == 0 || r < 0) rank0_[static_cast<std::size_t>(it)].comm.push_back({t0, t1});
  }

  // ---- iteration start ---------------------------------------------------------------------
  void start_iteration(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.iter = it;
    rs.bwd_done = false;
    rs.finishing = false;
    rs.iter_start_s = world_.now();
    const bool needs_params = is_ps(point_.strategy) || point_.strategy == Strategy::DATA_PARALLEL_SINGLE_NODE;
    const bool needs_input = point_.data == DataMode::REAL;
    const bool needs_slice = point_.strategy == Strategy::DATA_PARALLEL_SINGLE_NODE && r > 0;
    rs.gate = (needs_params ? 1 : 0) + (needs_input ? 1 : 0) + (needs_slice ? 1 : 0) + 1;  // +1 released below
    if (needs_input) {
      need_input(r, [this, r, it] { open_gate(r, it); });
    }
    if (needs_params) fetch_parameters(r, it);
    open_gate(r, it);
  }

  void open_gate(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (--rs.gate > 0) return;
    forward(r, it);
  }

  void fetch_parameters(int r, int it) {
    switch (point_.strategy) {
      case Strategy::PS:
      case Strategy::PS_ASYNC: pull_all(r, it, world_.worker_host(r), node_of_rank(r), [this, r, it] { open_gate(r, it); }); break;
      case Strategy::PS_REPLICATED: {
        const int n = node_of_rank(r);
        if (r != leader_of_node(n)) return;  // the leader pulls for the node, then copies to each local GPU
        pull_all(r, it, world_.worker_host(r), n, [this, n, r, it] {
          for (int q = leader_of_node(n) + 1; q < leader_of_node(n) + local_count(n); ++q)
            transfer(world_.worker_host(r), n, world_.worker_host(q), n, plan_.grad_bytes,
                     [this, q, it] { open_gate(q, it); });
          open_gate(r, it);
        });
        break;
      }
      case Strategy::DATA_PARALLEL_SINGLE_NODE:
        if (r == workers_ - 1) dp_scatter_replicate(it);  // once every replica has started
        break;
      default: break;
    }
  }

  // Pulls every shard from its server into `dst` (one flow per server holding parameters).
  void pull_all(int r, int it, simgrid::s4u::Host* dst, int dst_node, Callback done) {
    auto pending = std::make_shared<int>(0);
    auto finish = std::make_shared<Callback>(std::move(done));
    const double t0 = world_.now();
    for (int s = 0; s < servers_; ++s)
      if (shard_bytes_[static_cast<std::size_t>(s)] > 0) ++*pending;
    if (*pending == 0) {
      world_.after(0, [finish] { (*finish)(); });
      return;
    }
    for (int s = 0; s < servers_; ++s) {
      const double bytes = shard_bytes_[static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      transfer(server_host(s), server_node(s), dst, dst_node, bytes, [this, pending, finish, r, it, s, t0] {
        if (tracing() && it == trace_iter_)
          trace_.add(TraceRecorder::Group::SERVERS, s, fmt::format("pull by worker {}", r), "pull", t0, world_.now());
        if (--*pending == 0) {
          record_comm(r, it, t0, world_.now());
          (*finish)();
        }
      });
    }
  }

  // ---- compute phases ------------------------------------------------------------------------
  void forward(int r, int it) {
    const double f = factor(r, it);
    compute(r, it, plan_.fwd_s * f, "forward", [this, r, it] {
      if (point_.strategy == Strategy::DATA_PARALLEL_SINGLE_NODE) {
        dp_gather(r, it);
        return;
      }
      backward_segment(r, it, 0);
    });
  }

  void backward_segment(int r, int it, std::size_t k) {
    const double f = factor(r, it);
    if (k == plan_.buckets.size()) {
      compute(r, it, plan_.bwd_tail_s * f, "backward (tail)", [this, r, it] { backward_done(r, it); });
      return;
    }
    compute(r, it, plan_.bwd_segment_s[k] * f, "backward", [this, r, it, k] {
      bucket_ready(r, it, k);
      backward_segment(r, it, k + 1);
    });
  }

  void backward_done(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.bwd_done = true;
    auto& st = iter_state_[static_cast<std::size_t>(it)];
    ++st.bwd_done_count;
    switch (point_.strategy) {
      case Strategy::PS:
      case Strategy::PS_ASYNC: maybe_unit_done_rank(r, it); break;
      case Strategy::PS_REPLICATED: {
        auto& ni = node_iter(node_of_rank(r), it);
        ++ni.bwd_done;
        maybe_unit_done_node(node_of_rank(r), it);
        break;
      }
      case Strategy::DATA_PARALLEL_SINGLE_NODE: dp_reduce(r, it); break;
      default:
        if (!point_.overlap) try_start_exchange(it);
        maybe_finish_allreduce_rank(r, it);
    }
  }

  // ---- allreduce strategies ------------------------------------------------------------------
  void bucket_ready(int r, int it, std::size_t k) {
    switch (point_.strategy) {
      case Strategy::PS:
      case Strategy::PS_ASYNC: push_bucket(r, it, k, world_.worker_host(r), node_of_rank(r), &ranks_[static_cast<std::size_t>(r)].pushes_outstanding, [this, r, it] { maybe_unit_done_rank(r, it); }); break;
      case Strategy::PS_REPLICATED: replicated_bucket_ready(r, it, k); break;
      case Strategy::DATA_PARALLEL_SINGLE_NODE: break;
      default: {
        auto& st = iter_state_[static_cast<std::size_t>(it)];
        ++st.ready[k];
        try_start_exchange(it);
      }
    }
  }

  void try_start_exchange(int it) {
    auto& st = iter_state_[static_cast<std::size_t>(it)];
    if (st.in_flight || st.waiting_tick || st.next_bucket >= plan_.buckets.size()) return;
    const std::size_t k = st.next_bucket;
    if (st.ready[k] < workers_) return;
    if (!point_.overlap && st.bwd_done_count < workers_) return;
    if (point_.cycle_s > 0) {
      // Horovod's background thread only looks for ready tensors once per cycle.
      const double tick = std::ceil(world_.now() / point_.cycle_s - EPS_S) * point_.cycle_s;
      if (tick > world_.now() + EPS_S) {
        st.waiting_tick = true;
        world_.after(tick - world_.now(), [this, it] {
          iter_state_[static_cast<std::size_t>(it)].waiting_tick = false;
          start_exchange(it);
        });
        return;
      }
    }
    start_exchange(it);
  }

  void start_exchange(int it) {
    auto& st = iter_state_[static_cast<std::size_t>(it)];
    const std::size_t k = st.next_bucket;
    st.in_flight = true;
    ++activities_;
    const double t0 = world_.now();
    const double bytes = plan_.buckets[k].bytes;
    count_allreduce_bytes(bytes);
    auto done = [this, it, k, t0] {
      auto& s = iter_state_[static_cast<std::size_t>(it)];
      s.in_flight = false;
      ++s.next_bucket;
      record_comm(-1, it, t0, world_.now());
      if (tracing() && it == trace_iter_)
        trace_.add(TraceRecorder::Group::EXCHANGES, 0,
                   fmt::format("bucket {} ({:.1f} MB)", k, plan_.buckets[k].bytes / 1e6), "allreduce", t0,
                   world_.now());
      if (s.next_bucket == plan_.buckets.size()) {
        for (int r = 0; r < workers_; ++r) maybe_finish_allreduce_rank(r, it);
      } else {
        try_start_exchange(it);
      }
    };
    if (workers_ == 1) {
      world_.after(0, std::move(done));
      return;
    }
    start_allreduce(world_, pattern_of(point_.strategy), all_ranks_, bytes, point_.comm_mode, std::move(done));
  }

  // Ring-equivalent byte count of one allreduce (the collective's own flows are not visible here).
  void count_allreduce_bytes(double bytes) {
    if (workers_ < 2) return;
    const double per_rank = 2.0 * (workers_ - 1) / workers_ * bytes;
    if (layout_.nodes > 1) {
      const double inter = point_.strategy == Strategy::ALLREDUCE_HIER
                               ? 2.0 * (layout_.nodes - 1) / layout_.nodes * bytes * layout_.nodes
                               : per_rank / layout_.workers_per_node * layout_.nodes;
      inter_node_B_ += inter;
      intra_node_B_ += std::max(0.0, per_rank * workers_ - inter);
      for (int n = 0; n < layout_.nodes; ++n) {
        nic_in_B_[static_cast<std::size_t>(n)] += inter / layout_.nodes;
        nic_out_B_[static_cast<std::size_t>(n)] += inter / layout_.nodes;
      }
    } else {
      intra_node_B_ += per_rank * workers_;
    }
  }

  void maybe_finish_allreduce_rank(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    const auto& st = iter_state_[static_cast<std::size_t>(it)];
    if (!rs.bwd_done || rs.finishing || st.next_bucket < plan_.buckets.size()) return;
    rs.finishing = true;
    compute(r, it, plan_.update_s * factor(r, it), "optimizer update", [this, r, it] { end_iteration(r, it); });
  }

  // ---- parameter servers ---------------------------------------------------------------------
  void push_bucket(int r, int it, std::size_t k, simgrid::s4u::Host* src, int src_node, int* outstanding,
                   Callback on_all_done) {
    const double t0 = world_.now();
    for (int s = 0; s < servers_; ++s) {
      const double bytes = bucket_bytes_[k][static_cast<std::size_t>(s)];
      if (bytes <= 0) continue;
      ++*outstanding;
      transfer(src, src_node, server_host(s), server_node(s), bytes, [this, r, it, s, t0, outstanding, on_all_done] {
        record_comm(r, it, t0, world_.now());
        if (tracing() && it == trace_iter_)
          trace_.add(TraceRecorder::Group::SERVERS, s, fmt::format("push from worker {}", r), "push", t0, world_.now());
        if (--*outstanding == 0) on_all_done();
      });
    }
  }

  void maybe_unit_done_rank(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (!rs.bwd_done || rs.pushes_outstanding > 0 || rs.finishing) return;
    rs.finishing = true;
    if (point_.strategy == Strategy::PS_ASYNC) {
      end_iteration(r, it);  // asynchronous: servers apply this worker's gradients; no one waits
      return;
    }
    unit_done(it, workers_);
  }

  NodeIter& node_iter(int n, int it) {
    auto& ns = node_state_[static_cast<std::size_t>(n)];
    if (ns.iters.empty()) {
      ns.iters.resize(static_cast<std::size_t>(iters_));
      for (auto& x : ns.iters) x.local_ready.assign(plan_.buckets.size(), 0);
    }
    return ns.iters[static_cast<std::size_t>(it)];
  }

  // ps-replicated: each local gradient goes to the node's leader GPU; when all local copies are
  // summed, the leader pushes the bucket to the servers.
  void replicated_bucket_ready(int r, int it, std::size_t k) {
    const int n = node_of_rank(r);
    const int leader = leader_of_node(n);
    auto arrived = [this, n, it, k, leader] {
      auto& ni = node_iter(n, it);
      if (++ni.local_ready[k] < local_count(n)) return;
      push_bucket(leader, it, k, world_.worker_host(leader), n, &ni.pushes_outstanding, [this, n, it] {
        maybe_unit_done_node(n, it);
      });
      ++ni.buckets_pushed;
      maybe_unit_done_node(n, it);
    };
    if (r == leader) {
      arrived();
    } else {
      transfer(world_.worker_host(r), n, world_.worker_host(leader), n, plan_.buckets[k].bytes, arrived);
    }
  }

  void maybe_unit_done_node(int n, int it) {
    auto& ni = node_iter(n, it);
    if (ni.done || ni.bwd_done < local_count(n) || ni.pushes_outstanding > 0 ||
        ni.buckets_pushed < static_cast<int>(plan_.buckets.size()))
      return;
    ni.done = true;
    unit_done(it, layout_.nodes);
  }

  // Synchronous PS: when every unit has pushed, the servers apply the update (in parallel, the
  // busiest shard last), then every worker starts the next iteration.
  void unit_done(int it, int units) {
    auto& st = iter_state_[static_cast<std::size_t>(it)];
    if (++st.units_done < units) return;
    const double update_s = plan_.update_s * max_shard_fraction_;
    ++activities_;
    world_.after(update_s, [this, it] {
      for (int r = 0; r < workers_; ++r) end_iteration(r, it);
    });
  }

  // ---- nn.DataParallel -----------------------------------------------------------------------
  // Device 0 scatters the input and broadcasts the parameters; every replica then runs forward.
  void dp_scatter_replicate(int it) {
    {
      const double t0 = world_.now();
      auto after_bcast = [this, it, t0] {
        record_comm(0, it, t0, world_.now());
        for (int q = 0; q < workers_; ++q) open_gate(q, it);
      };
      if (workers_ == 1) {
        after_bcast();
        return;
      }
      ++activities_;
      start_broadcast(world_, 0, all_ranks_, plan_.grad_bytes, point_.comm_mode, after_bcast);
      intra_node_B_ += plan_.grad_bytes * (workers_ - 1);
      for (int q = 1; q < workers_; ++q) {
        transfer(world_.worker_host(0), 0, world_.worker_host(q), 0, profile_.batch * point_.input_bytes_per_sample,
                 [this, q, it] { open_gate(q, it); });
      }
    }
  }

  void dp_gather(int r, int it) {
    auto after_gather = [this, it] {
      auto& st = iter_state_[static_cast<std::size_t>(it)];
      if (++st.gathered < workers_) return;
      // Loss on device 0, then the output gradients go back to every replica.
      for (int q = 0; q < workers_; ++q)
        transfer(world_.worker_host(0), 0, world_.worker_host(q), 0,
                 q == 0 ? 0.0 : profile_.batch * point_.output_bytes_per_sample,
                 [this, q, it] { dp_backward(q, it); });
    };
    if (r == 0) {
      after_gather();
    } else {
      transfer(world_.worker_host(r), 0, world_.worker_host(0), 0, profile_.batch * point_.output_bytes_per_sample,
               after_gather);
    }
  }

  void dp_backward(int r, int it) {
    double bwd = plan_.bwd_tail_s;
    for (double s : plan_.bwd_segment_s) bwd += s;
    compute(r, it, bwd * factor(r, it), "backward", [this, r, it] { backward_done(r, it); });
  }

  // Every replica's gradients are summed on device 0 (reduce_add), which then updates.
  void dp_reduce(int r, int it) {
    const double t0 = world_.now();
    auto arrived = [this, it, t0, r] {
      record_comm(r, it, t0, world_.now());
      auto& st = iter_state_[static_cast<std::size_t>(it)];
      if (++st.reduced < workers_) return;
      compute(0, it, plan_.update_s * factor(0, it), "optimizer update", [this, it] {
        for (int q = 0; q < workers_; ++q) end_iteration(q, it);
      });
    };
    if (r == 0) {
      arrived();
    } else {
      transfer(world_.worker_host(r), 0, world_.worker_host(0), 0, plan_.grad_bytes, arrived);
    }
  }

  // ---- input pipeline ------------------------------------------------------------------------
  void need_input(int r, Callback cb) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (rs.batches_read > rs.batches_consumed) {
      ++rs.batches_consumed;
      cb();
      kick_reader(r);
      return;
    }
    rs.waiting_input = std::move(cb);
    rs.stall_start_s = world_.now();
  }

  void kick_reader(int r) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (rs.reading || rs.batches_read - rs.batches_consumed >= point_.prefetch_depth) return;
    if (rs.batches_read >= iters_) return;  // nothing more will be consumed
    rs.reading = true;
    const int batch_index = rs.batches_read;
    read_batch(r, [this, r, batch_index, t0 = world_.now()] {
      auto& s = ranks_[static_cast<std::size_t>(r)];
      s.reading = false;
      ++s.batches_read;
      if (tracing() && batch_index == trace_iter_)
        trace_.add(TraceRecorder::Group::INPUT, r, fmt::format("read batch {}", batch_index), "io", t0, world_.now());
      if (s.waiting_input) {
        const double stall = world_.now() - s.stall_start_s;
        if (r == 0) rank0_[static_cast<std::size_t>(s.iter)].io_stall_s += stall;
        if (tracing() && s.iter == trace_iter_)
          trace_.add(TraceRecorder::Group::WORKERS, r, "waiting for input", "io", s.stall_start_s, world_.now());
        ++s.batches_consumed;
        auto cb = std::move(s.waiting_input);
        s.waiting_input = nullptr;
        cb();
      }
      kick_reader(r);
    });
  }

  // Reads one batch: metadata (shared FIFO), data (parallel FS flow or the node's SSD), then host
  // preprocessing.
  void read_batch(int r, Callback done) {
    const double bytes = profile_.batch * point_.sample_bytes;
    const int n = node_of_rank(r);
    const auto& storage = platform_.storage;
    auto preprocess = [this, done = std::move(done)] {
      const double s = profile_.batch * point_.preprocess_s_per_sample;
      if (s > 0) {
        ++activities_;
        world_.after(s, done);
      } else {
        done();
      }
    };
    auto fetch = [this, n, bytes, preprocess] {
      if (auto* host = world_.storage_host_for(n)) {
        transfer(host, -1, world_.node_host(n), n, bytes, preprocess);  // SSD or the PFS's shared link
      } else {
        fifo(ssd_[static_cast<std::size_t>(n)], bytes / platform_.storage.read_bandwidth_Bps, preprocess);
      }
    };
    if (storage.kind != platforms::StorageKind::PARALLEL_FS) {
      fetch();
      return;
    }
    // Parallel FS: file opens are served by one metadata service shared by every node.
    const double meta_s =
        storage.metadata_ops_per_s > 0 ? profile_.batch * point_.metadata_ops_per_sample / storage.metadata_ops_per_s : 0;
    ++activities_;
    fifo(metadata_, meta_s, fetch);
  }

  void fifo(FifoResource& res, double service_s, Callback done) {
    const double start = std::max(world_.now(), res.free_at_s);
    res.free_at_s = start + service_s;
    world_.after(res.free_at_s - world_.now(), std::move(done));
  }

  // ---- iteration end -------------------------------------------------------------------------
  void end_iteration(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.ends_s[static_cast<std::size_t>(it)] = world_.now();
    rs.pushes_outstanding = 0;
    if (it + 1 < iters_) start_iteration(r, it + 1);
  }

  World& world_;
  const platforms::Platform& platform_;
  const calibrate::ComputeProfile& profile_;
  const TrainingPoint& point_;
  Layout layout_;
  int workers_ = 1, iters_ = 1, servers_ = 0, trace_iter_ = 0;
  IterationPlan plan_;
  std::vector<int> placement_;
  std::vector<double> shard_bytes_;
  std::vector<std::vector<double>> bucket_bytes_;
  double max_shard_fraction_ = 0;
  std::vector<double> factors_;
  std::vector<RankState> ranks_;
  std::vector<IterState> iter_state_;
  std::vector<NodeState> node_state_;
  std::vector<int> all_ranks_;
  std::vector<Rank0Iter> rank0_;
  std::vector<double> nic_in_B_, nic_out_B_;
  std::vector<FifoResource> ssd_;
  FifoResource metadata_;
  double inter_node_B_ = 0, intra_node_B_ = 0;
  std::int64_t activities_ = 0;
  TraceRecorder trace_;

};

PointResult Replay::result() const {
  PointResult res;
  res.workers = workers_;
  res.nodes = layout_.nodes;
  res.ps_servers = servers_;
  res.buckets = static_cast<int>(plan_.buckets.size());
  res.activities = activities_;
  const double batch = profile_.batch;
  // Per-iteration time: steady state after the warm-up iteration.
  auto rank_rate = [&](const RankState& rs) {
    if (iters_ == 1) return rs.ends_s[0] > 0 ? batch / rs.ends_s[0] : 0.0;
    const double span = rs.ends_s.back() - rs.ends_s.front();
    return span > 0 ? batch * (iters_ - 1) / span : 0.0;
  };
  for (const auto& rs : ranks_)
    if (rs.ends_s.back() <= 0)
      throw Failure("training replay ended before every worker finished its iterations (internal error)");
  double throughput = 0;
  for (const auto& rs : ranks_) throughput += rank_rate(rs);
  res.throughput = throughput;
  const auto& r0 = ranks_[0];
  res.iteration_time_s = iters_ == 1 ? r0.ends_s[0] : (r0.ends_s.back() - r0.ends_s.front()) / (iters_ - 1);
  // Breakdown of rank 0's last iteration.
  const int it = iters_ - 1;
  const double lo = it == 0 ? 0.0 : r0.ends_s[static_cast<std::size_t>(it - 1)];
  const double hi = r0.ends_s[static_cast<std::size_t>(it)];
  const auto& ri = rank0_[static_cast<std::size_t>(it)];
  res.breakdown.compute_s = union_length(ri.compute, lo, hi);
  res.breakdown.communication_s = union_length(ri.comm, lo, hi);
  res.breakdown.io_stall_s = ri.io_stall_s;
  res.breakdown.exposed_communication_s =
      std::max(0.0, (hi - lo) - res.breakdown.compute_s - res.breakdown.io_stall_s);
  res.inter_node_bytes = inter_node_B_ / iters_;
  res.intra_node_bytes = intra_node_B_ / iters_;

  // Bottleneck in plain words.
  const double iter = std::max(hi - lo, EPS_S);
  const double compute_share = res.breakdown.compute_s / iter;
  const double io_share = res.breakdown.io_stall_s / iter;
  const double exposed_share = res.breakdown.exposed_communication_s / iter;
  const double nic_Bps =
      platform_.network.link_bandwidth_Bps * platform_.network.protocol_efficiency * std::max(1, platform_.node.nics);
  std::size_t busiest = 0;
  double busiest_B = -1;
  for (std::size_t n = 0; n < nic_in_B_.size(); ++n) {
    const double b = std::max(nic_in_B_[n], nic_out_B_[n]);
    if (b > busiest_B) {
      busiest_B = b;
      busiest = n;
    }
  }
  busiest_B /= iters_;
  const double nic_busy = nic_Bps > 0 ? busiest_B / nic_Bps / iter : 0;
  if (io_share >= exposed_share && io_share >= 0.1) {
    res.bottleneck = fmt::format("input I/O: worker 0 waits {:.0f}% of the iteration for data ({:.1f} MB per batch)",
                                 100 * io_share, batch * point_.sample_bytes / 1e6);
  } else if (exposed_share >= 0.1 && is_ps(point_.strategy)) {
    int shard = -1;
    for (int s = 0; s < servers_ && shard < 0; ++s)
      if (static_cast<std::size_t>(server_node(s)) == busiest) shard = s;
    const std::string who = shard >= 0 ? fmt::format("PS shard {}'s NIC (node {})", shard, busiest)
                                       : fmt::format("node {}'s NIC", busiest);
    res.bottleneck = fmt::format("{} is busy {:.0f}% of the iteration ({:.1f} MB per direction); "
                                 "{:.0f}% of the iteration is exposed communication",
                                 who, 100 * std::min(1.0, nic_busy), busiest_B / 1e6, 100 * exposed_share);
  } else if (exposed_share >= 0.1) {
    res.bottleneck = fmt::format("gradient exchange: {:.0f}% of the iteration is exposed communication "
                                 "({} buckets, {:.1f} MB of gradients per worker over {}; busiest NIC {:.0f}% busy)",
                                 100 * exposed_share, plan_.buckets.size(), plan_.grad_bytes / 1e6,
                                 platform_.network.technology.empty() ? "the network" : platform_.network.technology,
                                 100 * std::min(1.0, nic_busy));
  } else {
    res.bottleneck = fmt::format("compute: forward, backward and update fill {:.0f}% of the iteration on {}",
                                 100 * compute_share, profile_.device.empty() ? "the device" : profile_.device);
  }
  return res;
}

}  // namespace

PointResult simulate_training(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                              const TrainingPoint& point) {
  const Layout layout = check_training_point(platform, profile, point);
  const std::string text = run_in_child([&] {
    const auto wall0 = std::chrono::steady_clock::now();
    World world(platform, layout);
    Replay replay(world, platform, profile, point, layout);
    replay.start();
    world.run();
    PointResult res = replay.result();
    res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (!point.trace_path.empty()) replay.trace().write(point.trace_path);
    return to_json_text(res);
  });
  return point_result_from_json_text(text);
}

}  // namespace dtsim::sim
