// One simulated world per process: SimGrid engine, the platform built in it, and just-in-time
// activities whose completion callbacks are dispatched from the global Activity::on_completion signal
// (pre-building a DAG is quadratic in SimGrid 3.32; see docs/simgrid-notes.md).
#include "sim/src/world.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/kernel/resource/Model.hpp>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <xbt/log.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <fmt/format.h>
#include <string>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "common/errors.hpp"
#include "sim/src/platform_builder.hpp"
#include "sim/src/transport.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
namespace {
// Relative difference below which two link usages read at successive time advances are the same rate.
constexpr double USAGE_CHANGE_TOLERANCE = 1e-9;
// Relative difference below which flows solved together take the same work (World::transfer_together).
constexpr double SAME_WORK_TOLERANCE = 1e-12;
// World::allow_solving_together: whether a new world may solve flows together.
bool g_allow_solving_together = true;
}  // namespace

struct World::Impl {
  s4u::Engine* engine = nullptr;  // leaked on purpose: one engine per process, the process ends after
  BuiltPlatform built;
  std::shared_ptr<const FlowTransports> transports;  // shared with the network model's factor callbacks
  std::shared_ptr<LinkFolds> folds = std::make_shared<LinkFolds>();  // fold_nodes; read by the factor callbacks
  struct Pending {
    s4u::ActivityPtr activity;
    std::function<void()> done;
    const std::vector<int>* links = nullptr;  // the transfer's route, as link ids (LinkMeter)
    double payload_B = 0;     // the transfer's bytes
    double charge_per_B = 0;  // bytes each link of its route carries per payload byte (1 / its factor)
    double fold = 1;          // the nodes' flows it stands for (World::fold_nodes)
  };
  std::unordered_map<const s4u::Activity*, Pending> pending;  // the transfers in flight (computations are timers)
  std::vector<s4u::ActivityPtr> finished;  // freed at the next time advance, not in their own callback
  std::int64_t flows = 0;
  std::int64_t started = 0;
  bool latency_bound_bypass = false;
  bool weighted_folds = false;  // set_weighted_folds
  bool solve_together = false;  // set_solve_together (and allowed: g_allow_solving_together)
  bool allow_solving_together = g_allow_solving_together;
  std::vector<int> together_on;  // per link id: flow sets solved together in flight over it
  int together_in_flight = 0;
  // The network model, whose started actions get their flows' weights and bounds (start_flow).
  simgrid::kernel::resource::Model* network_model = nullptr;
  std::int64_t latency_bound_flows = 0;
  // Every computation runs on timers: a device shares its speed max-min between the computations on
  // it (unbounded) and its loads (each bounded at its share), as SimGrid's CPU model would, and a
  // computation's end is rescheduled whenever that share changes. No SimGrid exec is started, so no
  // solver work and no entry in the engine's activity list, which it walks on every completion
  // (docs/simgrid-notes.md).
  struct Device {
    struct Job {
      double remaining_s;  // of work at the device's full speed
      std::function<void()> done;
    };
    std::map<std::int64_t, Job> jobs;            // by start order
    std::map<std::int64_t, double> load_shares;  // start_load handles on this device
    double rate = 1;      // of each job, a fraction of the device's speed
    double since_s = 0;   // jobs' remaining_s are as of this time
    simgrid::kernel::timer::Timer* timer = nullptr;  // the next job's end
  };
  std::unordered_map<const s4u::Host*, Device> devices;
  std::unordered_map<std::int64_t, const s4u::Host*> load_device;  // start_load handle -> its device
  std::int64_t next_job = 0;
  std::int64_t timers_in_flight = 0;
  std::exception_ptr error;
  std::unordered_map<std::string, World::CachedCollective> duration_cache;  // coarse-mode reuse (ring_start)
  std::int64_t next_load = 0;
  // Link latencies, taken out of SimGrid (every link is set to 0 s) and paid as a start delay by
  // World::transfer: CM02 weighs a flow's share by 1 / its route latency, which both skews sharing
  // and overflows the max-min solver's absolute precision at thousands of flows (docs/simgrid-notes.md).
  std::unordered_map<const s4u::Link*, double> link_latency_s;
  std::unordered_map<const s4u::Host*, std::unordered_map<const s4u::Host*, double>> route_latency_cache;

  // Link measurement. SimGrid charges a flow rate / factor on every link of its route (its factor:
  // FlowTransports::route_bandwidth_factor), so a link carries bytes / factor of each flow over it:
  // counted when the flow ends (World::link_bytes adds the part of flows in flight). Reading the links'
  // usage at every time advance gave the same bytes at up to a third of a parameter-server run's time.
  // Usage is read at time advances only to record its changes (trace output), and then only for the
  // links under a flow in flight (at that moment the solver's rates are still those of the interval
  // that just ended).
  struct LinkMeter {
    std::vector<s4u::Link*> links;
    std::vector<double> bytes, last_usage_Bps;
    std::vector<double> charged;  // the part of `bytes` added by World::charge_links (reused collectives)
    std::vector<double> fold;    // World::fold_nodes: bytes and usages are read per node (divided by it)
    std::vector<int> flows_on;   // flows in flight crossing each link
    std::vector<double> load_on;  // the same flows, each counted as the nodes' flows it stands for (its fold)
    std::vector<char> active;    // in `watch`
    std::vector<int> watch;      // links to read at the next time advance (recording only)
    std::unordered_map<const s4u::Link*, int> id_of;
    struct PairHash {
      std::size_t operator()(const std::pair<const s4u::Host*, const s4u::Host*>& p) const {
        return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
      }
    };
    std::unordered_map<std::pair<const s4u::Host*, const s4u::Host*>, std::vector<int>, PairHash> routes;
    bool recording = false;
    std::vector<UsageChange> changes;

    std::function<double(const s4u::Link*)> folds_of = [](const s4u::Link*) { return 1.0; };
    const std::vector<int>* route(s4u::Host* src, s4u::Host* dst) {
      auto [it, fresh] = routes.try_emplace({src, dst});
      if (fresh) {
        std::vector<s4u::Link*> path;
        src->route_to(dst, path, nullptr);
        for (auto* l : path) {
          auto [li, added] = id_of.try_emplace(l, static_cast<int>(links.size()));
          if (added) {
            links.push_back(l);
            bytes.push_back(0);
            charged.push_back(0);
            last_usage_Bps.push_back(0);
            fold.push_back(folds_of(l));
            flows_on.push_back(0);
            load_on.push_back(0);
            active.push_back(0);
          }
          it->second.push_back(li->second);
        }
      }
      return &it->second;
    }
    // Adds `link_B` (bytes on each link of the route, before the per-node division of folded links).
    void charge(const std::vector<int>& ids, double link_B) {
      for (int id : ids) bytes[static_cast<std::size_t>(id)] += link_B / fold[static_cast<std::size_t>(id)];
    }
    void flow_started(const std::vector<int>& ids, double flow_fold) {
      for (int id : ids) {
        ++flows_on[id];
        load_on[id] += flow_fold;
        if (recording && !active[id]) {
          active[id] = 1;
          watch.push_back(id);
        }
      }
    }
    // A link left without flows is idle from now: recorded at once, as no time advance may follow.
    void flow_ended(const std::vector<int>& ids, double now, double link_B, double flow_fold) {
      charge(ids, link_B);
      for (int id : ids) {
        load_on[id] = flows_on[id] == 1 ? 0.0 : load_on[id] - flow_fold;  // no rounding drift once empty
        if (--flows_on[id] == 0 && last_usage_Bps[id] != 0) {
          if (recording) changes.push_back({now, id, 0.0});
          last_usage_Bps[id] = 0;
        }
      }
    }
    // Recording: the interval [now - delta, now] just elapsed at the usages the solver last computed.
    void time_advanced(double now, double delta) {
      if (!recording) return;
      std::size_t kept = 0;
      for (int id : watch) {
        const double usage = links[id]->get_usage() / fold[id];
        // A change is a new share of the link, not the solver's rounding of the same one.
        if (std::abs(usage - last_usage_Bps[id]) > USAGE_CHANGE_TOLERANCE * std::max(usage, last_usage_Bps[id])) {
          changes.push_back({now - delta, id, usage});
          last_usage_Bps[id] = usage;
        }
        if (flows_on[id] > 0 || usage > 0) {
          watch[kept++] = id;
        } else {
          active[id] = 0;
        }
      }
      watch.resize(kept);
    }
  };
  LinkMeter meter;

  // Each job's share of a device: max-min between `jobs` unbounded computations and loads bounded at
  // their shares (water-filling of a capacity of 1).
  static double job_rate(const Device& d) {
    std::vector<double> bounds;
    for (const auto& [handle, share] : d.load_shares) bounds.push_back(share);
    std::sort(bounds.begin(), bounds.end());
    double capacity = 1;
    std::size_t left = bounds.size() + d.jobs.size();
    for (double b : bounds) {
      if (b * static_cast<double>(left) >= capacity) break;  // this load and the larger get the fair share
      capacity -= b;
      --left;
    }
    return capacity / static_cast<double>(left);
  }
  // Brings the device's jobs to now at their current rate (before its jobs or loads change).
  void settle(const s4u::Host* host) {
    Device& d = devices[host];
    const double now = s4u::Engine::get_clock();
    for (auto& [id, job] : d.jobs) job.remaining_s = std::max(0.0, job.remaining_s - d.rate * (now - d.since_s));
    d.since_s = now;
  }
  // Settles the device, takes its new job rate and re-arms the timer of its next end.
  void reschedule(const s4u::Host* host) {
    settle(host);
    Device& d = devices[host];
    const double now = d.since_s;
    if (d.timer != nullptr) {
      d.timer->remove();
      d.timer = nullptr;
    }
    if (d.jobs.empty()) return;
    d.rate = job_rate(d);
    double next_s = d.jobs.begin()->second.remaining_s;
    for (const auto& [id, job] : d.jobs) next_s = std::min(next_s, job.remaining_s);
    d.timer = simgrid::kernel::timer::Timer::set(now + next_s / d.rate, [this, host] { jobs_due(host); });
  }
  // A job ends when less than a picosecond of it is left (a few at once if they end together), or less
  // than the clock can still add at this date: past ~8,000 s of simulated time a double's step exceeds
  // 1 ps, and a job a step short of its end re-armed its timer at the same date forever.
  static constexpr double JOB_END_TOLERANCE_S = 1e-12;
  static constexpr double CLOCK_STEPS_OF_TOLERANCE = 4;
  void jobs_due(const s4u::Host* host) {
    Device& d = devices[host];
    d.timer = nullptr;  // the engine frees the timer that fires
    settle(host);
    const double now = d.since_s;
    const double clock_step_s = std::nextafter(now, std::numeric_limits<double>::infinity()) - now;
    const double tolerance_s = std::max(JOB_END_TOLERANCE_S, CLOCK_STEPS_OF_TOLERANCE * clock_step_s);
    std::vector<std::function<void()>> ended;
    for (auto it = d.jobs.begin(); it != d.jobs.end();) {
      if (it->second.remaining_s <= d.rate * tolerance_s) {
        ended.push_back(std::move(it->second.done));
        it = d.jobs.erase(it);
        --timers_in_flight;
      } else {
        ++it;
      }
    }
    reschedule(host);
    for (auto& fn : ended) call(fn);
  }

  void call(const std::function<void()>& fn) {
    if (error) return;  // drain quietly after the first failure; run() rethrows it
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }
  void on_completion(const s4u::Activity& a) {
    auto it = pending.find(&a);
    if (it == pending.end()) return;  // not ours, or the second signal of the same transfer
    auto fn = std::move(it->second.done);
    meter.flow_ended(*it->second.links, s4u::Engine::get_clock(), it->second.payload_B * it->second.charge_per_B,
                     it->second.fold);
    finished.push_back(std::move(it->second.activity));
    pending.erase(it);
    call(fn);
  }
};

namespace {
// The one world of this process (SimGrid signals are global); set while a World exists.
std::function<void(const s4u::Activity&)> g_on_completion;
std::function<void(double)> g_on_time_advance;
bool g_world_exists = false;
}  // namespace

World::World(const platforms::Platform& platform, const Layout& layout) : impl_(std::make_unique<Impl>()) {
  if (g_world_exists) throw Failure("dtsim::sim::World: one world per process (run each in run_in_child)");
  validate_for_simulation(platform, layout);
  xbt_log_control_set("root.thres:critical");
  static int argc = 1;
  static char name[] = "dtsim";
  static char* argv[] = {name, nullptr};
  impl_->engine = new s4u::Engine(&argc, argv);
  configure_network_model(platform);
  impl_->built = build_platform(platform, layout);
  for (s4u::Link* link : impl_->engine->get_all_links()) {
    const double latency_s = link->get_latency();
    if (latency_s <= 0) continue;
    impl_->link_latency_s[link] = latency_s;
    link->set_latency(0);
  }
  impl_->network_model = dynamic_cast<simgrid::kernel::resource::Model*>(
      s4u::Engine::get_instance()->get_netzone_root()->get_network_model());
  if (impl_->network_model == nullptr) throw Failure("World: the network model is not a resource model (internal error)");
  impl_->transports = std::make_shared<const FlowTransports>(platform, impl_->built);
  install_transport_factors(impl_->transports, impl_->folds);
  impl_->meter.folds_of = [folds = impl_->folds](const s4u::Link* l) {
    const auto it = folds->find(l);
    return it == folds->end() ? 1.0 : it->second;
  };
  g_world_exists = true;
  Impl* impl = impl_.get();
  g_on_completion = [impl](const s4u::Activity& a) { impl->on_completion(a); };
  g_on_time_advance = [impl](double delta) {
    impl->meter.time_advanced(s4u::Engine::get_clock(), delta);
    impl->finished.clear();
  };
  s4u::Activity::on_completion_cb([](const s4u::Activity& a) {
    if (g_on_completion) g_on_completion(a);
  });
  s4u::Engine::on_time_advance_cb([](double delta) {
    if (g_on_time_advance) g_on_time_advance(delta);
  });
}

World::~World() {
  g_on_completion = nullptr;
  g_on_time_advance = nullptr;
}

int World::workers() const { return static_cast<int>(impl_->built.workers.size()); }
int World::nodes() const { return impl_->built.nodes; }
int World::workers_per_node() const { return impl_->built.workers_per_node; }
int World::node_of(int rank) const {
  if (rank < 0 || rank >= workers()) throw Failure(fmt::format("World::node_of: rank {} out of range", rank));
  return rank / impl_->built.workers_per_node;
}
s4u::Host* World::worker_host(int rank) const {
  if (rank < 0 || rank >= workers()) throw Failure(fmt::format("World::worker_host: rank {} out of range", rank));
  return impl_->built.workers[rank];
}
int World::rails_per_node() const { return impl_->built.rails; }
s4u::Host* World::nvswitch_host(int node) const {
  const auto& hosts = impl_->built.nvswitch_hosts;
  return node >= 0 && static_cast<std::size_t>(node) < hosts.size() ? hosts[static_cast<std::size_t>(node)] : nullptr;
}
s4u::Host* World::split_server_host(int node) const {
  const auto& hosts = impl_->built.split_server_hosts;
  return node >= 0 && static_cast<std::size_t>(node) < hosts.size() ? hosts[static_cast<std::size_t>(node)] : nullptr;
}

bool World::crosses_network(const s4u::Host* src, const s4u::Host* dst) const {
  return impl_->transports->inter_node(src, dst);
}

s4u::Host* World::node_host(int node) const {
  if (node < 0 || node >= static_cast<int>(impl_->built.node_hosts.size()))
    throw Failure(fmt::format("World::node_host: node {} out of range", node));
  return impl_->built.node_hosts[node];
}
s4u::Host* World::dedicated_ps_host(int i) const {
  if (i < 0 || i >= impl_->built.dedicated_nodes)
    throw Failure(fmt::format("World::dedicated_ps_host: {} out of range ({} dedicated nodes)", i,
                              impl_->built.dedicated_nodes));
  return impl_->built.node_hosts[impl_->built.nodes + i];
}
s4u::Host* World::storage_host() const { return storage_host_for(0); }
s4u::Host* World::storage_host_for(int node) const {
  if (node < 0 || node >= static_cast<int>(impl_->built.storage_hosts.size())) return nullptr;
  return impl_->built.storage_hosts[node];
}

double World::route_latency_s(s4u::Host* src, s4u::Host* dst) const {
  if (src == dst) return 0;
  auto& row = impl_->route_latency_cache[src];
  if (auto it = row.find(dst); it != row.end()) return it->second;
  std::vector<s4u::Link*> links;
  src->route_to(dst, links, nullptr);
  double latency = 0;
  for (const s4u::Link* l : links) {
    const auto it = impl_->link_latency_s.find(l);
    if (it != impl_->link_latency_s.end()) latency += it->second;
  }
  row.emplace(dst, latency);
  return latency;
}

double World::route_bandwidth_Bps(s4u::Host* src, s4u::Host* dst) const {
  if (src == dst) return 0;
  std::vector<s4u::Link*> links;
  src->route_to(dst, links, nullptr);
  double bw = 0;
  for (const s4u::Link* l : links) {
    const double own_Bps = l->get_bandwidth() / impl_->meter.folds_of(l);  // one node's share of a folded link
    bw = bw > 0 ? std::min(bw, own_Bps) : own_Bps;
  }
  return bw;
}

double World::message_latency_s(s4u::Host* src, s4u::Host* dst, double bytes) const {
  if (src == dst) return 0;
  return route_latency_s(src, dst) * impl_->transports->latency_factor(bytes, src, dst) +
         impl_->transports->plan(src, dst, bytes).start_delay_s;
}

bool World::idle() const { return impl_->pending.empty() && impl_->timers_in_flight == 0; }
std::int64_t World::flows_started() const { return impl_->flows; }
std::int64_t World::transfers_in_flight() const { return static_cast<std::int64_t>(impl_->pending.size()); }
std::unordered_map<std::string, World::CachedCollective>& World::duration_cache() { return impl_->duration_cache; }
void World::charge_links(const std::vector<std::pair<int, double>>& link_B) {
  for (const auto& [id, bytes] : link_B) {
    impl_->meter.bytes.at(static_cast<std::size_t>(id)) += bytes;
    impl_->meter.charged.at(static_cast<std::size_t>(id)) += bytes;
  }
}
std::vector<double> World::flow_link_bytes() const {
  std::vector<double> out = link_bytes();
  for (std::size_t id = 0; id < out.size(); ++id) out[id] -= impl_->meter.charged[id];
  return out;
}
bool World::recording_link_usage() const { return impl_->meter.recording; }
std::int64_t World::activities_started() const { return impl_->started; }

void World::compute(int rank, double seconds, std::function<void()> done) {
  if (!(std::isfinite(seconds) && seconds >= 0))
    throw Failure(fmt::format("World::compute: bad duration {} s for rank {}", seconds, rank));
  const s4u::Host* host = worker_host(rank);
  impl_->settle(host);  // the jobs already there, brought to now at their old rate
  ++impl_->timers_in_flight;
  ++impl_->started;
  impl_->devices[host].jobs.emplace(impl_->next_job++, Impl::Device::Job{seconds, std::move(done)});
  impl_->reschedule(host);
}

void World::set_latency_bound_bypass(bool on) { impl_->latency_bound_bypass = on; }
void World::set_weighted_folds(bool on) { impl_->weighted_folds = on; }

namespace {
// Starts `comm`. A weight above 1 gives its flow that many flows' share in max-min sharing; a bound
// (B/s, > 0) caps its rate without charging its links more than that rate. SimGrid 3.32 has no s4u
// call for either: the comm's network action is the newest in the network model's started set right
// after start(), and its sharing penalty (the inverse of the share) and bound are public on the action.
void start_flow(s4u::Comm& comm, simgrid::kernel::resource::Model* model, double weight, double bound_Bps) {
  comm.start();
  if (weight <= 1 && bound_Bps <= 0) return;
  auto* started = model->get_started_action_set();
  if (started->empty() || started->back().get_activity() != comm.get_impl())
    throw Failure("World: a flow's network action was not found after its start (internal error)");
  if (weight > 1) started->back().set_sharing_penalty(1.0 / weight);
  if (bound_Bps > 0) started->back().set_bound(bound_Bps);
}
}  // namespace
std::int64_t World::latency_bound_flows() const { return impl_->latency_bound_flows; }

std::int64_t World::start_load(int rank, double share) {
  if (!(share > 0 && share < 1)) throw Failure(fmt::format("World::start_load: share {} outside (0, 1)", share));
  const s4u::Host* host = worker_host(rank);
  impl_->settle(host);
  ++impl_->started;
  const std::int64_t handle = impl_->next_load++;
  impl_->devices[host].load_shares.emplace(handle, share);
  impl_->load_device.emplace(handle, host);
  impl_->reschedule(host);
  return handle;
}

void World::stop_load(std::int64_t handle) {
  const auto it = impl_->load_device.find(handle);
  if (it == impl_->load_device.end()) throw Failure(fmt::format("World::stop_load: no load {}", handle));
  const s4u::Host* host = it->second;
  impl_->load_device.erase(it);
  impl_->settle(host);
  impl_->devices[host].load_shares.erase(handle);
  impl_->reschedule(host);
}

void World::transfer(s4u::Host* src, s4u::Host* dst, double bytes, std::function<void()> done, double nodes) {
  if (!(std::isfinite(bytes) && bytes >= 0 && bytes < 1e18))
    throw Failure(fmt::format("World::transfer: bad size {} bytes", bytes));
  if (src == dst) {  // same host: a memory hand-over, no network
    after(0, std::move(done));
    return;
  }
  // The flow waits for its route latency (x the transport's factor) and, host-staged, the pipeline
  // fill; then SimGrid shares bandwidth with every flow weighted alike (links carry 0 s latency, see
  // Impl::link_latency_s). The transport's size-dependent bandwidth factor and a staged pipeline's rate
  // cap come from the network model's bandwidth-factor callback (SimGrid 3.32 ignores Comm::set_rate on
  // host-to-host comms and refuses it once the source is set); a TCP connection's cap is the flow
  // action's bound (start_flow).
  // A flow over a folded node's links carries `fold` nodes' bytes; each would wait its own latency.
  const std::vector<int>* links = impl_->meter.route(src, dst);
  if (impl_->together_in_flight > 0)
    for (int id : *links)
      if (static_cast<std::size_t>(id) < impl_->together_on.size() && impl_->together_on[static_cast<std::size_t>(id)] > 0)
        throw Failure("World::transfer: a flow over the links of flows solved together (internal error: "
                      "World::set_solve_together promised none)");
  double fold = 1;
  for (int id : *links) fold = std::max(fold, impl_->meter.fold[static_cast<std::size_t>(id)]);
  if (nodes > 0) fold = std::min(fold, nodes);
  const double start_delay_s = message_latency_s(src, dst, bytes / fold);
  if (impl_->latency_bound_bypass) {
    // A message no larger than its route's bandwidth-delay product (the wire's latency x its slowest
    // link; a transport's start-up delays do not count) is latency-bound: it arrives after its latency
    // plus its own serialisation, outside the max-min solver (docs/simulation-training.md).
    // Its rate is its max-min share when it starts (each link's bandwidth over the flows then on it,
    // itself included), so a small message on a busy link still waits its turn. A folded flow counts as
    // the `fold` nodes' flows it stands for, on the links it alone scales and on shared ones alike.
    double own_Bps = 0, share_Bps = 0;
    for (int id : *links) {
      const auto i = static_cast<std::size_t>(id);
      const double b = impl_->meter.links[i]->get_bandwidth() / impl_->meter.fold[i];
      own_Bps = own_Bps > 0 ? std::min(own_Bps, b) : b;
      const double share = impl_->meter.links[i]->get_bandwidth() / (impl_->meter.load_on[i] + fold);
      share_Bps = share_Bps > 0 ? std::min(share_Bps, share) : share;
    }
    const double node_B = bytes / fold;
    if (own_Bps > 0 && node_B <= route_latency_s(src, dst) * own_Bps) {
      ++impl_->flows;
      ++impl_->latency_bound_flows;
      impl_->meter.charge(*links, bytes);  // its bytes still count as the links' traffic
      after(start_delay_s + node_B / share_Bps, std::move(done));
      return;
    }
  }
  s4u::CommPtr comm = s4u::Comm::sendto_init(src, dst);
  comm->set_payload_size(static_cast<std::uint64_t>(std::llround(bytes)));
  impl_->meter.flow_started(*links, fold);
  std::vector<const s4u::Link*> route;
  for (int id : *links) route.push_back(impl_->meter.links[static_cast<std::size_t>(id)]);
  const double charge_per_B = 1.0 / impl_->transports->route_bandwidth_factor(bytes, src, dst, route, *impl_->folds);
  impl_->pending.emplace(comm.get(), Impl::Pending{comm, std::move(done), links, bytes, charge_per_B, fold});
  ++impl_->flows;
  const double weight = impl_->weighted_folds ? fold : 1.0;
  // A TCP connection's cap (FlowPlan::cap_is_bound): each of the `fold` nodes' flows has its own. SimGrid
  // bounds the action's max-min variable, whose value is the rate over the flow's bandwidth factor
  // (measured: tests/sim/test_transport.cpp), so the bound is the cap over that factor (the one just
  // taken for the charge: a bound cap is left out of the factor).
  const FlowPlan plan = impl_->transports->plan(src, dst, bytes / fold);
  const double bound_Bps = plan.cap_is_bound && plan.rate_cap_Bps > 0 ? plan.rate_cap_Bps * fold * charge_per_B : 0.0;
  if (start_delay_s > 0) {
    // Counted as in flight from now; started (and counted as an activity) once the latency is paid.
    ++impl_->timers_in_flight;
    Impl* impl = impl_.get();
    simgrid::kernel::timer::Timer::set(s4u::Engine::get_clock() + start_delay_s, [impl, comm, weight, bound_Bps]() {
      --impl->timers_in_flight;
      ++impl->started;
      try {
        start_flow(*comm, impl->network_model, weight, bound_Bps);
      } catch (...) {
        if (!impl->error) impl->error = std::current_exception();
      }
    });
    return;
  }
  ++impl_->started;
  start_flow(*comm, impl_->network_model, weight, bound_Bps);
}

void World::allow_solving_together(bool on) { g_allow_solving_together = on; }
void World::set_solve_together(bool on) { impl_->solve_together = on; }

// Max-min sharing of flows of equal work w, alone on the network: a link L crossed by n_L of them has
// the fair share r_L = B_L / n_L. At any moment a flow's rate is at least its bottleneck link's fair
// share among the flows then active, so at least r_f = min of r_L over its links: flow f, started at
// d_f, ends by d_f + w / r_f. The last end is taken as the largest of these; it is exact for the flows
// of the link with the smallest share, which take exactly that share while they are all active, and is
// off by at most the spread of the flows' start latencies. SimGrid 3.32 equalises the link usage (rate
// / bandwidth factor) of flows sharing a link (transport.cpp), so w counts each flow's bytes times its
// links' charge per byte, and the flows must agree on it.
bool World::transfer_together(const std::vector<std::pair<s4u::Host*, s4u::Host*>>& flows,
                              const std::vector<int>& groups, double bytes, std::vector<std::function<void()>> done) {
  auto& m = impl_->meter;
  if (!impl_->solve_together || !impl_->allow_solving_together || impl_->together_in_flight > 0 || flows.empty() ||
      groups.size() != flows.size() || !impl_->pending.empty() || m.recording || impl_->weighted_folds ||
      !(std::isfinite(bytes) && bytes > 0 && bytes < 1e18))
    return false;
  for (int g : groups)
    if (g < 0 || static_cast<std::size_t>(g) >= done.size()) throw Failure("World::transfer_together: bad group (internal error)");
  std::vector<const std::vector<int>*> routes;
  std::vector<double> starts_s;
  routes.reserve(flows.size());
  starts_s.reserve(flows.size());
  double work_B = -1;
  std::vector<const s4u::Link*> route;
  for (const auto& [src, dst] : flows) {
    if (src == dst) return false;
    const std::vector<int>* links = m.route(src, dst);
    if (links->empty()) return false;
    double own_Bps = 0;
    route.clear();
    for (int id : *links) {
      const auto i = static_cast<std::size_t>(id);
      if (m.fold[i] != 1 || m.links[i]->get_sharing_policy() != s4u::Link::SharingPolicy::SHARED) return false;
      own_Bps = own_Bps > 0 ? std::min(own_Bps, m.links[i]->get_bandwidth()) : m.links[i]->get_bandwidth();
      route.push_back(m.links[i]);
    }
    if (impl_->latency_bound_bypass && bytes <= route_latency_s(src, dst) * own_Bps) return false;  // as transfer
    const FlowPlan plan = impl_->transports->plan(src, dst, bytes);
    if (plan.cap_is_bound && plan.rate_cap_Bps > 0) return false;  // a bound of its own
    const double work = bytes / impl_->transports->route_bandwidth_factor(bytes, src, dst, route, *impl_->folds);
    if (work_B < 0) work_B = work;
    if (!(std::abs(work - work_B) <= SAME_WORK_TOLERANCE * work_B)) return false;
    starts_s.push_back(message_latency_s(src, dst, bytes));
    routes.push_back(links);
  }
  std::vector<int> crossing(m.links.size(), 0);
  for (const auto* links : routes)
    for (int id : *links) ++crossing[static_cast<std::size_t>(id)];
  std::vector<std::pair<int, double>> link_B;
  for (std::size_t id = 0; id < crossing.size(); ++id)
    if (crossing[id] > 0) link_B.emplace_back(static_cast<int>(id), crossing[id] * work_B);
  std::vector<double> last_end_s(done.size(), -1.0);
  for (std::size_t f = 0; f < routes.size(); ++f) {
    double share_Bps = std::numeric_limits<double>::infinity();
    for (int id : *routes[f])
      share_Bps = std::min(share_Bps, m.links[static_cast<std::size_t>(id)]->get_bandwidth() / crossing[static_cast<std::size_t>(id)]);
    if (!(share_Bps > 0 && std::isfinite(share_Bps))) return false;
    auto& end_s = last_end_s[static_cast<std::size_t>(groups[f])];
    end_s = std::max(end_s, starts_s[f] + work_B / share_Bps);
  }
  impl_->flows += static_cast<std::int64_t>(flows.size());
  impl_->started += static_cast<std::int64_t>(flows.size());
  // Its links are taken until the last group ends (a transfer over them meanwhile is refused); their
  // bytes are charged then, as the flows' ends would.
  Impl* impl = impl_.get();
  impl->together_on.resize(m.links.size(), 0);
  for (const auto& [id, b] : link_B) ++impl->together_on[static_cast<std::size_t>(id)];
  ++impl->together_in_flight;
  auto left = std::make_shared<std::size_t>(done.size());
  auto finish_one = [impl, left, link_B = std::move(link_B)]() {
    if (--*left > 0) return;
    for (const auto& [id, b] : link_B) {
      impl->meter.bytes[static_cast<std::size_t>(id)] += b;
      --impl->together_on[static_cast<std::size_t>(id)];
    }
    --impl->together_in_flight;
  };
  for (std::size_t g = 0; g < done.size(); ++g) {
    if (last_end_s[g] < 0) {  // a group without flows ends at once
      after(0, [finish_one, fn = std::move(done[g])]() { finish_one(); fn(); });
      continue;
    }
    after(last_end_s[g], [finish_one, fn = std::move(done[g])]() { finish_one(); fn(); });
  }
  return true;
}

void World::after(double delay_s, std::function<void()> fn) {
  if (!(std::isfinite(delay_s) && delay_s >= 0)) throw Failure(fmt::format("World::after: bad delay {} s", delay_s));
  ++impl_->timers_in_flight;
  ++impl_->started;
  Impl* impl = impl_.get();
  simgrid::kernel::timer::Timer::set(s4u::Engine::get_clock() + delay_s, [impl, fn = std::move(fn)]() {
    --impl->timers_in_flight;
    impl->call(fn);
  });
}

// A folded link: `scale` x its bandwidth, read per node (divided by scale) by the meter and the factors.
void World::scale_link(s4u::Link* l, double scale) {
  l->set_bandwidth(l->get_bandwidth() * scale);
  (*impl_->folds)[l] = scale;
  if (const auto it = impl_->meter.id_of.find(l); it != impl_->meter.id_of.end())
    impl_->meter.fold[static_cast<std::size_t>(it->second)] = scale;
}

int World::fold_nodes(const std::vector<std::vector<int>>& groups, const std::vector<s4u::Host*>& refs) {
  if (groups.empty() || groups[0].size() < 2) return 1;
  const std::size_t k = groups[0].size();
  const int per_node = workers_per_node();
  auto device = [&](int node, int j) { return worker_host(node * per_node + j); };
  auto route = [](s4u::Host* a, s4u::Host* b) {
    std::vector<s4u::Link*> path;
    if (a != b) a->route_to(b, path, nullptr);
    return path;
  };
  // A ref on the node itself (the colocated server of a split node, Layout::server_nic_nodes) is
  // reached inside the node by its own device, so its routes are not compared; the caller sends the
  // representative's flows for the other members to it over the network (the executor's start_flow).
  const auto on_node = [this](s4u::Host* ref, int node) { return ref == node_host(node); };
  // Same length, and where the first node's route and a member's differ, neither link is on the
  // other's route: the first node's link there is its own (scaled below); every other link is shared.
  std::unordered_set<s4u::Link*> own, all_own;
  auto alike = [&own](const std::vector<s4u::Link*>& a, const std::vector<s4u::Link*>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] == b[i]) continue;
      if (std::find(b.begin(), b.end(), a[i]) != b.end() || std::find(a.begin(), a.end(), b[i]) != a.end()) return false;
      own.insert(a[i]);
    }
    return true;
  };
  for (const auto& group : groups) {
    if (group.size() != k) return 1;
    own.clear();
    const int rep = group[0];
    for (int j = 0; j < per_node; ++j)
      for (std::size_t i = 1; i < k; ++i) {
        const int m = group[i];
        for (s4u::Host* ref : refs) {
          if (on_node(ref, rep) || on_node(ref, m)) continue;  // local to one of them (split node's server)
          if (!alike(route(device(rep, j), ref), route(device(m, j), ref)) ||
              !alike(route(ref, device(rep, j)), route(ref, device(m, j))))
            return 1;
        }
        if (j > 0 && !(alike(route(device(rep, j), device(rep, 0)), route(device(m, j), device(m, 0))) &&
                       alike(route(device(rep, 0), device(rep, j)), route(device(m, 0), device(m, j)))))
          return 1;
      }
    for (s4u::Link* l : own)
      if (!all_own.insert(l).second) return 1;  // another group's too: not private after all
  }
  for (s4u::Link* l : all_own) scale_link(l, static_cast<double>(k));
  return static_cast<int>(k);
}

namespace {
// Busy links: shared links that need at least this fraction of the busiest link's time (bytes over
// bandwidth, every node's flows) must be used alike by a fold's members (World::fold_nodes_scaled).
constexpr double PARTIAL_LINK_MAX_BUSY = 0.5;
// A node's routes, in a fixed order: to and from each ref for each of its devices, and between its
// devices; and the bytes one device sends on each per iteration (none between its devices). A ref on
// the node itself (the colocated server of a split node, Layout::server_nic_nodes) is reached inside
// the node (an empty route), or, for a representative, through the server's NIC as its members' flows
// to it are (World::split_server_host; the executor's start_flow).
struct NodeRoutes {
  const World& world;
  const std::vector<s4u::Host*>& refs;
  const std::vector<double>& bytes_to;
  const std::vector<double>& bytes_from;
  std::vector<std::vector<s4u::Link*>> routes;
  void of(int node, bool representative = false) {
    const int per_node = world.workers_per_node();
    routes.clear();
    auto add = [this](s4u::Host* a, s4u::Host* b) {
      routes.emplace_back();
      if (a != b && a != nullptr && b != nullptr) a->route_to(b, routes.back(), nullptr);
    };
    s4u::Host* local_end = representative ? world.split_server_host(node) : nullptr;
    for (int j = 0; j < per_node; ++j) {
      s4u::Host* dev = world.worker_host(node * per_node + j);
      for (s4u::Host* ref : refs) {
        s4u::Host* end = ref == world.node_host(node) ? local_end : ref;
        add(dev, end);
        add(end, dev);
      }
      add(dev, world.worker_host(node * per_node));  // empty for the first device: the same count per device
      add(world.worker_host(node * per_node), dev);
    }
  }
  s4u::Host* ref(std::size_t i) const {  // the ref route i goes to or from; null between devices
    const std::size_t j = i % (2 * refs.size() + 2);
    return j < 2 * refs.size() ? refs[j / 2] : nullptr;
  }
  double bytes(std::size_t i) const {
    const std::size_t per_device = 2 * refs.size() + 2;
    const std::size_t j = i % per_device;
    if (j >= 2 * refs.size()) return 0.0;  // between the node's devices: not counted
    return j % 2 == 0 ? bytes_to[j / 2] : bytes_from[j / 2];
  }
};
}  // namespace

std::vector<int> World::route_classes(const std::vector<s4u::Host*>& refs, const std::vector<double>& bytes_to,
                                      const std::vector<double>& bytes_from) const {
  NodeRoutes nr{*this, refs, bytes_to, bytes_from, {}};
  const int nodes = workers() / workers_per_node();
  std::unordered_map<s4u::Link*, double> demand_B;
  std::unordered_map<s4u::Link*, int> users;
  for (int n = 0; n < nodes; ++n) {
    nr.of(n);
    std::unordered_set<s4u::Link*> mine;
    for (std::size_t ri = 0; ri < nr.routes.size(); ++ri)
      for (s4u::Link* l : nr.routes[ri]) {
        demand_B[l] += nr.bytes(ri);
        if (mine.insert(l).second) ++users[l];
      }
  }
  double busiest_s = 0;
  for (const auto& [l, b] : demand_B) busiest_s = std::max(busiest_s, b / l->get_bandwidth());
  std::map<std::vector<s4u::Link*>, int> ids;
  std::vector<int> out;
  std::vector<s4u::Link*> signature;
  for (int n = 0; n < nodes; ++n) {
    nr.of(n);
    signature.clear();
    for (const auto& r : nr.routes) {
      for (s4u::Link* l : r)
        if (users.at(l) > 1 && demand_B.at(l) / l->get_bandwidth() >= PARTIAL_LINK_MAX_BUSY * busiest_s)
          signature.push_back(l);
      signature.push_back(nullptr);  // route boundary
    }
    out.push_back(ids.try_emplace(signature, static_cast<int>(ids.size())).first->second);
  }
  return out;
}

int World::fold_nodes_scaled(std::vector<std::vector<int>>& groups, const std::vector<s4u::Host*>& refs,
                             const std::vector<double>& bytes_to, const std::vector<double>& bytes_from) {
  if (groups.empty()) return 1;
  std::size_t k = 0;  // the largest group
  bool mixed = false;
  for (const auto& group : groups) {
    if (group.empty()) return 1;
    mixed = mixed || (k != 0 && group.size() != k);
    k = std::max(k, group.size());
  }
  if (k < 2) return 1;
  NodeRoutes nr{*this, refs, bytes_to, bytes_from, {}};
  auto& routes = nr.routes;
  const auto node_routes = [&nr](int node) { nr.of(node); };  // as a member: its own server is local
  const auto route_bytes = [&nr](std::size_t i) { return nr.bytes(i); };
  std::unordered_map<s4u::Link*, double> n_real, n_fold, demand_B;
  std::unordered_map<s4u::Link*, int> users;  // nodes whose routes cross the link
  std::unordered_map<s4u::Link*, std::pair<double, double>> rep_k;  // smallest and largest group crossing it
  for (auto& group : groups) {
    const double kg = static_cast<double>(group.size());
    // The representative: a member whose route lengths are the group's most common ones, so it is a
    // typical node, not one on a switch that skips a hop (a dragonfly router holding a global link).
    std::map<std::vector<std::size_t>, std::pair<int, std::size_t>> shapes;  // lengths -> (members, first)
    for (std::size_t i = 0; i < group.size(); ++i) {
      node_routes(group[i]);
      std::vector<std::size_t> lengths;
      std::unordered_set<s4u::Link*> mine;
      for (std::size_t ri = 0; ri < routes.size(); ++ri) {
        lengths.push_back(routes[ri].size());
        for (s4u::Link* l : routes[ri]) {
          n_real[l] += 1;
          demand_B[l] += route_bytes(ri);
          if (mine.insert(l).second) ++users[l];
        }
      }
      auto& shape = shapes.try_emplace(std::move(lengths), 0, i).first->second;
      ++shape.first;
    }
    const auto typical = std::max_element(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
      return a.second.first < b.second.first || (a.second.first == b.second.first && a.second.second > b.second.second);
    });
    std::swap(group[0], group[typical->second.second]);
    // A representative's flow to a server on a member's node (or its own) stands for one node fewer.
    nr.of(group[0], true);
    for (std::size_t ri = 0; ri < routes.size(); ++ri) {
      double w = kg;
      if (s4u::Host* ref = nr.ref(ri); ref != nullptr)
        for (int m : group) w -= ref == node_host(m) ? 1 : 0;
      for (s4u::Link* l : routes[ri]) {
        n_fold[l] += w;
        auto [it, fresh] = rep_k.try_emplace(l, kg, kg);
        if (!fresh) it->second = {std::min(it->second.first, kg), std::max(it->second.second, kg)};
      }
    }
  }
  // Members' rates differ only where their routes differ: on links several nodes use, but not alike
  // (scale neither 1 nor k, or 0 where no representative uses the link); a node's own links are alike.
  // Folded, members all get the representative's rate, so a synchronous step would miss its slowest. Refused unless those links need at most
  // PARTIAL_LINK_MAX_BUSY of the busiest link's time (bytes over bandwidth, unfolded).
  // A link within ALIKE_SCALE_TOLERANCE of 1 or k is used alike but for a few nodes' flows (e.g. a
  // dragonfly link into a chassis that all other groups' traffic crosses, and one router's own).
  constexpr double ALIKE_SCALE_TOLERANCE = 0.05;
  // A split node's switch link (Layout::server_nic_nodes) is as wide as its two NICs together, so it
  // never limits either role: left out of the check and of the scaling below; a representative's own
  // is scaled by k like its NIC, so that its k devices' flows and its server's still fit.
  std::unordered_set<s4u::Link*> widened;
  for (const auto& links : impl_->built.split_switch_links) widened.insert(links.begin(), links.end());
  double busiest_s = 0, partial_s = 0;
  for (const auto& [l, bytes] : demand_B) busiest_s = std::max(busiest_s, bytes / l->get_bandwidth());
  for (const auto& [l, real] : n_real) {
    if (users[l] == 1 || widened.contains(l)) continue;  // one node's own link: each member's is like the representative's
    const auto it = n_fold.find(l);
    const double scale = it == n_fold.end() ? 0.0 : it->second / real;  // 0: no representative uses it
    const auto near = [&](double target) { return std::abs(scale / target - 1) <= ALIKE_SCALE_TOLERANCE; };
    const bool alike = near(1) || (scale > 0 && (near(rep_k.at(l).first) || near(rep_k.at(l).second)));
    if (!alike) partial_s = std::max(partial_s, demand_B[l] / l->get_bandwidth());
  }
  if (partial_s > PARTIAL_LINK_MAX_BUSY * busiest_s) return 1;
  for (const auto& [l, folded] : n_fold) {
    const double scale = folded / n_real.at(l);  // a first node's flows are counted in n_real too
    if (scale != 1 && !widened.contains(l)) scale_link(l, scale);
  }
  const auto& split = impl_->built.split_switch_links;
  for (const auto& group : groups)
    if (group.size() > 1 && static_cast<std::size_t>(group[0]) < split.size())
      for (s4u::Link* l : split[static_cast<std::size_t>(group[0])]) scale_link(l, static_cast<double>(group.size()));
  // Representatives of different sizes share links: each flow must weigh the nodes' flows it stands for.
  if (mixed) impl_->weighted_folds = true;
  return static_cast<int>(k);
}

int World::links_used() const { return static_cast<int>(impl_->meter.links.size()); }
const std::string& World::link_name(int id) const { return impl_->meter.links.at(id)->get_name(); }
double World::link_bandwidth_Bps(int id) const {
  return impl_->meter.links.at(id)->get_bandwidth() / impl_->meter.fold.at(static_cast<std::size_t>(id));
}
// Per node on folded links: the ended flows' charges and the part of those in flight already sent.
std::vector<double> World::link_bytes() const {
  std::vector<double> out = impl_->meter.bytes;
  for (const auto& [activity, p] : impl_->pending) {
    if (p.activity->get_state() != s4u::Activity::State::STARTED) continue;
    const double sent_B = p.payload_B - static_cast<const s4u::Comm*>(p.activity.get())->get_remaining();
    for (int id : *p.links)
      out[static_cast<std::size_t>(id)] += sent_B * p.charge_per_B / impl_->meter.fold[static_cast<std::size_t>(id)];
  }
  return out;
}
void World::record_link_usage(bool on) { impl_->meter.recording = on; }
const std::vector<World::UsageChange>& World::link_usage_changes() const { return impl_->meter.changes; }

double World::now() const { return s4u::Engine::get_clock(); }

void World::run() {
  impl_->engine->run();
  if (impl_->error) std::rethrow_exception(impl_->error);
  if (!impl_->pending.empty() || impl_->timers_in_flight != 0)
    throw Failure(fmt::format("simulation stalled with {} activities unfinished", impl_->pending.size()));
  if (!impl_->load_device.empty())
    throw Failure(fmt::format("simulation ended with {} device loads never stopped (internal error)",
                              impl_->load_device.size()));
}

}  // namespace dtsim::sim
