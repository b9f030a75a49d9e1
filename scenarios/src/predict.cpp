// predict_scenario: model + platform + calibration -> compute profile -> one simulated training point
// per workers entry (searching the PS count for `ps: auto`), with efficiency vs. the 1-worker point.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>

#include "calibrate/memory.hpp"
#include "calibrate/train_memory.hpp"
#include "calibrate/profile.hpp"
#include "common/child.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/platform.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/src/layout_fit.hpp"
#include "sim/layout_bound.hpp"
#include "scenarios/src/progress.hpp"

namespace dtsim::scenarios {
namespace {

constexpr double BYTES_PER_FP32 = 4.0;
// The anchor may attribute at most this share of the measured single-worker iteration to simulated
// communication; beyond it the measurement and the simulated network contradict each other.
constexpr double MAX_ANCHOR_OVERHEAD_SHARE = 0.9;
// --ps auto: geometric candidate grid (ratio), then rounds that split the gaps around the chosen
// candidate in thirds (two counts a side: with two or more jobs a round takes the time of one point and
// narrows a gap 3x, where a bisection round narrows it 2x) until a gap is at most PS_SEARCH_RESOLUTION
// of the chosen count (or one server). 5% keeps the reported count within 2 servers at 40 and is far
// finer than what separates a user's choices of server count.
constexpr double PS_SEARCH_RATIO = 1.5;
constexpr double PS_SEARCH_RESOLUTION = 0.05;

bool is_ps(const sim::Strategy& s) { return sim::uses_servers(s); }

struct Prepared {
  platforms::Platform platform;
  calibrate::ComputeProfile profile;
  // Points whose workers span several nodes, when the framework's communication servers hold cores
  // there (FrameworkRuntime::comm_cores): the compute on the cores left. Empty otherwise.
  std::optional<calibrate::ComputeProfile> multi_node_profile;
  sim::TrainingPoint base;
  // Transformers on a parallel layout (docs/parallel-layouts.md); inactive otherwise.
  struct Layout {
    bool active = false;
    int micro_batch = 1, global_batch = 0, seq_len = 0;
    double model_flops_per_sample = 0;      // the whole model's forward + backward FLOPs of one sequence
    double recompute_flops_per_sample = 0;  // forward FLOPs recomputed in backward
    double peak_flops = 0;                  // the device's peak at the training precision
    std::shared_ptr<const models::Model> model;  // one rank's shard (stages picked by layer block)
    calibrate::TrainMemoryOptions memory;
  } layout;
};

}  // namespace

// The expensive parts of prepare(), built once per search (layout_fit.hpp): they depend only on the
// inputs in their keys, which are every field prepare() passes to the loaders.
struct LayoutCache::Impl {
  std::map<std::string, platforms::Platform> platforms;       // by platform name or file
  std::map<std::string, std::shared_ptr<const models::Model>> models;  // by model_key()
  std::map<std::string, calibrate::ComputeProfile> profiles;  // by model_key() + profile options

  static std::string model_key(const std::string& model, const models::ModelOptions& o) {
    return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model, o.batch, o.input_h, o.input_w, o.channels, o.classes,
                       o.seq_len, o.flash_attention, o.tensor_parallel, o.context_parallel, o.expert_parallel);
  }
  const platforms::Platform& platform(const std::string& name) {
    auto it = platforms.find(name);
    if (it == platforms.end()) it = platforms.emplace(name, platforms::load_platform(name)).first;
    return it->second;
  }
  std::shared_ptr<const models::Model> model(const std::string& name, const models::ModelOptions& o) {
    const std::string key = model_key(name, o);
    auto it = models.find(key);
    if (it == models.end()) it = models.emplace(key, std::make_shared<const models::Model>(models::load_model(name, o))).first;
    return it->second;
  }
  const calibrate::ComputeProfile& profile(const std::string& name, const models::ModelOptions& mo,
                                           const models::Model& m, const platforms::Device& device,
                                           const calibrate::ProfileOptions& po) {
    const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model_key(name, mo), device.name, po.threads,
                                        po.workers_per_node, po.cpu_sockets, po.db_path, calibrate::to_string(po.precision),
                                        po.backend, po.allocator, po.anchor_samples_per_s.value_or(0));
    auto it = profiles.find(key);
    if (it == profiles.end()) it = profiles.emplace(key, calibrate::build_profile(m, device, po)).first;
    return it->second;
  }
};

LayoutCache::LayoutCache() : impl_(std::make_unique<Impl>()) {}
LayoutCache::~LayoutCache() = default;

namespace {

int workers_per_node(const Prepared& p) {
  return p.base.workers_per_node > 0 ? p.base.workers_per_node : p.platform.default_workers_per_node();
}

int ps_for(const Scenario& s, std::size_t index) {
  if (s.ps.empty()) return 1;
  return s.ps.size() == 1 ? s.ps[0] : s.ps[index];
}

// Server count of the 1-worker baseline when 1 is not in the workers list: the one count given for
// every entry, else (one count per entry) the count of the smallest entry, the nearest to 1 worker.
int baseline_ps(const Scenario& s) {
  if (s.ps.size() <= 1) return ps_for(s, 0);
  const auto smallest = std::min_element(s.workers.begin(), s.workers.end()) - s.workers.begin();
  return s.ps[static_cast<std::size_t>(smallest)];
}

// The micro-batches each data-parallel replica runs per iteration: the global batch over micro-batch x dp.
void set_layout_batches(const Prepared& p, sim::TrainingPoint& point) {
  auto& l = point.layout;
  {
    sim::ParallelLayout shape = l;  // the sizes, before dividing by dp (micro-batches are checked below)
    shape.micro_batches = l.pp;
    sim::check_layout(shape, point.workers);
  }
  const int dp = point.workers / l.model_parallel();
  const long long per_step = static_cast<long long>(p.layout.micro_batch) * dp;
  const long long global = p.layout.global_batch > 0 ? p.layout.global_batch : per_step;
  if (global % per_step != 0)
    throw InputError(fmt::format("--global-batch: {} sequences are not a multiple of micro-batch x data-parallel size "
                                 "= {} x {} = {} at {} workers",
                                 global, p.layout.micro_batch, dp, per_step, point.workers));
  l.micro_batches = static_cast<int>(global / per_step);
  l.samples_per_iteration = static_cast<double>(global);
  sim::check_layout(l, point.workers);
}

sim::TrainingPoint point_of(const Prepared& p, int workers, int ps, const std::string& trace_path) {
  sim::TrainingPoint point = p.base;
  point.workers = workers;
  if (p.layout.active) set_layout_batches(p, point);
  point.ps.servers = is_ps(point.strategy) ? ps : 0;
  point.fidelity.trace_path = trace_path;
  return point;
}

const calibrate::ComputeProfile& profile_of(const Prepared& p, int workers) {
  const bool across_nodes = workers > workers_per_node(p);
  return across_nodes && p.multi_node_profile ? *p.multi_node_profile : p.profile;
}

sim::PointResult run_point(const Prepared& p, int workers, int ps, const std::string& trace_path) {
  return sim::simulate_training(p.platform, profile_of(p, workers), point_of(p, workers, ps, trace_path));
}

// The simulated points of one prediction, keyed by (workers, servers): the rest of the point is the
// prediction's own. Each is simulated once, whichever search or entry asks for it again; a batch runs
// in child processes `jobs` at a time (common/child.hpp's pool, as a sweep's points).
class PointCache {
 public:
  PointCache(const Prepared& p, int jobs) : p_(p), jobs_(jobs) {}
  using Key = std::pair<int, int>;
  static Key key(const Prepared& p, int workers, int ps) { return {workers, is_ps(p.base.strategy) ? ps : 0}; }
  // Simulates the points of `wanted` not yet simulated; the first failure (in `wanted`'s order) is
  // thrown with its kind once the batch has ended. `progress` counts the simulations.
  void run(const std::vector<Key>& wanted, Progress& progress) {
    std::vector<Key> todo;
    for (const Key& k : wanted)
      if (!done_.count(k) && std::find(todo.begin(), todo.end(), k) == todo.end()) todo.push_back(k);
    if (todo.empty()) return;
    progress.add_total(todo.size());
    // Started costliest first (a PS point's flows grow with workers x servers), so that the largest
    // point does not start last and run alone; results, and which failure is reported, do not depend
    // on the order.
    std::vector<std::size_t> order(todo.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const auto cost = [&](std::size_t i) { return double(todo[i].first) * std::max(1, todo[i].second); };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost(a) > cost(b); });
    std::map<std::size_t, std::string> errors;
    run_process_pool(
        todo.size(), jobs_,
        [&](std::size_t i) {
          const Key& k = todo[order[i]];
          return sim::to_json(run_point(p_, k.first, k.second, "")).dump();
        },
        [&](std::size_t i, bool ok, const std::string& text) {
          if (ok) done_.emplace(todo[order[i]], sim::point_result_from_json(nlohmann::json::parse(text)));
          else errors.emplace(order[i], text);
          progress.finished(!ok);
        },
        [] { return false; });
    if (errors.empty()) return;
    // The pool tags a child's error with its kind ("input error: ...", "failed: ...").
    const std::string& text = errors.begin()->second;
    constexpr std::string_view INPUT_TAG = "input error: ";
    if (text.starts_with(INPUT_TAG)) throw InputError(text.substr(INPUT_TAG.size()));
    throw Failure(text.starts_with("failed: ") ? text.substr(8) : text);
  }
  const sim::PointResult& at(int workers, int ps) const { return done_.at(key(p_, workers, ps)); }
  // Keeps a point simulated elsewhere (the traced run).
  void put(const sim::PointResult& r) { done_.insert_or_assign(key(p_, r.workers, r.ps_servers), r); }

 private:
  const Prepared& p_;
  int jobs_;
  std::map<Key, sim::PointResult> done_;
};

// The best server count of one workers entry: a geometric grid, then rounds that split the gaps between
// the chosen count and its tried neighbours in thirds until they are within PS_SEARCH_RESOLUTION. The
// chosen count is the fewest whose throughput is within PS_TIE_TOLERANCE of the best tried. What a round tries depends only on the
// results before it, so the answer does not depend on how many points run at once.
class PsSearch {
 public:
  PsSearch(const Prepared& p, int workers) : workers_(workers) {
    const int wpn = workers_per_node(p);
    const int max_dedicated = p.base.ps.placement == sim::PsPlacement::DEDICATED
                                  ? p.platform.nodes - (workers + wpn - 1) / wpn
                                  : workers;
    max_ps_ = std::max(1, std::min(workers, max_dedicated));
  }
  int workers() const { return workers_; }

  // The counts to simulate next; none once the search has settled.
  std::vector<int> next(const PointCache& cache) {
    std::vector<int> out;
    if (tried_.empty()) {
      std::set<int> grid{1, max_ps_};
      for (double x = 1; x < max_ps_; x *= PS_SEARCH_RATIO) grid.insert(static_cast<int>(std::lround(x)));
      out.assign(grid.begin(), grid.end());
    } else if (rounds_ < MAX_ROUNDS) {
      ++rounds_;
      const int best = chosen(cache);
      const auto it = tried_.find(best);
      const int lo = it == tried_.begin() ? best : *std::prev(it);
      const int hi = std::next(it) == tried_.end() ? best : *std::next(it);
      // Below: a smaller count may tie. Above: only when the next count is worse (a plateau of tied
      // counts has nothing better inside it to find).
      const int resolution = std::max(1, static_cast<int>(PS_SEARCH_RESOLUTION * best));
      const auto thirds = [&](int a, int b) {
        if (b - a <= resolution) return;
        for (int k : {1, 2}) {
          const int n = a + static_cast<int>(std::lround((b - a) * k / 3.0));
          if (n > a && n < b && !tried_.count(n) && std::find(out.begin(), out.end(), n) == out.end())
            out.push_back(n);
        }
      };
      thirds(lo, best);
      if (!ties(cache, hi)) thirds(best, hi);
    }
    tried_.insert(out.begin(), out.end());
    return out;
  }

  int most_tried() const { return tried_.empty() ? 0 : *tried_.rbegin(); }
  // The fewest servers within the tolerance of the best throughput tried.
  int chosen(const PointCache& cache) const { return tied(cache).front(); }
  // Every tried count within the tolerance of the best, fewest first.
  std::vector<int> tied(const PointCache& cache) const {
    std::vector<int> out;
    for (int n : tried_)
      if (ties(cache, n)) out.push_back(n);
    return out;
  }

 private:
  static constexpr int MAX_ROUNDS = 64;
  bool ties(const PointCache& cache, int n) const {
    double best = 0;
    for (int m : tried_) best = std::max(best, cache.at(workers_, m).throughput);
    return cache.at(workers_, n).throughput >= best * (1 - PS_TIE_TOLERANCE);
  }
  int workers_;
  int max_ps_ = 1;
  std::set<int> tried_;
  int rounds_ = 0;
};

// Runs `load` and, when `field` came from the scenario file, prefixes its InputError with the
// field's file:line (the message of an unknown name or a bad model file names neither).
template <class Fn>
auto from_field(const Scenario& s, const std::string& field, Fn&& load) {
  try {
    return load();
  } catch (const InputError& e) {
    const auto it = s.field_origin.find(field);
    if (it == s.field_origin.end()) throw;
    throw InputError(fmt::format("{}: field '{}': {}", it->second, field, e.what()));
  }
}

// Checks of the simulation name the flag ("--workers: ..."); when the value came from the
// scenario file instead, the message names the file, line and field.
[[noreturn]] void rethrow_for_file(const Scenario& s, const InputError& e) {
  const std::string msg = e.what();
  const std::size_t colon = msg.find(':');
  if (colon != std::string::npos) {
    std::string field = msg.substr(0, colon);
    if (field.starts_with("--")) field = field.substr(2);
    std::replace(field.begin(), field.end(), '-', '_');
    const std::string top = field.substr(0, field.find('.'));
    if (const auto it = s.field_origin.find(top); it != s.field_origin.end())
      throw InputError(fmt::format("{}: field '{}':{}", it->second, field, msg.substr(colon + 1)));
  }
  throw e;
}

// A parameter server applies each worker's gradient with the optimizer on its node's CPU (TensorFlow's
// parameter_server and distributed_replicated modes: every worker runs apply_gradients on the PS-resident
// variables; MXNet's servers merge every push). Its cost per gradient byte is the calibrated optimizer
// step of the whole model on one CPU socket (all its cores, the server process's thread pool) over the
// worker profile's gradient bytes at the training precision (FP32 master weights either way).
double server_apply_s_per_B(const models::Model& model, const platforms::Platform& platform,
                            const calibrate::ComputeProfile& worker, const std::string& db_path) {
  calibrate::ProfileOptions po;
  po.db_path = db_path;
  po.backend = "onednn";
  po.workers_per_node = 1;
  po.cpu_sockets = 1;
  po.threads = platform.cpu_device().cores;
  const double grad_B = static_cast<double>(worker.grad_bytes());
  return grad_B > 0 ? calibrate::build_profile(model, platform.cpu_device(), po).update_s / grad_B : 0.0;
}

// Transformers take the layout planner under an allreduce strategy whose runtime it models (no Horovod
// cycle, negotiation or fusion copies); parameter servers and nn.DataParallel keep their own families.
bool layout_applies(const Scenario& s) {
  const auto& f = s.point.runtime.framework;
  return s.point.strategy.exchange == "allreduce" && s.point.runtime.cycle_s <= 0 && !f.negotiation &&
         f.copy_min_items == 0;
}

// The layout's derived bytes, the model FLOPs behind MFU and the memory options of every stage.
void prepare_layout(Prepared& p, const Scenario& s, const models::ModelOptions& mo,
                    const std::shared_ptr<const models::Model>& shard_model, const platforms::Device& device,
                    LayoutCache::Impl* cache) {
  const models::Model& shard = *shard_model;
  auto& L = p.layout;
  auto& lay = p.base.layout;
  L.micro_batch = mo.batch;
  L.global_batch = s.global_batch;
  const double elem = calibrate::element_bytes(s.precision);
  std::int64_t hidden = 0, seq_local = 0, kv_channels = 0, top_k = 0;
  for (const auto& l : shard.layers()) {
    if (!l.row) continue;
    const std::string op(models::op_name(l));
    if ((op == "embedding" || op == "patch_embed") && hidden == 0) {
      hidden = l.dst_shape.c;
      seq_local = l.dst_shape.h;
    }
    if (op == "attention" && kv_channels == 0) kv_channels = l.src_shapes.front().c - l.dst_shape.c;
    if (op == "moe_experts" && top_k == 0) top_k = l.params.seq.top_k;
  }
  L.seq_len = static_cast<int>(seq_local * lay.cp);
  const double tokens = static_cast<double>(mo.batch) * static_cast<double>(seq_local);  // per micro-batch and rank
  lay.tp_bytes = tokens * static_cast<double>(hidden) * elem;
  lay.pp_bytes = lay.tp_bytes / (lay.sequence_parallel ? lay.tp : 1);
  lay.cp_kv_bytes = tokens * static_cast<double>(lay.cp) * static_cast<double>(kv_channels) * elem;
  lay.ep_bytes = tokens * static_cast<double>(top_k) * static_cast<double>(hidden) * elem;
  lay.param_bytes_per_grad_byte = 1;  // weights gathered at the precision gradients are reduced in
  // Model FLOPs: the unsharded model's own counts at one sequence with dense attention over all s^2 pairs
  // (Megatron-LM's and PaLM's convention for MFU); recomputation adds forward FLOPs of blocks (full) or
  // of the attention cores (selective).
  models::ModelOptions whole = mo;
  whole.batch = 1;
  whole.flash_attention = false;
  whole.tensor_parallel = whole.context_parallel = whole.expert_parallel = 1;
  const auto full_model = cache ? cache->model(s.model, whole) : std::make_shared<const models::Model>(models::load_model(s.model, whole));
  const models::Model& full = *full_model;
  for (const auto& l : full.layers()) {
    if (l.op == models::OpKind::INPUT) continue;
    L.model_flops_per_sample += l.costs.fwd_flops + l.costs.bwd_data_flops + l.costs.bwd_weights_flops;
    const bool block = l.row && l.params.seq.block >= 0;
    if ((lay.recompute == "full" && block) || (lay.recompute == "selective" && std::string(models::op_name(l)) == "attention"))
      L.recompute_flops_per_sample += l.costs.fwd_flops;
  }
  L.peak_flops = device.kind == platforms::DeviceKind::GPU ? calibrate::precision_peak_flops(device, s.precision)
                                                           : device.peak_flops;
  L.model = shard_model;
  L.memory.precision = std::string(calibrate::to_string(s.precision));
  L.memory.recompute = calibrate::recompute_by_name(lay.recompute);
  L.memory.zero_stage = lay.zero;
  L.memory.sequence_parallel = lay.sequence_parallel ? lay.tp : 1;
}

// Memory of the fullest rank of a layout at `point` (its dp and micro-batches): every pipeline rank's layers
// with the activations its schedule keeps (1F1B: up to pp - s micro-batches on stage s; interleaved: its
// warm-up's chunk forwards; GPipe: all), ZeRO over the data-parallel group with the context-parallel ranks
// (they hold the same weights: sim/src/plan/layout.cpp).
calibrate::TrainMemory layout_memory(const Prepared& p, const sim::TrainingPoint& point, const platforms::Device& device) {
  const auto& lay = point.layout;
  const int dp = point.workers / lay.model_parallel();
  int blocks = 0;
  for (const auto& l : p.layout.model->layers())
    if (l.row && l.params.seq.block >= 0) blocks = std::max(blocks, static_cast<int>(l.params.seq.block) + 1);
  const auto per_chunk = sim::layout_chunk_blocks(lay, blocks);
  std::vector<int> chunk_of_block;
  for (std::size_t c = 0; c < per_chunk.size(); ++c)
    for (int b = 0; b < per_chunk[c]; ++b) chunk_of_block.push_back(static_cast<int>(c));
  const int chunks = lay.pp * lay.vp, m = lay.micro_batches;
  calibrate::TrainMemory worst;
  for (int s = 0; s < lay.pp; ++s) {
    calibrate::TrainMemoryOptions o = p.layout.memory;
    o.dp = dp * lay.cp;
    bool seen = false;
    o.include = [&, s](const models::Layer& l) {
      int chunk = 0;
      if (l.row && l.params.seq.block >= 0) {
        chunk = chunk_of_block[static_cast<std::size_t>(l.params.seq.block)];
        seen = true;
      } else {
        chunk = seen ? chunks - 1 : 0;
      }
      return chunk % lay.pp == s;
    };
    if (lay.schedule == "gpipe") o.activation_sets = m;
    else if (lay.vp > 1) o.activation_sets = std::min(m * lay.vp, (lay.pp - s - 1) * 2 + (lay.vp - 1) * lay.pp + 1) / double(lay.vp);
    else o.activation_sets = std::min(m, lay.pp - s);
    o.activation_sets = std::max(1.0, o.activation_sets);
    const auto mem = calibrate::estimate_train_memory(*p.layout.model, o, device);
    if (mem.total_B() > worst.total_B()) worst = mem;
  }
  return worst;
}

// `cache`: the platform, models and profiles of earlier calls with the same inputs (a search's candidates).
Prepared prepare(const Scenario& s, LayoutCache::Impl* cache = nullptr) {
  Prepared p;
  p.platform = from_field(s, "platform", [&] { return cache ? cache->platform(s.platform) : platforms::load_platform(s.platform); });
  models::ModelOptions mo;
  mo.batch = s.batch;
  mo.input_h = s.input_h;
  mo.input_w = s.input_w;
  mo.classes = s.classes;
  const auto load = [&] {
    return cache ? cache->model(s.model, mo) : std::make_shared<const models::Model>(models::load_model(s.model, mo));
  };
  std::shared_ptr<const models::Model> model_ptr = from_field(s, "model", load);
  const models::Model* model = model_ptr.get();
  const bool transformer = model->has_rows();
  if (!transformer && (s.micro_batch || s.global_batch || s.point.layout != sim::ParallelLayout{}))
    throw InputError(fmt::format("--micro-batch, --global-batch and the layout flags (--tp, --pp, --zero ...) apply to "
                                 "transformers; model '{}' is a CNN",
                                 model->name()));
  if (transformer) {
    // Transformers are built at the micro-batch and sequence, with fused attention unless told otherwise and,
    // on a parallel layout, as one rank's shard.
    mo.batch = s.micro_batch > 0 ? s.micro_batch : s.batch;
    mo.seq_len = s.seq_len;
    mo.flash_attention = s.flash_attention;
    mo.mlm_predictions = s.mlm_predictions;
    p.layout.active = layout_applies(s);
    if (!p.layout.active && s.point.layout != sim::ParallelLayout{})
      throw InputError(
          fmt::format("--tp, --pp, --zero and the other layout flags need an allreduce strategy without "
                      "Horovod's cycle (strategy {}, framework {})",
                      s.point.strategy.name(), s.point.runtime.framework.name));
    if (p.layout.active) {
      mo.tensor_parallel = s.point.layout.tp;
      mo.replicated_vocab = s.point.layout.replicated_vocab;
      mo.context_parallel = s.point.layout.cp;
      mo.expert_parallel = s.point.layout.ep;
    }
    model_ptr = from_field(s, "model", load);
    model = model_ptr.get();
  }
  calibrate::ProfileOptions po;
  po.threads = s.threads;
  po.workers_per_node = s.point.workers_per_node > 0 ? s.point.workers_per_node : p.platform.default_workers_per_node();
  po.cpu_sockets = p.platform.node.cpu_sockets;
  po.db_path = s.db_path;
  po.precision = s.precision;
  po.backend = s.point.runtime.framework.calibration;
  po.allocator = s.allocator;
  const auto& device = p.platform.worker_device();
  if (!s.allow_oversubscribe && !p.layout.active)
    calibrate::check_memory_fits(calibrate::estimate_memory(*model, s.precision, device), *model, device);
  p.profile = cache ? cache->profile(s.model, mo, *model, device, po) : calibrate::build_profile(*model, device, po);
  p.base = s.point;
  if (p.layout.active) prepare_layout(p, s, mo, model_ptr, device, cache);
  const bool across_nodes = !s.workers.empty() && *std::max_element(s.workers.begin(), s.workers.end()) > po.workers_per_node;
  if (const int comm_cores = s.point.runtime.framework.comm_cores_on(device);
      comm_cores > 0 && across_nodes) {
    // Intel Caffe's launcher: OMP_NUM_THREADS = the process's cores less the servers' on runs across
    // nodes; threads given explicitly are kept, and must leave the servers their cores.
    const int per_process = std::max(1, device.cores * po.cpu_sockets / po.workers_per_node);
    if (s.threads > 0 && s.threads + comm_cores > per_process)
      throw InputError(fmt::format(
          "--threads: {} threads per process leave no room for the {} cores that {}'s "
          "communication servers hold on runs across nodes ({} cores per process); expected <= {}",
          s.threads, comm_cores, s.point.runtime.framework.name, per_process, per_process - comm_cores));
    if (s.threads == 0 && per_process <= comm_cores)
      throw InputError(fmt::format(
          "--workers-per-node: {} processes per node leave {} cores each, none for compute beside "
          "the {} cores that {}'s communication servers hold on runs across nodes",
          po.workers_per_node, per_process, comm_cores, s.point.runtime.framework.name));
    calibrate::ProfileOptions multi = po;
    multi.threads = s.threads > 0 ? s.threads : per_process - comm_cores;
    p.multi_node_profile = calibrate::build_profile(*model, device, multi);
  }
  if (is_ps(p.base.strategy))
    p.base.ps.apply_s_per_B = server_apply_s_per_B(*model, p.platform, p.profile, s.db_path);
  p.base.input.scattered_bytes_per_sample =
      static_cast<double>(model->input_shape().per_sample()) * BYTES_PER_FP32;
  const auto& last = model->layers().back();
  p.base.input.gathered_bytes_per_sample =
      static_cast<double>(last.src_shapes.empty() ? last.dst_shape.per_sample()
                                                  : last.src_shapes[0].per_sample()) *
      BYTES_PER_FP32;
  if (p.base.input.data == sim::DataMode::REAL && p.base.input.sample_bytes <= 0)
    p.base.input.sample_bytes = IMAGENET_MEAN_SAMPLE_BYTES;
  return p;
}

// Fixes the compute scale so that the simulated single-worker throughput (compute plus whatever
// communication the strategy does with one worker) equals the measured one.
void apply_anchor(Prepared& p, const Scenario& s, double samples_per_s) {
  const double target_s = s.batch / samples_per_s;
  calibrate::anchor_profile(p.profile, samples_per_s);
  int ps1 = baseline_ps(s);
  for (std::size_t i = 0; i < s.workers.size(); ++i)
    if (s.workers[i] == 1 && !s.ps.empty()) ps1 = ps_for(s, i);
  const sim::PointResult one = run_point(p, 1, ps1, "");
  const double overhead_s = one.iteration_time_s - p.profile.step_compute_s();
  const double compute_s = target_s - std::max(0.0, overhead_s);
  if (compute_s < (1 - MAX_ANCHOR_OVERHEAD_SHARE) * target_s)
    throw InputError(fmt::format("--anchor: {} samples/s leaves no time for compute: one simulated worker already "
                                 "spends {:.3f} s of the {:.3f} s iteration communicating",
                                 samples_per_s, overhead_s, target_s));
  calibrate::anchor_profile(p.profile, s.batch / compute_s);
  // The anchor corrects the calibration, not the cores: the multi-node compute takes the same factor.
  if (p.multi_node_profile)
    calibrate::anchor_profile(*p.multi_node_profile,
                              s.batch / (p.multi_node_profile->step_compute_s() * p.profile.anchor_factor));
}

// Where a layout point's iteration goes on rank 0 (the first pipeline rank), largest first: compute (of
// which recompute), the pipeline bubble on an ideal network, tensor/context/expert collectives on the
// compute stream, data-parallel communication after the last backward, and the rest of the waiting
// (pipeline transfers, stage imbalance, ZeRO gathers not hidden).
std::string explain_layout(const sim::PointResult& r, const sim::ParallelLayout& l) {
  const auto& b = r.breakdown;
  const double it = r.iteration_time_s;
  if (!(it > 0)) return "";
  std::vector<std::pair<double, std::string>> parts;
  parts.emplace_back(b.compute_s - b.recompute_s, "compute");
  if (b.recompute_s > 0) parts.emplace_back(b.recompute_s, "recompute (" + l.recompute + ")");
  const double bubble = std::min(b.bubble_s, std::max(0.0, it - b.compute_s - b.local_collectives_s));
  if (bubble > 0) parts.emplace_back(bubble, "pipeline bubble");
  if (b.local_collectives_s > 0) parts.emplace_back(b.local_collectives_s, "tensor/context/expert collectives");
  const double dp = std::min(b.exposed_after_backward_s, std::max(0.0, it - b.compute_s - b.local_collectives_s - bubble));
  if (dp > 0) parts.emplace_back(dp, l.zero >= 1 ? "exposed data-parallel/ZeRO communication" : "exposed data-parallel allreduce");
  double known = 0;
  for (const auto& [s, what] : parts) known += s;
  if (it - known > 1e-3 * it)
    parts.emplace_back(it - known, "other waiting (pipeline transfers, stage imbalance, ZeRO gathers)");
  std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string out = fmt::format("{} workers, rank 0's {:.1f} ms iteration: ", r.workers, it * 1e3);
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += fmt::format("{}{} {:.1f} ms ({:.0f}%)", i ? ", " : "", parts[i].second, parts[i].first * 1e3,
                       100 * parts[i].first / it);
  out += fmt::format(". MFU {:.1f}%, {:.0f} tokens/s, {:.1f} GiB on the fullest rank.", 100 * r.mfu, r.tokens_per_s,
                     r.memory_per_device_B / (1024.0 * 1024 * 1024));
  return out;
}

// Transformer outputs of each layout point (tokens/s, model and hardware TFLOP/s per device, MFU, HFU, memory)
// and efficiency against the smallest entry's throughput per device.
std::vector<sim::PointResult> finish_layout(const Prepared& p, std::vector<sim::PointResult> out) {
  const auto& device = p.platform.worker_device();
  double base_per_device = 0;
  int base_workers = 0;
  for (const auto& r : out)
    if (base_workers == 0 || r.workers < base_workers) {
      base_workers = r.workers;
      base_per_device = r.throughput / r.workers;
    }
  for (auto& r : out) {
    const sim::TrainingPoint point = point_of(p, r.workers, 0, "");
    r.tokens_per_s = r.throughput * p.layout.seq_len;
    const double per_device = r.throughput / r.workers;
    r.model_tflops_per_device = per_device * p.layout.model_flops_per_sample / 1e12;
    r.hardware_tflops_per_device =
        per_device * (p.layout.model_flops_per_sample + p.layout.recompute_flops_per_sample) / 1e12;
    r.mfu = p.layout.peak_flops > 0 ? r.model_tflops_per_device * 1e12 / p.layout.peak_flops : 0;
    r.hfu = p.layout.peak_flops > 0 ? r.hardware_tflops_per_device * 1e12 / p.layout.peak_flops : 0;
    r.memory_per_device_B = layout_memory(p, point, device).total_B();
    r.efficiency = base_per_device > 0 ? per_device / base_per_device : 0;
    r.bottleneck = explain_layout(r, point.layout);
  }
  return out;
}

std::vector<sim::PointResult> predict_checked(const Scenario& s, const PredictOptions& options,
                                              LayoutCache::Impl* layout_cache = nullptr) {
  if (options.jobs < 1) throw InputError(fmt::format("--jobs must be >= 1, got {}", options.jobs));
  check_scenario(s);
  Prepared p = prepare(s, layout_cache);
  if (s.anchor_samples_per_s) apply_anchor(p, s, *s.anchor_samples_per_s);
  const bool ps = is_ps(p.base.strategy);
  const bool search = ps && s.ps_auto;
  // Efficiency is against the 1-worker prediction, which must not depend on whether 1 is in the list:
  // it is the point a 1-worker entry would get (simulated only if 1 is not listed).
  const bool one_listed = std::find(s.workers.begin(), s.workers.end(), 1) != s.workers.end();
  PointCache cache(p, options.jobs);
  Progress progress(search && options.progress, 0, 0, "ps auto", "server counts");
  // Every entry's server count: given, or searched (all searches advance together, a round at a time).
  std::vector<int> servers(s.workers.size());
  int baseline_servers = baseline_ps(s);
  std::vector<PsSearch> searches;
  if (search) {
    // A set-up no server count makes possible (workers that need more nodes than the platform has) is
    // refused before any candidate is simulated: one server is the count that needs the fewest nodes.
    for (int w : s.workers) sim::check_training(p.platform, profile_of(p, w), point_of(p, w, 1, ""));
    for (int w : s.workers) searches.emplace_back(p, w);
    if (!one_listed) searches.emplace_back(p, 1);
    for (;;) {
      std::vector<PointCache::Key> wanted;
      for (auto& ps_search : searches)
        for (int n : ps_search.next(cache)) wanted.push_back(PointCache::key(p, ps_search.workers(), n));
      if (wanted.empty()) break;
      cache.run(wanted, progress);
    }
    for (std::size_t i = 0; i < s.workers.size(); ++i) servers[i] = searches[i].chosen(cache);
    if (!one_listed) baseline_servers = searches.back().chosen(cache);
  } else if (p.layout.active) {
    // Layouts: every entry's layout and memory checked before any simulation; no 1-worker baseline (a
    // layout needs tp x pp x cp ranks), efficiency is against the smallest entry (finish_layout).
    const auto& device = p.platform.worker_device();
    for (int w : s.workers) {
      const sim::TrainingPoint point = point_of(p, w, 0, "");
      const auto mem = layout_memory(p, point, device);
      if (!s.allow_oversubscribe && device.kind == platforms::DeviceKind::GPU && device.mem_capacity_B > 0 &&
          mem.total_B() > device.mem_capacity_B)
        throw InputError(fmt::format("model '{}' does not fit on '{}' ({:.2f} GiB) at {} workers with this layout: the "
                                     "fullest rank needs {} (use --allow-oversubscribe to predict anyway, or shard more: "
                                     "--zero, --tp, --pp, --recompute)",
                                     p.profile.model, device.name, device.mem_capacity_B / (1024.0 * 1024 * 1024), w,
                                     calibrate::describe(mem)));
    }
    if (!s.point.fidelity.trace_path.empty())
      cache.put(run_point(p, s.workers.back(), 0, s.point.fidelity.trace_path));
    std::vector<PointCache::Key> wanted;
    for (int w : s.workers) wanted.push_back(PointCache::key(p, w, 0));
    cache.run(wanted, progress);
    for (std::size_t i = 0; i < s.workers.size(); ++i) servers[i] = 0;
  } else {
    for (std::size_t i = 0; i < s.workers.size(); ++i) servers[i] = ps_for(s, i);
    // The last entry's point writes the trace: simulated on its own, then cached like the others.
    if (!s.point.fidelity.trace_path.empty())
      cache.put(run_point(p, s.workers.back(), servers.back(), s.point.fidelity.trace_path));
    std::vector<PointCache::Key> wanted;
    for (std::size_t i = 0; i < s.workers.size(); ++i) wanted.push_back(PointCache::key(p, s.workers[i], servers[i]));
    if (!one_listed) wanted.push_back(PointCache::key(p, 1, baseline_servers));
    cache.run(wanted, progress);
  }
  std::vector<sim::PointResult> out;
  for (std::size_t i = 0; i < s.workers.size(); ++i) out.push_back(cache.at(s.workers[i], servers[i]));
  if (p.layout.active) return finish_layout(p, std::move(out));
  std::optional<sim::PointResult> baseline;
  for (const auto& r : out)
    if (r.workers == 1) baseline = r;
  if (!baseline) baseline = cache.at(1, baseline_servers);
  // A search writes the trace by one more run of the count it chose (its candidates wrote none).
  if (search && !s.point.fidelity.trace_path.empty())
    out.back() = run_point(p, s.workers.back(), servers.back(), s.point.fidelity.trace_path);

  const double one = baseline->throughput;
  ExplainContext context;
  context.parameter_servers = ps;
  context.batch_input_bytes = p.profile.batch * p.base.input.sample_bytes;
  context.network = p.platform.network.technology;
  context.device = p.profile.device;
  context.dedicated_servers = ps && p.base.ps.placement == sim::PsPlacement::DEDICATED;
  context.single_node = sim::single_node_only(p.base.strategy);
  context.fusion_bytes = p.base.runtime.fusion_bytes;
  context.baseline = baseline;
  context.baseline->efficiency = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto& r = out[i];
    r.efficiency = one > 0 ? r.throughput / (r.workers * one) : 0;
    std::string search_note;
    ExplainContext point_context = context;
    if (search) {
      std::vector<sim::PointResult> tied;
      for (int n : searches[i].tied(cache)) tied.push_back(cache.at(r.workers, n));
      search_note = ps_tie_sentence(tied, context, PS_TIE_TOLERANCE);
      point_context.most_servers_tried = searches[i].most_tried();
    }
    r.bottleneck = explain_point(r, point_context, search_note);
  }
  return out;
}
}  // namespace

ComputeSource compute_source(const Scenario& s) {
  try {
    check_scenario(s);
    const Prepared p = prepare(s);
    return {s.point.runtime.framework.calibration,
            p.profile.calibration_backend,
            p.profile.coverage,
            p.profile.model,
            p.profile.device,
            p.profile.batch,
            calibrate::describe_sources(p.profile)};
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

std::vector<sim::PointResult> predict_scenario(const Scenario& s, const PredictOptions& options) {
  try {
    return predict_checked(s, options);
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

LayoutFit layout_fit(const Scenario& s, LayoutCache* cache) {
  try {
    check_scenario(s);
    const Prepared p = prepare(s, cache ? cache->impl() : nullptr);
    if (!p.layout.active)
      throw InputError(fmt::format("model '{}' on strategy {}: not a transformer on a parallel layout", s.model,
                                   s.point.strategy.name()));
    const int w = s.workers.front();
    const sim::TrainingPoint point = point_of(p, w, 0, "");
    sim::check_training(p.platform, profile_of(p, w), point);
    const auto& device = p.platform.worker_device();
    const bool checked = !s.allow_oversubscribe && device.kind == platforms::DeviceKind::GPU && device.mem_capacity_B > 0;
    return {layout_memory(p, point, device).total_B(), checked ? static_cast<double>(device.mem_capacity_B) : 0.0};
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

double layout_lower_bound_s(const Scenario& s, LayoutCache& cache) {
  try {
    check_scenario(s);
    // An anchored profile is scaled by a simulation of its own: no bound without running it.
    if (s.anchor_samples_per_s) return 0;
    const Prepared p = prepare(s, cache.impl());
    if (!p.layout.active) return 0;
    const int w = s.workers.front();
    return sim::layout_iteration_lower_bound_s(p.platform, profile_of(p, w), point_of(p, w, 0, ""));
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

std::vector<sim::PointResult> predict_layout(const Scenario& s, LayoutCache& cache) {
  try {
    return predict_checked(s, PredictOptions{}, cache.impl());
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

}  // namespace dtsim::scenarios
