// Data-parallel training replayed on a World: every activity (a worker's merged compute segment, one
// transfer, one collective) is created just in time from the completion of its predecessors, so the
// cost grows with workers x buckets, not with a pre-built DAG (docs/simulation-training.md).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <numeric>
#include <nlohmann/json.hpp>
#include <random>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "platforms/transport.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/coll/library.hpp"
#include "sim/src/library_resolution.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/executor.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/src/platform_builder.hpp"
#include "sim/src/trace.hpp"
#include "sim/src/training_checks.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {

using Callback = std::function<void()>;

constexpr double EPS_S = 1e-12;
// The negotiation before a collective (Task::negotiation_B): a few words, latency-bound, among all members;
// recursive halving-doubling takes log2(members) rounds (Horovod's response-cache bit vector allreduce,
// horovod/common/response_cache.cc, on its controller's MPI/Gloo allreduce of a few words).
constexpr const char* NEGOTIATION_ALGORITHM = "rhd";
// Trace counters: links below this mean utilisation over the traced iterations get no track, and at
// most this many links get one (the busiest), so a large platform's trace stays readable.
constexpr double TRACE_MIN_LINK_UTILISATION = 0.01;
constexpr std::size_t TRACE_MAX_LINK_TRACKS = 32;
constexpr double PERCENT = 100;

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

class Replay final {
 public:
  // `given`: programs to play instead of those of the point's strategy (simulate_programs).
  Replay(World& world, const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
         const TrainingPoint& point, const Layout& layout, const StepPrograms* given = nullptr)
      : world_(world), platform_(platform), profile_(profile), point_(point), layout_(layout) {
    workers_ = point.workers;
    iters_ = resolved_iterations(point);
    const auto& family = exchange_family(point.strategy);
    // Per-layer buckets: TF pushes each variable's gradient as soon as it is produced. Horovod fuses, each
    // cycle, the tensors then ready: the plan's buckets are the tensors of about one cycle of backward and
    // the exchange merges the ready ones at each tick up to the fusion threshold.
    const bool per_cycle = family.properties.fuses_ready_per_cycle && point.runtime.cycle_s > 0;
    const double ddp_first_B = point.runtime.framework.ddp_first_bucket_bytes;
    plan_ =
        family.properties.per_layer_buckets || ddp_first_B <= 0 || point.runtime.fusion_bytes <= 0
            ? plan_iteration(profile, family.properties.per_layer_buckets ? 0.0 : point.runtime.fusion_bytes,
                             per_cycle ? point.runtime.cycle_s : 0.0)
            : plan_iteration_ddp(profile, ddp_first_B, point.runtime.fusion_bytes);
    draw_compute_factors(family.properties.asynchronous);  // before the exchange: the PS family folds only
                                                            // workers of equal compute times
    programs_ = given ? *given : family.plan(plan_, profile, point, platform, layout);
    check_programs(programs_);
    prepare_programs();
    interferes_ = point.fidelity.interference && platform.has_gpus();
    in_flight_.assign(static_cast<std::size_t>(workers_), 0);
    loads_.assign(static_cast<std::size_t>(workers_), -1);
    ranks_.resize(static_cast<std::size_t>(workers_));
    for (auto& r : ranks_) r.ends_s.assign(static_cast<std::size_t>(iters_), 0.0);
    const int node_count = layout.nodes + layout.dedicated_ps_nodes;
    nic_in_B_.assign(static_cast<std::size_t>(node_count), 0.0);
    nic_out_B_.assign(static_cast<std::size_t>(node_count), 0.0);
    ssd_.assign(static_cast<std::size_t>(layout.nodes), FifoResource{});
    rank0_.resize(static_cast<std::size_t>(iters_));
    trace_first_ = iters_ - std::clamp(point.fidelity.trace_iterations, 1, iters_);
    if (!point.fidelity.trace_path.empty()) {
      setup_trace_tracks();
      world_.record_link_usage(true);
    }
  }

  void start() {
    if (point_.input.data == DataMode::REAL)
      for (int r = 0; r < workers_; ++r) kick_reader(r);
    for (int r = 0; r < workers_; ++r) start_iteration(r, 0);
  }

  PointResult result() const;
  // Adds the link-utilisation counters of the traced iterations; call once after the run.
  void finish_trace();
  const TraceRecorder& trace_recorder() const { return trace_; }

  // ---- the replay's state and accounting -------------------------------------------------------
  double factor(int r, int it) const { return factors_[static_cast<std::size_t>(it) * workers_ + r]; }
  // The ranks run at one pace from now on: each iteration's factor becomes their harmonic mean, the
  // factor of their mean compute rate (a folded group of asynchronous workers, NodeFold::shared_pace).
  void share_pace(const std::vector<int>& ranks) {
    if (ranks.empty()) return;
    for (int it = 0; it < iters_; ++it) {
      double inverse_sum = 0;
      for (int r : ranks) inverse_sum += 1.0 / factor(r, it);
      const double pace = static_cast<double>(ranks.size()) / inverse_sum;
      for (int r : ranks) factors_[static_cast<std::size_t>(it) * workers_ + r] = pace;
    }
  }
  bool tracing(int it) const { return !point_.fidelity.trace_path.empty() && it >= trace_first_; }

  // One flow; counts bytes by node boundary (World::crosses_network, as the transports decide: a split
  // node's server end is reached through the network even from its own node). src_node/dst_node: -1
  // for storage.
  void transfer(simgrid::s4u::Host* src, int src_node, simgrid::s4u::Host* dst, int dst_node, double bytes,
                Callback done, double nodes = 0) {
    if (bytes <= 0) {
      world_.after(0, std::move(done));  // never re-enter the caller synchronously
      return;
    }
    ++activities_;
    if (src_node < 0) {
      nic_in_B_[static_cast<std::size_t>(dst_node)] += bytes;  // input data: not exchange traffic
    } else if (world_.crosses_network(src, dst)) {
      inter_node_B_ += bytes;
      nic_out_B_[static_cast<std::size_t>(src_node)] += bytes;
      if (dst_node >= 0) nic_in_B_[static_cast<std::size_t>(dst_node)] += bytes;
    } else {
      intra_node_B_ += bytes;
    }
    world_.transfer(src, dst, bytes, std::move(done), nodes);
  }

  void comm_begin(int r) {
    if (!interferes_ || in_flight_[static_cast<std::size_t>(r)]++ > 0) return;
    ++activities_;
    // A load of 1 - 1/s of the device leaves an overlapped computation 1/s of it: s times slower.
    loads_[static_cast<std::size_t>(r)] = world_.start_load(r, 1.0 - 1.0 / OVERLAP_COMPUTE_SLOWDOWN);
  }

  void comm_end(int r) {
    if (!interferes_ || --in_flight_[static_cast<std::size_t>(r)] > 0) return;
    world_.stop_load(loads_[static_cast<std::size_t>(r)]);
  }

  void record_comm(int r, int it, double t0, double t1) {
    if (r == 0) rank0_[static_cast<std::size_t>(it)].comm.push_back({t0, t1});
  }

  void release_gate(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    if (--rs.gate > 0) return;
    start_program(r, it);
  }

  void end_iteration(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.ends_s[static_cast<std::size_t>(it)] = world_.now();
    if (tracing(it))
      trace_.add(TraceRecorder::Group::WORKERS, r, fmt::format("iteration {}", it), "iteration", rs.start_s,
                 world_.now());
    // Link bytes at rank 0's iteration ends bound the steady-state window of the utilisation.
    if (r == 0 && it == 0 && iters_ > 1) link_bytes_lo_ = world_.link_bytes();
    if (r == 0 && it == iters_ - 1) link_bytes_hi_ = world_.link_bytes();
    if (it + 1 < iters_) start_iteration(r, it + 1);
  }

 private:
  struct RankState {
    int iter = 0;
    double start_s = 0;          // start of the current iteration
    int gate = 0;                // events still needed before forward (parameters, input)
    std::vector<double> ends_s;  // end of each iteration
    // input pipeline
    int batches_read = 0, batches_consumed = 0;
    bool reading = false;
    Callback waiting_input;
    double stall_start_s = 0;
  };
  // A rank's measured window: its iterations after the warm-up one (the only one when one is
  // simulated). Throughput, the iteration time, the breakdown and the resources all measure over it.
  struct Window {
    double from_s = 0, to_s = 0;
    int iterations = 1;
    double span_s() const { return to_s - from_s; }
  };
  Window measured_window(const RankState& rs) const {
    if (iters_ == 1) return {0.0, rs.ends_s[0], 1};
    return {rs.ends_s.front(), rs.ends_s.back(), iters_ - 1};
  }
  struct Rank0Iter {
    std::vector<Interval> compute, comm, io;
    double io_stall_s = 0;
    double forward_start_s = 0, backward_end_s = 0;
    double requested_compute_s = 0;  // the compute durations asked for (device factor in, interference not)
    double local_collectives_s = 0;  // inline collectives on the compute stream
  };

  void compute_phase(int r, int it, double seconds, std::string what, TaskPhase phase, TraceRecorder::Args args,
                     Callback done) {
    ++activities_;
    const double t0 = world_.now();
    if (r == 0) rank0_[static_cast<std::size_t>(it)].requested_compute_s += seconds;
    world_.compute(r, seconds, [this, r, it, t0, phase, what = std::move(what), args = std::move(args), done = std::move(done)] {
      const double t1 = world_.now();
      if (r == 0) {
        auto& r0 = rank0_[static_cast<std::size_t>(it)];
        r0.compute.push_back({t0, t1});
        if (phase == TaskPhase::BACKWARD) r0.backward_end_s = t1;
      }
      if (tracing(it)) trace_.add(TraceRecorder::Group::WORKERS, r, what, "compute", t0, t1, args);
      done();
    });
  }

  int node_of_rank(int r) const { return r / layout_.workers_per_node; }

  // The device a worker computes on: its GPU, or on CPU nodes the socket its process is pinned to.
  int device_of_rank(int r) const {
    if (platform_.has_gpus()) return r;
    const int sockets = std::max(1, platform_.node.cpu_sockets);
    const int local = r % layout_.workers_per_node;
    return node_of_rank(r) * sockets + local * sockets / layout_.workers_per_node;
  }

  void draw_compute_factors(bool asynchronous) {
    factors_.assign(static_cast<std::size_t>(iters_) * workers_, 1.0);
    const auto& v = point_.variability;
    const double device_cv = resolve_device_spread(platform_, point_).cv;
    if (device_cv > 0) {
      std::vector<double> device = persistent_device_factors(device_of_rank(workers_ - 1) + 1, device_cv, v.seed);
      // A synchronous step waits for its slowest device, so every worker runs at that device's pace.
      // Simulating each device's own pace moved throughput by 0.6% (Inception-v3, aws-p2-xlarge, 64
      // workers x 16 servers) but desynchronised the workers' flows and cost 20x the simulation time.
      if (!asynchronous) std::fill(device.begin(), device.end(), *std::max_element(device.begin(), device.end()));
      for (int it = 0; it < iters_; ++it)
        for (int r = 0; r < workers_; ++r)
          factors_[static_cast<std::size_t>(it) * workers_ + r] = device[static_cast<std::size_t>(device_of_rank(r))];
    }
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
      f *= x;
    }
  }

  void setup_trace_tracks() {
    for (int r = 0; r < workers_; ++r) {
      trace_.name_track(TraceRecorder::Group::WORKERS, r, fmt::format("worker {} (node {})", r, node_of_rank(r)));
      if (point_.input.data == DataMode::REAL)
        trace_.name_track(TraceRecorder::Group::INPUT, r, fmt::format("worker {} input", r));
    }
    for (std::size_t g = 0; g < programs_.groups.size(); ++g)
      trace_.name_track(TraceRecorder::Group::EXCHANGES, static_cast<int>(g),
                        g == 0 && programs_.groups[g].name == "world" ? std::string("collectives")
                                                                      : "collectives of " + programs_.groups[g].name);
    for (int s = 0; s < programs_.servers; ++s)
      trace_.name_track(TraceRecorder::Group::SERVERS, s, fmt::format("PS shard {}", s));
  }

  // ---- iteration ------------------------------------------------------------------------------
  void start_iteration(int r, int it) {
    auto& rs = ranks_[static_cast<std::size_t>(r)];
    rs.iter = it;
    rs.start_s = world_.now();
    // A program with an input wait takes its batch there; other ranks wait for it before they start.
    const bool needs_input =
        point_.input.data == DataMode::REAL &&
        !waits_input_[static_cast<std::size_t>(programs_.program_of[static_cast<std::size_t>(r)])];
    rs.gate = (needs_input ? 1 : 0) + 1;  // +1 released below
    if (needs_input) need_input(r, [this, r, it] { release_gate(r, it); });
    release_gate(r, it);
  }

  // ---- step programs ---------------------------------------------------------------------------
  // The executor plays each rank's program (sim/src/plan/program.hpp): a task starts once its deps are
  // done; computes run one at a time per rank and collectives one at a time per rank, each in program
  // order among the ready ones; a collective starts when every member of its group has reached it (the
  // n-th call of each member on that group), a send/recv pair when both ends have.
  struct ProgramRun {
    int it = -1;
    int left = 0;                           // tasks not done yet
    std::vector<int> waiting;               // deps not done, per task
    bool compute_busy = false, comm_busy = false;
    std::set<int> compute_ready, comm_ready;  // ready tasks waiting for their stream, in program order
    std::unordered_map<int, std::int64_t> calls;  // collectives issued per group, over all iterations
  };
  struct Rendezvous {
    std::vector<std::pair<int, int>> members;  // (rank, task) arrived
    int iteration = 0;
  };
  struct PeerMatch {
    std::vector<std::pair<int, int>> sends, recvs;  // (rank, task) posted, in order
    std::size_t matched = 0;
  };

  void prepare_programs() {
    const auto& pr = programs_;
    dependents_.assign(pr.programs.size(), {});
    for (std::size_t p = 0; p < pr.programs.size(); ++p) {
      const auto& tasks = pr.programs[p].tasks;
      auto& dep = dependents_[p];
      dep.assign(tasks.size(), {});
      for (std::size_t i = 0; i < tasks.size(); ++i)
        for (int d : tasks[i].deps) dep[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
    }
    waits_input_.assign(pr.programs.size(), false);
    for (std::size_t p = 0; p < pr.programs.size(); ++p)
      for (const Task& t : pr.programs[p].tasks)
        if (t.kind == TaskKind::INPUT) waits_input_[p] = true;
    runs_.assign(static_cast<std::size_t>(workers_), ProgramRun{});
    library_ = &collective_library_by_name(resolve_collective_library(platform_, point_).name, "--collective-library");
    forced_ = point_.strategy.collective == "auto" ? "" : point_.strategy.collective;
    if (!forced_.empty()) (void)collective_by_name("allreduce", forced_, "--strategy");
    // One group and no point-to-point tasks: its collectives run one at a time, nothing else on their
    // links, so one alone may be solved in closed form (World::set_solve_together).
    bool p2p = false;
    for (const auto& prog : pr.programs)
      for (const auto& t : prog.tasks)
        p2p = p2p || t.kind == TaskKind::SEND || t.kind == TaskKind::RECV || t.kind == TaskKind::FLOW;
    if (pr.groups.size() == 1 && !p2p) world_.set_solve_together(true);
    if (pr.latency_bound_bypass) world_.set_latency_bound_bypass(true);
    for (const auto& prog : pr.programs) max_tasks_ = std::max(max_tasks_, prog.tasks.size());
    prepare_fold();
  }

  // StepPrograms::fold: asks the world to fold the groups' nodes; where it does, the members' ranks mirror
  // their representatives'.
  void prepare_fold() {
    const NodeFold& fold = programs_.fold;
    rep_node_.resize(static_cast<std::size_t>(layout_.nodes));
    std::iota(rep_node_.begin(), rep_node_.end(), 0);
    fold_of_.assign(static_cast<std::size_t>(layout_.nodes), 1);
    mirror_of_.assign(static_cast<std::size_t>(workers_), -1);
    mirrors_.assign(static_cast<std::size_t>(workers_), 0);
    if (fold.groups.empty()) return;
    std::vector<bool> seen(static_cast<std::size_t>(layout_.nodes), false);
    for (const auto& g : fold.groups)
      for (int n : g) {
        if (n < 0 || n >= layout_.nodes || seen[static_cast<std::size_t>(n)])
          throw Failure(fmt::format("node fold: node {} out of range or in two groups (planner bug)", n));
        seen[static_cast<std::size_t>(n)] = true;
        for (int j = 0; j < layout_.workers_per_node; ++j) {
          const int r = n * layout_.workers_per_node + j, rep = g[0] * layout_.workers_per_node + j;
          if (r >= workers_ || programs_.program_of[static_cast<std::size_t>(r)] != programs_.program_of[static_cast<std::size_t>(rep)])
            throw Failure(fmt::format("node fold: rank {} is missing or has another program than rank {} (planner bug)", r, rep));
        }
      }
    const int per_node = layout_.workers_per_node;
    for (int it = 0; it < iters_; ++it)
      if (fold.shared_pace) {
        for (int r = 1; r < workers_; ++r)
          if (factor(r, it) != factor(r, 0)) return;
      } else {
        for (const auto& g : fold.groups)
          for (int n : g)
            for (int j = 0; j < per_node; ++j)
              if (factor(n * per_node + j, it) != factor(g[0] * per_node + j, it)) return;
      }
    std::vector<std::vector<int>> groups = fold_groups();
    if (groups.empty()) return;  // the routes do not allow it: every rank plays its own program
    if (fold.weighted) world_.set_weighted_folds(true);
    if (fold.shared_pace)  // the representative's device j stands for device j of every member node
      for (const auto& g : groups)
        for (int j = 0; j < per_node; ++j) {
          std::vector<int> ranks;
          for (int m : g) ranks.push_back(m * per_node + j);
          share_pace(ranks);
        }
    for (const auto& g : groups) {
      fold_of_[static_cast<std::size_t>(g[0])] = static_cast<int>(g.size());
      for (int m : g) rep_node_[static_cast<std::size_t>(m)] = g[0];
    }
    for (int r = 0; r < workers_; ++r) {
      const int n = node_of_rank(r), rn = rep_node_[static_cast<std::size_t>(n)];
      if (rn == n) continue;
      const int rep = rn * layout_.workers_per_node + r % layout_.workers_per_node;
      mirror_of_[static_cast<std::size_t>(r)] = rep;
      ++mirrors_[static_cast<std::size_t>(rep)];
    }
  }

  // The groups the world folds (StepPrograms::fold), or none.
  std::vector<std::vector<int>> fold_groups() {
    const NodeFold& fold = programs_.fold;
    const auto hosts = [this](const std::vector<Role>& roles) {
      std::vector<simgrid::s4u::Host*> out;
      for (const Role& role : roles) out.push_back(server_host(role.index));
      return out;
    };
    const std::vector<std::vector<int>>& units = fold.groups;
    std::vector<int> unit_class;  // per unit: its nodes' route class, or -1 (folds alone)
    const std::size_t unit_nodes = units.front().size();
    const auto grouping = [&](int per_group) {  // up to per_group units of one class
      if (per_group == 1) return units;
      if (unit_class.empty()) {
        const std::vector<int> cls = world_.route_classes(hosts(fold.scale_refs), fold.bytes_to, fold.bytes_from);
        for (std::size_t u = 0; u < units.size(); ++u) {
          const int c = cls[static_cast<std::size_t>(units[u][0])];
          const bool uniform = std::all_of(units[u].begin(), units[u].end(),
                                           [&](int n) { return cls[static_cast<std::size_t>(n)] == c; });
          unit_class.push_back(uniform && !(u < fold.alone.size() && fold.alone[u]) ? c : -1);
        }
      }
      std::vector<std::vector<int>> out;
      std::unordered_map<int, std::size_t> open;  // class -> its group being filled in `out`
      for (std::size_t u = 0; u < units.size(); ++u) {
        const int c = unit_class[u];
        const auto at = open.find(c);
        if (c >= 0 && at != open.end() && out[at->second].size() < static_cast<std::size_t>(per_group) * unit_nodes) {
          out[at->second].insert(out[at->second].end(), units[u].begin(), units[u].end());
          continue;
        }
        out.push_back(units[u]);
        open[c] = out.size() - 1;
      }
      return out;
    };
    // Doubled while over the budget and it still merges units: once doubling leaves the count as it is,
    // every class fits in one group and larger sizes give the same groups.
    int per_group = 1;
    if (fold.max_flows > 0)
      for (std::size_t count = units.size(); static_cast<double>(count) * fold.flows_per_group > fold.max_flows &&
                                             per_group * 2 <= static_cast<int>(units.size());) {
        const std::size_t next = grouping(per_group * 2).size();
        if (next >= count || next < static_cast<std::size_t>(fold.min_groups)) break;
        per_group *= 2;
        count = next;
      }
    std::vector<std::vector<int>> groups;
    int k = 1;
    for (int p = per_group; p > 1 && k <= 1; p /= 2) {
      groups = grouping(p);
      k = world_.fold_nodes_scaled(groups, hosts(fold.scale_refs), fold.bytes_to, fold.bytes_from);
    }
    if (k <= 1) {
      groups = units;
      k = world_.fold_nodes(groups, hosts(fold.refs));
    }
    return k > 1 ? groups : std::vector<std::vector<int>>{};
  }

  // Tasks a mirroring rank takes from its representative (StepPrograms::fold).
  static bool mirrored(TaskKind kind) {
    return kind == TaskKind::FLOW || kind == TaskKind::SERVE || kind == TaskKind::DELAY || kind == TaskKind::SEND ||
           kind == TaskKind::RECV;
  }
  // Nodes a rank's flows and serves stand for: its node's fold if it represents one, else 1.
  int weight_of(int r) const { return fold_of_[static_cast<std::size_t>(node_of_rank(r))]; }
  std::int64_t mirror_key(int rep, int it, int i) const {
    return (static_cast<std::int64_t>(rep) * iters_ + it) * static_cast<std::int64_t>(max_tasks_) + i;
  }
  // A mirroring rank's task: done when its representative's is (at once if it already is).
  void mirror_wait(int r, int i) {
    const int rep = mirror_of_[static_cast<std::size_t>(r)];
    const std::int64_t key = mirror_key(rep, runs_[static_cast<std::size_t>(r)].it, i);
    auto& e = mirror_events_[key];
    if (!e.done) {
      e.waiters.push_back(r);
      return;
    }
    if (++e.consumed == mirrors_[static_cast<std::size_t>(rep)]) mirror_events_.erase(key);
    world_.after(0, [this, r, i] { task_done(r, i); });
  }
  // A representative's mirrored task is done: so are its mirrors' waiting on it.
  void mirror_fire(int rep, int i) {
    const std::int64_t key = mirror_key(rep, runs_[static_cast<std::size_t>(rep)].it, i);
    auto& e = mirror_events_[key];
    e.done = true;
    const std::vector<int> waiters = std::move(e.waiters);
    e.waiters.clear();
    e.consumed += static_cast<int>(waiters.size());
    if (e.consumed == mirrors_[static_cast<std::size_t>(rep)]) mirror_events_.erase(key);
    for (int q : waiters) task_done(q, i);
  }

  const Task& task_of(int r, int i) const { return programs_.of(r).tasks[static_cast<std::size_t>(i)]; }

  void start_program(int r, int it) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    const auto& tasks = programs_.of(r).tasks;
    run.it = it;
    run.left = static_cast<int>(tasks.size());
    run.waiting.resize(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) run.waiting[i] = static_cast<int>(tasks[i].deps.size());
    if (tasks.empty()) {
      end_iteration(r, it);
      return;
    }
    for (std::size_t i = 0; i < tasks.size(); ++i)
      if (tasks[i].deps.empty()) task_ready(r, static_cast<int>(i));
  }

  void task_ready(int r, int i) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    const Task& t = task_of(r, i);
    if (mirrored(t.kind) && mirror_of_[static_cast<std::size_t>(r)] >= 0) {
      mirror_wait(r, i);
      return;
    }
    switch (t.kind) {
      case TaskKind::COMPUTE:
        run.compute_ready.insert(i);
        pump_compute(r);
        break;
      case TaskKind::COLLECTIVE:
        run.comm_ready.insert(i);
        pump_comm(r);
        break;
      case TaskKind::SEND:
      case TaskKind::RECV:
        post_p2p(r, i);
        break;
      case TaskKind::DELAY: {
        ++activities_;
        const double t0 = world_.now();
        world_.after(t.seconds, [this, r, i, t0, it = run.it] {
          if (task_of(r, i).phase == TaskPhase::COMMUNICATION) record_comm(r, it, t0, world_.now());
          task_done(r, i);
        });
        break;
      }
      case TaskKind::INPUT:
        if (point_.input.data == DataMode::REAL) {
          need_input(r, [this, r, i] { task_done(r, i); });
        } else {
          task_done(r, i);
        }
        break;
      case TaskKind::FLOW:
        start_flow(r, i);
        break;
      case TaskKind::SERVE:
        serve(r, i);
        break;
      case TaskKind::BARRIER:
        arrive_barrier(r, i);
        break;
    }
  }

  // A BARRIER task: the n-th barrier of each member of its group; all are done `seconds` after the last arrives.
  void arrive_barrier(int r, int i) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    const int g = programs_.group_of(r, task_of(r, i));
    const int key = -1 - g;  // barriers count apart from the group's collectives
    const std::int64_t call = run.calls[key]++;
    auto& rv = rendezvous_[{key, call}];
    rv.members.emplace_back(r, i);
    rv.iteration = run.it;
    if (rv.members.size() < programs_.groups[static_cast<std::size_t>(g)].ranks.size()) return;
    std::vector<std::pair<int, int>> members = std::move(rv.members);
    rendezvous_.erase({key, call});
    std::sort(members.begin(), members.end());
    const auto [r0, i0] = members.front();
    ++activities_;
    world_.after(task_of(r0, i0).seconds, [this, members = std::move(members)] {
      for (const auto& [q, qi] : members) task_done(q, qi);
    });
  }

  // A SERVE task: its seconds on the role's processor, after the work queued there before; or its calls on
  // the role's serving queue (done at once when they wait for nothing). A representative's stands for the
  // work of every node it folds.
  void serve(int r, int i) {
    const Task& t = task_of(r, i);
    const bool server = t.dst.kind == RoleKind::SERVER;
    const int role = server ? -1 - t.dst.index : node_of_rank(r);
    const int it = runs_[static_cast<std::size_t>(r)].it;
    const double ready_s = world_.now(), weight = weight_of(r);
    auto finish = [this, r, i, it, ready_s, server](double start_s) {
      const Task& task = task_of(r, i);
      if (server && tracing(it))
        trace_.add(TraceRecorder::Group::SERVERS, task.dst.index, fmt::format("{} for worker {}", task.label, r), "serve",
                   start_s, world_.now());
      if (task.phase == TaskPhase::COMMUNICATION) record_comm(r, it, ready_s, world_.now());
      task_done(r, i);
    };
    if (t.queue >= 0) {
      const ServeQueue& spec = programs_.serve_queues[static_cast<std::size_t>(t.queue)];
      auto at = serving_queues_.find({role, t.queue});
      if (at == serving_queues_.end())
        at = serving_queues_.emplace(std::make_pair(role, t.queue), platforms::RpcServerQueue(spec.threads, spec.per_call_s)).first;
      const double wait_s = at->second.admit(ready_s, t.calls * weight) - ready_s;
      if (wait_s <= 0) {
        finish(ready_s);
        return;
      }
      ++activities_;
      world_.after(wait_s, [finish, ready_s] { finish(ready_s); });
      return;
    }
    auto& queue = role_queues_[role];
    const double start_s = std::max(ready_s, queue.free_at_s);
    ++activities_;
    fifo(queue, t.seconds * weight, [finish, start_s] { finish(start_s); });
  }

  // A role as the platform holds it: its host and its node (-1: storage, whose bytes are input, not
  // exchange traffic).
  struct RoleEnd {
    simgrid::s4u::Host* host;
    int node;
  };
  RoleEnd role_end(int r, const Task& t, const Role& role) const {
    const int n = node_of_rank(r);
    switch (role.kind) {
      case RoleKind::RANK: return {world_.worker_host(r), n};
      case RoleKind::SERVER: return {server_host(role.index), server_node(role.index)};
      case RoleKind::NODE_HOST: return {world_.node_host(n), n};
      case RoleKind::STORAGE:
        if (auto* host = world_.storage_host_for(n)) return {host, -1};
        throw InputError(fmt::format("platform {} has no storage to serve '{}'", platform_.name, t.label));
    }
    throw Failure("unknown role (internal error)");
  }

  bool dedicated_servers() const { return point_.ps.placement == PsPlacement::DEDICATED; }
  // Server s's node: a dedicated node after the worker nodes, or worker node s mod nodes.
  int server_node(int s) const { return dedicated_servers() ? layout_.nodes + s : s % layout_.nodes; }
  simgrid::s4u::Host* server_host(int s) const {
    return dedicated_servers() ? world_.dedicated_ps_host(s) : world_.node_host(s % layout_.nodes);
  }
  // The server on `node`, or -1 (results name it beside the node's NIC).
  int server_on_node(int node) const {
    for (int s = 0; s < programs_.servers; ++s)
      if (server_node(s) == node) return s;
    return -1;
  }

  // A FLOW task: one flow between its roles, counted by node boundary; done when its bytes have arrived.
  // A representative's carries its fold's k nodes' bytes; where the flow's server sits on a member node,
  // that member's own flow stays inside its node (counted, not sent), and a server on the representative's
  // own node is reached through the server's NIC (World::split_server_host), as the members' flows are.
  void start_flow(int r, int i) {
    const Task& t = task_of(r, i);
    RoleEnd src = role_end(r, t, t.src), dst = role_end(r, t, t.dst);
    const int it = runs_[static_cast<std::size_t>(r)].it;
    const double t0 = world_.now();
    const int k = weight_of(r);
    int flow_fold = k;
    if (k > 1 && !dedicated_servers())
      for (auto [role, end] : {std::make_pair(&t.src, &src), std::make_pair(&t.dst, &dst)}) {
        if (role->kind != RoleKind::SERVER) continue;
        const int sn = server_node(role->index), n = node_of_rank(r);
        if (rep_node_[static_cast<std::size_t>(sn)] != n) continue;
        if (sn != n) {
          flow_fold = k - 1;
        } else if (auto* split = world_.split_server_host(sn)) {
          end->host = split;
          flow_fold = k - 1;
        }
      }
    if (flow_fold < k) intra_node_B_ += t.bytes * (k - flow_fold);  // the member's own, local
    transfer(src.host, src.node, dst.host, dst.node, t.bytes * flow_fold, [this, r, i, it, t0] {
      const Task& task = task_of(r, i);
      if (task.phase == TaskPhase::COMMUNICATION) record_comm(r, it, t0, world_.now());
      // A flow to or from a server shows on the server's track.
      const Role& server = task.dst.kind == RoleKind::SERVER ? task.dst : task.src;
      if (server.kind == RoleKind::SERVER && tracing(it))
        trace_.add(TraceRecorder::Group::SERVERS, server.index, fmt::format("{} of worker {}", task.label, r), task.label, t0,
                   world_.now(), {{"bytes", task.bytes}});
      task_done(r, i);
    }, flow_fold < k ? flow_fold : 0.0);
  }

  void pump_compute(int r) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    if (run.compute_busy || run.compute_ready.empty()) return;
    const int i = *run.compute_ready.begin();
    run.compute_ready.erase(run.compute_ready.begin());
    run.compute_busy = true;
    const Task& t = task_of(r, i);
    const int it = run.it;
    if (r == 0 && t.phase == TaskPhase::FORWARD && rank0_[static_cast<std::size_t>(it)].forward_start_s <= 0)
      rank0_[static_cast<std::size_t>(it)].forward_start_s = world_.now();
    TraceRecorder::Args args;
    if (tracing(it))
      for (const auto& [k, v] : t.args) args.emplace_back(k, v);
    // A task with inline collectives computes at its group's slowest pace: the collectives after it meet
    // every member (Megatron's tensor-parallel ranks wait for each other at each allreduce).
    double f = factor(r, it);
    if (!programs_.stands_for.empty() && !programs_.stands_for[static_cast<std::size_t>(r)].empty())
      for (int q : programs_.stands_for[static_cast<std::size_t>(r)]) f = std::max(f, factor(q, it));
    else if (!t.inline_collectives.empty())
      for (int q : programs_.groups[static_cast<std::size_t>(programs_.group_of_slot(r, t.inline_collectives.front().group))].ranks)
        f = std::max(f, factor(q, it));
    compute_phase(r, it, t.seconds * f, t.label, t.phase, std::move(args), [this, r, i] {
      run_inline(r, i, 0, [this, r, i] {
        runs_[static_cast<std::size_t>(r)].compute_busy = false;
        task_done(r, i);
        pump_compute(r);
      });
    });
  }

  // Runs the task's inline collectives from the k-th on, on the compute stream: each kind (operation,
  // group geometry, bytes) is simulated on the network the first time a rank meets it and its duration
  // charged for every call from then on (ParallelLayout::fold_local_collectives).
  void run_inline(int r, int i, std::size_t k, Callback done) {
    const Task& t = task_of(r, i);
    if (k >= t.inline_collectives.size()) {
      done();
      return;
    }
    const InlineCollective& c = t.inline_collectives[k];
    const int g = programs_.group_of_slot(r, c.group);
    const auto& group = programs_.groups[static_cast<std::size_t>(g)];
    const int it = runs_[static_cast<std::size_t>(r)].it;
    auto next = [this, r, i, k, done = std::move(done)]() mutable { run_inline(r, i, k + 1, std::move(done)); };
    if (group.ranks.size() < 2 || c.count == 0 || c.bytes <= 0) {
      next();
      return;
    }
    const GroupShape shape = group_shape(group.ranks);
    // Key: the operation, the bytes and the group's shape (ranks, nodes, most ranks on a node).
    const std::string key = fmt::format("{}|{}|{}|{}|{}", c.operation, c.bytes, group.ranks.size(), shape.nodes.size(), shape.most);
    auto charge = [this, r, it, g, c, shape](double each_s, Callback then) {
      const double t0 = world_.now(), total = each_s * c.count;
      account_collective_bytes(c.operation, static_cast<int>(programs_.groups[static_cast<std::size_t>(g)].ranks.size()),
                               shape, c.bytes, c.count, /*per_member=*/true);
      ++activities_;
      world_.after(total, [this, r, it, t0, total, c, then = std::move(then)] {
        if (r == 0) {
          record_comm(0, it, t0, world_.now());
          rank0_[static_cast<std::size_t>(it)].local_collectives_s += total;
        }
        if (tracing(it))
          trace_.add(TraceRecorder::Group::WORKERS, r, fmt::format("{} x{}", c.operation, c.count), "local collective", t0,
                     world_.now(), {{"bytes", c.bytes}, {"calls", static_cast<double>(c.count)}});
        then();
      });
    };
    auto& price = inline_prices_[key];
    if (price.seconds >= 0) {
      charge(price.seconds, std::move(next));
      return;
    }
    price.waiting.push_back([charge, next = std::move(next)](double each_s) mutable { charge(each_s, std::move(next)); });
    if (price.waiting.size() > 1) return;  // being measured
    const LibraryCall call = library_call(platform_, static_cast<int>(group.ranks.size()), static_cast<int>(shape.nodes.size()), c.bytes);
    const double t0 = world_.now();
    ++activities_;
    start_library_collective(
        world_, *library_, c.operation, call, group.ranks, forced_, point_.fidelity.comm_mode,
        [this, key, t0] {
          auto& p = inline_prices_[key];
          p.seconds = world_.now() - t0;
          auto waiting = std::move(p.waiting);
          p.waiting.clear();
          for (auto& w : waiting) w(p.seconds);
        },
        "inline collective");
  }

  struct GroupShape {
    std::vector<int> nodes;
    int most = 0;
  };
  GroupShape group_shape(const std::vector<int>& ranks) const {
    GroupShape out;
    std::unordered_map<int, int> per_node;
    for (int q : ranks) {
      const int node = node_of_rank(q);
      if (per_node[node]++ == 0) out.nodes.push_back(node);
      out.most = std::max(out.most, per_node[node]);
    }
    return out;
  }

  // Counts one collective's bytes (times `calls`) by node boundary, from the library's algorithm for it.
  // `per_member`: called once by each member (inline collectives), so each call counts 1/n of the bytes.
  // `direct`: the task's own algorithm (Task::algorithm), played without the library.
  void account_collective_bytes(const std::string& operation, int n, const GroupShape& shape, double bytes, int calls,
                                bool per_member, const std::string& direct = "") {
    if (n < 2) return;
    const LibraryCall call = library_call(platform_, n, static_cast<int>(shape.nodes.size()), bytes);
    const std::string algorithm_name = !direct.empty()            ? direct
                                       : operation == "allreduce" ? library_->choose(call, forced_).algorithm
                                                                  : "";
    const CollectiveAlgorithm* algorithm = nullptr;
    for (const auto& a : collective_table())
      if (a.operation == operation && (algorithm_name.empty() || a.name == algorithm_name)) {
        algorithm = &a;
        break;
      }
    if (!algorithm) throw Failure(fmt::format("collective '{}' has no algorithm (internal error)", operation));
    const auto split = algorithm->bytes_moved({n, static_cast<int>(shape.nodes.size()), shape.most}, bytes);
    const double scale = calls / (per_member ? static_cast<double>(n) : 1.0);
    count_group_bytes(split.inter_node_B * scale, split.intra_node_B * scale, shape.nodes);
  }

  void pump_comm(int r) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    if (run.comm_busy || run.comm_ready.empty()) return;
    const int i = *run.comm_ready.begin();
    run.comm_ready.erase(run.comm_ready.begin());
    run.comm_busy = true;
    const int g = programs_.group_of(r, task_of(r, i));
    const std::int64_t call = run.calls[g]++;
    auto& rv = rendezvous_[{g, call}];
    rv.members.emplace_back(r, i);
    rv.iteration = run.it;
    if (rv.members.size() < programs_.groups[static_cast<std::size_t>(g)].ranks.size()) return;
    Rendezvous ready = std::move(rv);
    rendezvous_.erase({g, call});
    launch_collective(g, std::move(ready));
  }

  // Every member has reached the collective: it starts now, or at its cycle's next tick (Task::cycle_s).
  void launch_collective(int g, Rendezvous rv) {
    const auto [r0, i0] = rv.members.front();
    const double cycle_s = task_of(r0, i0).cycle_s;
    if (cycle_s > 0) {
      const double now = world_.now();
      const double tick = std::ceil(now / cycle_s - EPS_S) * cycle_s;
      if (tick > now + EPS_S) {
        world_.after(tick - now, [this, g, rv = std::move(rv)]() mutable { run_collective(g, std::move(rv)); });
        return;
      }
    }
    run_collective(g, std::move(rv));
  }

  // The next collective on group g after task i of rank r's program, or -1.
  int next_on_group(int r, int i, int g) const {
    const auto& tasks = programs_.of(r).tasks;
    for (std::size_t j = static_cast<std::size_t>(i) + 1; j < tasks.size(); ++j)
      if (tasks[j].kind == TaskKind::COLLECTIVE && programs_.group_of(r, tasks[j]) == g) return static_cast<int>(j);
    return -1;
  }

  void run_collective(int g, Rendezvous rv) {
    const auto& group = programs_.groups[static_cast<std::size_t>(g)];
    const auto [r0, i0] = rv.members.front();
    const Task& t = task_of(r0, i0);
    const int it = rv.iteration;
    const int n = static_cast<int>(group.ranks.size());
    // Fusion (Task::fuse_up_to_B): each following collective of the group every member has ready joins while
    // the bytes fit; absorbed[m]: member m's absorbed tasks.
    double bytes = t.bytes;
    int items = t.items;
    std::vector<std::vector<int>> absorbed(rv.members.size());
    if (t.fuse_up_to_B > 0) {
      std::vector<int> last(rv.members.size());
      for (std::size_t m = 0; m < rv.members.size(); ++m) last[m] = rv.members[m].second;
      for (;;) {
        std::vector<int> next(rv.members.size());
        bool all = true;
        for (std::size_t m = 0; m < rv.members.size() && all; ++m) {
          const int q = rv.members[m].first;
          const auto& run = runs_[static_cast<std::size_t>(q)];
          next[m] = next_on_group(q, last[m], g);
          all = next[m] >= 0 && run.it == it && run.comm_ready.count(next[m]) > 0;
        }
        if (!all) break;
        const Task& u = task_of(rv.members.front().first, next.front());
        if (u.fuse_up_to_B <= 0 || u.operation != t.operation || bytes + u.bytes > t.fuse_up_to_B) break;
        bytes += u.bytes;
        items += u.items;
        for (std::size_t m = 0; m < rv.members.size(); ++m) {
          auto& run = runs_[static_cast<std::size_t>(rv.members[m].first)];
          run.comm_ready.erase(next[m]);
          ++run.calls[g];
          absorbed[m].push_back(next[m]);
          last[m] = next[m];
        }
      }
    }
    ++activities_;
    const double t0 = world_.now();
    // The group's geometry as the library sees it: its nodes and most ranks on one node.
    const GroupShape shape = group_shape(group.ranks);
    LibraryCall call = library_call(platform_, n, static_cast<int>(shape.nodes.size()), bytes);
    call.rank_threads = std::max(1, t.library_threads);
    account_collective_bytes(t.operation, n, shape, bytes, 1, false, t.algorithm);
    // The collective's kernels hold every member's device; a direct one's copies do not, nor does one on
    // host buffers.
    const bool kernels = t.algorithm.empty() && !t.host_buffers;
    const std::size_t fused = absorbed.front().size();
    std::function<void()> finish = [this, g, it, t0, bytes, items, fused, rv = std::move(rv),
                                    absorbed = std::move(absorbed)] {
          const auto& grp = programs_.groups[static_cast<std::size_t>(g)];
          const double now = world_.now();
          const auto [first_r, first_i] = rv.members.front();
          const Task& task = task_of(first_r, first_i);
          if (std::find(grp.ranks.begin(), grp.ranks.end(), 0) != grp.ranks.end()) record_comm(0, it, t0, now);
          if (tracing(it)) {
            TraceRecorder::Args args;
            for (const auto& [k, v] : task.args) args.emplace_back(k, v);
            std::string label = task.label;
            if (fused > 0) {
              label += fmt::format(" and {} fused after it", fused);
              args.emplace_back("fused_bytes", bytes);
              args.emplace_back("fused_items", static_cast<double>(items));
            }
            args.emplace_back("iteration", static_cast<double>(it));
            trace_.add(TraceRecorder::Group::EXCHANGES, g, label, task.operation, t0, now, std::move(args));
          }
          // Members complete in group order, each then issuing its next ready work.
          std::vector<std::size_t> order(rv.members.size());
          std::iota(order.begin(), order.end(), 0);
          std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rv.members[a] < rv.members[b]; });
          for (const std::size_t m : order) {
            const auto [q, i] = rv.members[m];
            runs_[static_cast<std::size_t>(q)].comm_busy = false;
            task_done(q, i);
            for (const int j : absorbed[m]) task_done(q, j);
            pump_comm(q);
          }
        };
    if (!t.algorithm.empty()) {
      start_collective(world_, collective_by_name(t.operation, t.algorithm, "step program"), group.ranks,
                       bytes, point_.fidelity.comm_mode, std::move(finish));
      return;
    }
    // A priced collective (Task::priced) of a kind already measured waits its measured duration.
    std::string key;
    if (t.priced) {
      key = fmt::format("{}|{}|{}|{}|{}", t.operation, bytes, n, shape.nodes.size(), shape.most);
      if (const auto it_price = collective_prices_.find(key); it_price != collective_prices_.end()) {
        if (kernels)
          for (int q : group.ranks) comm_begin(q);
        world_.after(it_price->second, [this, g, kernels, finish = std::move(finish)] {
          if (kernels)
            for (int q : programs_.groups[static_cast<std::size_t>(g)].ranks) comm_end(q);
          finish();
        });
        return;
      }
    }
    // Copies into and out of a buffer around a collective of enough items (Task::copy_s_per_B, copy_min_items):
    // computations on the members' devices (copy_on_cores) or delays.
    const double copy_s = t.copy_s_per_B > 0 && items >= t.copy_min_items ? bytes * t.copy_s_per_B : 0;
    auto copy = [this, g, copy_s, on_cores = t.copy_on_cores](std::function<void()> next) {
      if (copy_s <= 0) {
        next();
      } else if (!on_cores) {
        world_.after(copy_s, std::move(next));
      } else {
        const auto& ranks = programs_.groups[static_cast<std::size_t>(g)].ranks;
        auto left = std::make_shared<std::size_t>(ranks.size());
        auto then = std::make_shared<std::function<void()>>(std::move(next));
        for (const int q : ranks)
          world_.compute(q, copy_s, [left, then] {
            if (--*left == 0) (*then)();
          });
      }
    };
    auto library = [this, g, call, key, t0, kernels, copy, operation = t.operation,
                    finish = std::move(finish)]() mutable {
      const auto& ranks = programs_.groups[static_cast<std::size_t>(g)].ranks;
      if (kernels)
        for (int q : ranks) comm_begin(q);
      start_library_collective(
          world_, *library_, operation, call, ranks, forced_, point_.fidelity.comm_mode,
          [this, g, key, t0, kernels, copy, finish = std::move(finish)]() mutable {
            if (kernels)
              for (int q : programs_.groups[static_cast<std::size_t>(g)].ranks) comm_end(q);
            if (!key.empty()) collective_prices_[key] = world_.now() - t0;
            copy(std::move(finish));
          },
          "step program");
    };
    auto copy_in = [copy, library = std::move(library)]() mutable { copy(std::move(library)); };
    // The negotiation before it (Task::negotiation_B): measured once per group and size, then its duration.
    if (t.negotiation_B > 0 && n > 1) {
      const std::string nkey = fmt::format("{}|{}", g, t.negotiation_B);
      if (const auto at = negotiation_prices_.find(nkey); at != negotiation_prices_.end()) {
        world_.after(at->second, std::move(copy_in));
      } else {
        start_collective(world_, *collective_or_null("allreduce", NEGOTIATION_ALGORITHM), group.ranks, t.negotiation_B,
                         CommMode::FINE, [this, nkey, t0, copy_in = std::move(copy_in)]() mutable {
                           negotiation_prices_[nkey] = world_.now() - t0;
                           copy_in();
                         });
      }
      return;
    }
    copy_in();
  }

  void post_p2p(int r, int i) {
    const Task& t = task_of(r, i);
    const int peer = programs_.peer_of(r, t);
    const bool send = t.kind == TaskKind::SEND;
    auto& m = p2p_[send ? std::make_tuple(r, peer, t.tag) : std::make_tuple(peer, r, t.tag)];
    (send ? m.sends : m.recvs).emplace_back(r, i);
    while (m.matched < m.sends.size() && m.matched < m.recvs.size()) {
      // Plain variables, not structured bindings: the lambda below captures them (clang 14 cannot).
      const int sr = m.sends[m.matched].first, si = m.sends[m.matched].second;
      const int rr = m.recvs[m.matched].first, ri = m.recvs[m.matched].second;
      ++m.matched;
      const double bytes = task_of(sr, si).bytes * weight_of(sr);  // a representative's: its fold's nodes'
      const int it = runs_[static_cast<std::size_t>(sr)].it;
      const double t0 = world_.now();
      transfer(world_.worker_host(sr), node_of_rank(sr), world_.worker_host(rr), node_of_rank(rr), bytes,
               [this, sr, si, rr, ri, it, t0] {
                 if ((sr == 0 || rr == 0) && task_of(sr, si).phase == TaskPhase::COMMUNICATION)
                   record_comm(0, it, t0, world_.now());
                 task_done(sr, si);
                 task_done(rr, ri);
               });
    }
  }

  void task_done(int r, int i) {
    auto& run = runs_[static_cast<std::size_t>(r)];
    const int program = programs_.program_of[static_cast<std::size_t>(r)];
    for (int d : dependents_[static_cast<std::size_t>(program)][static_cast<std::size_t>(i)])
      if (--run.waiting[static_cast<std::size_t>(d)] == 0) task_ready(r, d);
    // Then its mirrors: they go on after it, as their events follow its.
    if (mirrors_[static_cast<std::size_t>(r)] > 0 && mirrored(task_of(r, i).kind)) mirror_fire(r, i);
    if (--run.left == 0) end_iteration(r, run.it);
  }

  // Collective bytes counted over the nodes of its group: per-node NIC shares equal.
  void count_group_bytes(double inter_node_B, double intra_node_B, const std::vector<int>& nodes) {
    inter_node_B_ += inter_node_B;
    intra_node_B_ += intra_node_B;
    if (inter_node_B <= 0 || nodes.empty()) return;
    for (int n : nodes) {
      nic_in_B_[static_cast<std::size_t>(n)] += inter_node_B / static_cast<double>(nodes.size());
      nic_out_B_[static_cast<std::size_t>(n)] += inter_node_B / static_cast<double>(nodes.size());
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
    if (rs.reading || rs.batches_read - rs.batches_consumed >= point_.input.prefetch_depth) return;
    if (rs.batches_read >= iters_) return;  // nothing more will be consumed
    rs.reading = true;
    const int batch_index = rs.batches_read;
    read_batch(r, [this, r, batch_index, t0 = world_.now()] {
      auto& s = ranks_[static_cast<std::size_t>(r)];
      s.reading = false;
      ++s.batches_read;
      if (tracing(batch_index))
        trace_.add(TraceRecorder::Group::INPUT, r, fmt::format("read batch {}", batch_index), "io", t0,
                   world_.now(), {{"bytes", profile_.batch * point_.input.sample_bytes}});
      if (s.waiting_input) {
        const double stall = world_.now() - s.stall_start_s;
        if (r == 0) {
          rank0_[static_cast<std::size_t>(s.iter)].io_stall_s += stall;
          rank0_[static_cast<std::size_t>(s.iter)].io.push_back({s.stall_start_s, world_.now()});
        }
        if (tracing(s.iter))
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
    const double bytes = profile_.batch * point_.input.sample_bytes;
    const int n = node_of_rank(r);
    const auto& storage = platform_.storage;
    auto preprocess = [this, done = std::move(done)] {
      const double s = profile_.batch * point_.input.preprocess_s_per_sample;
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
        storage.metadata_ops_per_s > 0
            ? profile_.batch * point_.input.metadata_ops_per_sample / storage.metadata_ops_per_s
            : 0;
    ++activities_;
    fifo(metadata_, meta_s, fetch);
  }

  std::vector<ResourceUse> measured_resources(double iteration_s) const;

  void fifo(FifoResource& res, double service_s, Callback done) {
    const double start = std::max(world_.now(), res.free_at_s);
    res.free_at_s = start + service_s;
    world_.after(res.free_at_s - world_.now(), std::move(done));
  }

  World& world_;
  const platforms::Platform& platform_;
  const calibrate::ComputeProfile& profile_;
  const TrainingPoint& point_;
  Layout layout_;
  int workers_ = 1, iters_ = 1, trace_first_ = 0;
  std::vector<double> link_bytes_lo_, link_bytes_hi_;  // World::link_bytes() at the window's ends
  IterationPlan plan_;
  StepPrograms programs_;
  std::vector<std::vector<std::vector<int>>> dependents_;  // per program, per task: the tasks waiting on it
  std::vector<ProgramRun> runs_;
  std::vector<bool> waits_input_;  // per program: it has an INPUT task
  std::map<int, FifoResource> role_queues_;  // SERVE queues: server s at -1 - s, a node's host at its node
  std::map<std::pair<int, int>, platforms::RpcServerQueue> serving_queues_;  // (role as above, queue slot)
  // StepPrograms::fold as the world took it: per node its representative node and the nodes it stands for;
  // per rank the rank it mirrors (-1: none) and the ranks mirroring it.
  std::vector<int> rep_node_, fold_of_, mirror_of_, mirrors_;
  struct MirrorEvent {
    bool done = false;
    int consumed = 0;         // mirrors that have taken it
    std::vector<int> waiters;  // mirrors waiting for it
  };
  std::unordered_map<std::int64_t, MirrorEvent> mirror_events_;  // (representative, iteration, task)
  std::size_t max_tasks_ = 1;
  std::map<std::pair<int, std::int64_t>, Rendezvous> rendezvous_;  // (group, call) -> members arrived
  std::map<std::tuple<int, int, int>, PeerMatch> p2p_;             // (sender, receiver, tag) -> posted tasks
  struct InlinePrice {
    double seconds = -1;  // measured duration of one call; < 0: not yet
    std::vector<std::function<void(double)>> waiting;
  };
  std::unordered_map<std::string, InlinePrice> inline_prices_;
  std::unordered_map<std::string, double> collective_prices_;  // priced collectives: seconds per kind
  std::unordered_map<std::string, double> negotiation_prices_;  // Task::negotiation_B: seconds per group and size
  const CollectiveLibrary* library_ = nullptr;
  std::string forced_;  // the strategy's allreduce algorithm; empty: the library picks
  std::vector<double> factors_;
  bool interferes_ = false;              // compute-communication interference on (GPU workers)
  std::vector<int> in_flight_;           // collectives holding each worker's device
  std::vector<std::int64_t> loads_;      // their World load handle
  std::vector<RankState> ranks_;
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
  res.ps_servers = programs_.servers;
  res.buckets = static_cast<int>(plan_.buckets.size());
  res.activities = activities_;
  const double batch = profile_.batch;
  // Per-iteration time: steady state after the warm-up iteration.
  auto rank_rate = [&](const RankState& rs) {
    const Window w = measured_window(rs);
    return w.span_s() > 0 ? batch * w.iterations / w.span_s() : 0.0;
  };
  // Folded ranks (plan/layout.cpp) have empty programs: nothing to finish or to measure.
  auto folded = [&](std::size_t r) { return programs_.of(static_cast<int>(r)).tasks.empty(); };
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    if (!folded(r) && ranks_[r].ends_s.back() <= 0)
      throw Failure("training replay ended before every worker finished its iterations (internal error)");
  double throughput = 0;
  for (const auto& rs : ranks_) throughput += rank_rate(rs);
  res.throughput = throughput;
  const auto& r0 = ranks_[0];
  const Window w0 = measured_window(r0);
  res.iteration_time_s = w0.span_s() / w0.iterations;
  if (programs_.samples_per_iteration > 0) {
    // Ranks of a parallel layout share their samples: the job's rate is the global batch per iteration of
    // the slowest rank (a synchronous step ends when every rank's does).
    double slowest = 0;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (folded(r)) continue;
      const Window w = measured_window(ranks_[r]);
      slowest = std::max(slowest, w.span_s() / w.iterations);
    }
    res.throughput = slowest > 0 ? programs_.samples_per_iteration / slowest : 0.0;
    res.breakdown.bubble_s = programs_.bubble_s;
    res.breakdown.recompute_s = programs_.recompute_s;
  }
  // Breakdown of rank 0's measured iterations, their mean: the same as the last one's in a synchronous
  // steady state; asynchronous iterations differ from one to the next.
  const int first = iters_ - w0.iterations;
  const double measured = w0.iterations;
  for (int it = first; it < iters_; ++it) {
    const double lo = it == 0 ? 0.0 : r0.ends_s[static_cast<std::size_t>(it - 1)];
    const double hi = r0.ends_s[static_cast<std::size_t>(it)];
    const auto& ri = rank0_[static_cast<std::size_t>(it)];
    const double compute_s = union_length(ri.compute, lo, hi);
    res.breakdown.compute_s += compute_s / measured;
    res.breakdown.communication_s += union_length(ri.comm, lo, hi) / measured;
    res.breakdown.io_stall_s += ri.io_stall_s / measured;
    res.breakdown.local_collectives_s += ri.local_collectives_s / measured;
    res.breakdown.exposed_communication_s += std::max(0.0, (hi - lo) - compute_s - ri.io_stall_s) / measured;
    // Where rank 0 waited: before its forward pass (parameters, a scattered input) or after its
    // backward pass (the gradient exchange, a PS update); idle time is what neither compute nor input covers.
    std::vector<Interval> busy = ri.compute;
    busy.insert(busy.end(), ri.io.begin(), ri.io.end());
    auto idle_in = [&](double a, double b) { return b > a ? (b - a) - union_length(busy, a, b) : 0.0; };
    const double fwd = std::clamp(ri.forward_start_s, lo, hi);
    const double bwd_end = std::clamp(ri.backward_end_s, fwd, hi);
    res.breakdown.exposed_before_forward_s += idle_in(lo, fwd) / measured;
    res.breakdown.exposed_after_backward_s += idle_in(bwd_end, hi) / measured;
    // Every compute call asks for its calibrated time x factor(r, it); what it took beyond that is the
    // interference of overlapped collectives.
    const double asked_s = ri.requested_compute_s, f = factor(0, it);
    res.breakdown.compute_variability_s += (f > 0 ? asked_s - asked_s / f : 0.0) / measured;
    res.breakdown.overlap_slowdown_s += (compute_s - asked_s) / measured;
  }
  res.inter_node_bytes = inter_node_B_ / iters_;
  res.intra_node_bytes = intra_node_B_ / iters_;

  // The busiest NIC (exchange bytes, one direction) and its busy fraction at the payload rate.
  const double iter = std::max(res.iteration_time_s, EPS_S);
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
  res.gradient_bytes = plan_.grad_bytes;
  res.busiest_nic_node = nic_in_B_.empty() ? -1 : static_cast<int>(busiest);
  res.busiest_nic_bytes = std::max(0.0, busiest_B) / iters_;
  res.busiest_nic_busy = nic_Bps > 0 ? res.busiest_nic_bytes / nic_Bps / iter : 0;
  res.busiest_nic_server = server_on_node(static_cast<int>(busiest));
  res.resources = measured_resources(res.iteration_time_s);
  return res;
}

std::vector<ResourceUse> Replay::measured_resources(double iteration_s) const {
  std::vector<ResourceUse> out;
  // Over rank 0's measured window.
  const Window w0 = measured_window(ranks_[0]);
  const double span_s = w0.span_s();
  const double measured_iters = w0.iterations;
  if (span_s <= 0) return out;
  for (std::size_t id = 0; id < link_bytes_hi_.size(); ++id) {
    const double bytes = link_bytes_hi_[id] - (id < link_bytes_lo_.size() ? link_bytes_lo_[id] : 0.0);
    const double bw = world_.link_bandwidth_Bps(static_cast<int>(id));
    if (bytes <= 0 || bw <= 0) continue;
    const LinkRole role = describe_link(world_.link_name(static_cast<int>(id)));
    ResourceUse u;
    u.name = role.label;
    u.kind = role.kind;
    u.node = role.node;
    const bool server_side = role.kind == "nic" || role.kind == "switch-port";
    u.server = server_side && role.node >= 0 ? server_on_node(role.node) : -1;
    u.bytes = bytes / measured_iters;
    u.capacity_Bps = bw;
    u.utilisation = bytes / (bw * span_s);
    out.push_back(std::move(u));
  }
  // A PS shard's CPU applies every worker's push (server apply), or its share of the update once.
  if (const double update_s = programs_.busiest_server_s; update_s > 0 && iteration_s > 0) {
    ResourceUse u;
    u.name = "busiest PS shard's CPU (applying the gradients)";
    u.kind = "ps-cpu";
    u.utilisation = update_s / iteration_s;
    out.push_back(std::move(u));
  }
  // Busiest first; on a tie (a NIC and its switch port carry the same flows) the node's own NIC.
  auto rank_of = [](const std::string& kind) { return kind == "nic" ? 0 : kind == "switch-port" ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const ResourceUse& a, const ResourceUse& b) {
    const double tol = 1e-9 * std::max(a.utilisation, b.utilisation);
    if (std::abs(a.utilisation - b.utilisation) > tol) return a.utilisation > b.utilisation;
    return rank_of(a.kind) < rank_of(b.kind);
  });
  if (out.size() > MAX_RESOURCES_REPORTED) out.resize(MAX_RESOURCES_REPORTED);
  return out;
}

void Replay::finish_trace() {
  // The traced window: from rank 0's start of the first traced iteration to the end of the run.
  const double t0 = trace_first_ == 0 ? 0.0 : ranks_[0].ends_s[static_cast<std::size_t>(trace_first_ - 1)];
  double t1 = t0;
  for (const auto& rs : ranks_) t1 = std::max(t1, rs.ends_s.back());
  if (t1 <= t0) return;
  const auto& changes = world_.link_usage_changes();
  const int links = world_.links_used();
  // Mean utilisation of each link over the window, integrated from its usage changes.
  std::vector<double> usage(static_cast<std::size_t>(links), 0.0), since(static_cast<std::size_t>(links), t0),
      bytes(static_cast<std::size_t>(links), 0.0);
  for (const auto& c : changes) {
    const auto l = static_cast<std::size_t>(c.link);
    const double a = std::max(since[l], t0), b = std::min(c.time_s, t1);
    if (b > a) bytes[l] += usage[l] * (b - a);
    usage[l] = c.usage_Bps;
    since[l] = c.time_s;
  }
  for (std::size_t l = 0; l < usage.size(); ++l)
    if (t1 > std::max(since[l], t0)) bytes[l] += usage[l] * (t1 - std::max(since[l], t0));
  std::vector<std::pair<double, int>> busy;
  for (int l = 0; l < links; ++l) {
    const double mean = bytes[static_cast<std::size_t>(l)] / (world_.link_bandwidth_Bps(l) * (t1 - t0));
    if (mean >= TRACE_MIN_LINK_UTILISATION) busy.emplace_back(mean, l);
  }
  std::sort(busy.begin(), busy.end(), std::greater<>());
  if (busy.size() > TRACE_MAX_LINK_TRACKS) busy.resize(TRACE_MAX_LINK_TRACKS);
  std::vector<std::string> series(static_cast<std::size_t>(links));
  for (const auto& [mean, l] : busy) series[static_cast<std::size_t>(l)] = describe_link(world_.link_name(l)).label;
  // Each counter starts at the link's value at t0, then follows every change inside the window.
  std::vector<double> at_t0(static_cast<std::size_t>(links), 0.0);
  for (const auto& c : changes)
    if (c.time_s <= t0) at_t0[static_cast<std::size_t>(c.link)] = c.usage_Bps;
  auto pct = [&](int l, double Bps) { return PERCENT * Bps / world_.link_bandwidth_Bps(l); };
  for (const auto& [mean, l] : busy)
    trace_.counter(TraceRecorder::Group::NETWORK, series[static_cast<std::size_t>(l)], t0,
                   pct(l, at_t0[static_cast<std::size_t>(l)]));
  for (const auto& c : changes)
    if (c.time_s > t0 && c.time_s <= t1 && !series[static_cast<std::size_t>(c.link)].empty())
      trace_.counter(TraceRecorder::Group::NETWORK, series[static_cast<std::size_t>(c.link)], c.time_s,
                     pct(c.link, c.usage_Bps));
}

}  // namespace

namespace {
PointResult simulate(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                     const TrainingPoint& point, const StepPrograms* given) {
  const Layout layout = check_training_point(platform, profile, point);
  if (given && given->ranks() != point.workers)
    throw Failure(fmt::format("{} step programs for {} workers (internal error)", given->ranks(), point.workers));
  std::string text;
  try {
    text = run_in_child([&] {
      const auto wall0 = std::chrono::steady_clock::now();
      const platforms::Platform run_on = platform_for_library(platform, point);
      World world(run_on, layout);
      Replay replay(world, run_on, profile, point, layout, given);
      replay.start();
      world.run();
      PointResult res = replay.result();
      res.flows = world.flows_started();
      res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      if (!point.fidelity.trace_path.empty()) {
        replay.finish_trace();
        replay.trace_recorder().write(point.fidelity.trace_path);
      }
      return to_json(res).dump();
    });
  } catch (const Failure& e) {
    // A crash inside SimGrid (an xbt_assert aborts the child): one line naming the point and the
    // likely cause, exit code 2 as for a set-up dtsim cannot simulate.
    const std::string what = e.what();
    if (what.find("died with signal") == std::string::npos) throw;
    throw InputError(fmt::format(
        "cannot simulate {} workers, strategy {}{} on {}: {}; likely cause: SimGrid's max-min solver lost "
        "precision with this many concurrent flows (try comm_mode: coarse; docs/simgrid-notes.md)",
        point.workers, point.strategy.name(),
        uses_servers(point.strategy) ? fmt::format(", {} servers", point.ps.servers) : "", platform.name,
        what));
  }
  return point_result_from_json(nlohmann::json::parse(text));
}
}  // namespace

PointResult simulate_training(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                              const TrainingPoint& point) {
  return simulate(platform, profile, point, nullptr);
}

PointResult simulate_programs(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                              const TrainingPoint& point, const StepPrograms& programs) {
  return simulate(platform, profile, point, &programs);
}

}  // namespace dtsim::sim
