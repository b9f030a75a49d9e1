// predict_scenario: model + platform + calibration -> compute profile -> one simulated training point
// per workers entry (searching the PS count for `ps: auto`), with efficiency vs. the 1-worker point.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "calibrate/memory.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/platform.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::scenarios {
namespace {

constexpr double BYTES_PER_FP32 = 4.0;
// The anchor may attribute at most this share of the measured single-worker iteration to simulated
// communication; beyond it the measurement and the simulated network contradict each other.
constexpr double MAX_ANCHOR_OVERHEAD_SHARE = 0.9;
// --ps auto: geometric candidate grid (ratio) refined by bisection around the best candidate.
constexpr double PS_SEARCH_RATIO = 1.5;

bool is_ps(const sim::Strategy& s) { return sim::uses_servers(s); }

struct Prepared {
  platforms::Platform platform;
  calibrate::ComputeProfile profile;
  sim::TrainingPoint base;
};

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

sim::PointResult run_point(const Prepared& p, int workers, int ps, const std::string& trace_path) {
  sim::TrainingPoint point = p.base;
  point.workers = workers;
  point.ps_servers = is_ps(point.strategy) ? ps : 0;
  point.trace_path = trace_path;
  return sim::simulate_training(p.platform, p.profile, point);
}

// Best server count for one point: a geometric grid, then bisection between the best's neighbours.
sim::PointResult search_ps(const Prepared& p, int workers, const std::string& trace_path) {
  const int wpn = p.base.workers_per_node > 0 ? p.base.workers_per_node : p.platform.default_workers_per_node();
  const int max_dedicated =
      p.base.ps_placement == sim::PsPlacement::DEDICATED ? p.platform.nodes - (workers + wpn - 1) / wpn : workers;
  const int max_ps = std::max(1, std::min(workers, max_dedicated));
  std::map<int, sim::PointResult> tried;
  auto eval = [&](int n) -> const sim::PointResult& {
    auto it = tried.find(n);
    if (it == tried.end()) it = tried.emplace(n, run_point(p, workers, n, "")).first;
    return it->second;
  };
  std::set<int> grid{1, max_ps};
  for (double x = 1; x < max_ps; x *= PS_SEARCH_RATIO) grid.insert(static_cast<int>(std::lround(x)));
  for (int n : grid) eval(n);
  auto best_of = [&] {
    return std::max_element(tried.begin(), tried.end(), [](const auto& a, const auto& b) {
             return a.second.throughput < b.second.throughput;
           })->first;
  };
  // Refine: look at the midpoints on both sides of the best until the gaps close.
  for (int guard = 0; guard < 64; ++guard) {
    const int best = best_of();
    auto it = tried.find(best);
    const int lo = it == tried.begin() ? best : std::prev(it)->first;
    const int hi = std::next(it) == tried.end() ? best : std::next(it)->first;
    bool progressed = false;
    for (int mid : {(lo + best) / 2, (best + hi + 1) / 2}) {
      if (mid != best && !tried.count(mid)) {
        eval(mid);
        progressed = true;
      }
    }
    if (!progressed) break;
  }
  const int best = best_of();
  if (!trace_path.empty()) return run_point(p, workers, best, trace_path);
  return tried.at(best);
}

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

Prepared prepare(const Scenario& s) {
  Prepared p;
  p.platform = from_field(s, "platform", [&] { return platforms::load_platform(s.platform); });
  models::ModelOptions mo;
  mo.batch = s.batch;
  mo.input_h = s.input_h;
  mo.input_w = s.input_w;
  mo.classes = s.classes;
  const models::Model model = from_field(s, "model", [&] { return models::load_model(s.model, mo); });
  calibrate::ProfileOptions po;
  po.threads = s.threads;
  po.workers_per_node = s.point.workers_per_node > 0 ? s.point.workers_per_node : p.platform.default_workers_per_node();
  po.cpu_sockets = p.platform.node.cpu_sockets;
  po.db_path = s.db_path;
  po.precision = s.precision;
  po.backend = s.point.framework.calibration;
  const auto& device = p.platform.worker_device();
  if (!s.allow_oversubscribe)
    calibrate::check_memory_fits(calibrate::estimate_memory(model, s.precision, device), model, device);
  p.profile = calibrate::build_profile(model, device, po);
  p.base = s.point;
  p.base.input_bytes_per_sample = static_cast<double>(model.input_shape().per_sample()) * BYTES_PER_FP32;
  const auto& last = model.layers().back();
  p.base.output_bytes_per_sample =
      static_cast<double>(last.src_shapes.empty() ? last.dst_shape.per_sample() : last.src_shapes[0].per_sample()) *
      BYTES_PER_FP32;
  if (p.base.data == sim::DataMode::REAL && p.base.sample_bytes <= 0) p.base.sample_bytes = IMAGENET_MEAN_SAMPLE_BYTES;
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
}

std::vector<sim::PointResult> predict_checked(const Scenario& s) {
  check_scenario(s);
  Prepared p = prepare(s);
  if (s.anchor_samples_per_s) apply_anchor(p, s, *s.anchor_samples_per_s);
  std::vector<sim::PointResult> out;
  const bool ps = is_ps(p.base.strategy);
  for (std::size_t i = 0; i < s.workers.size(); ++i) {
    const std::string trace = i + 1 == s.workers.size() ? s.point.trace_path : "";
    if (ps && s.ps_auto) {
      out.push_back(search_ps(p, s.workers[i], trace));
    } else {
      out.push_back(run_point(p, s.workers[i], ps_for(s, i), trace));
    }
  }
  // Efficiency against the 1-worker prediction, which must not depend on whether 1 is in the list:
  // it is the point a 1-worker entry would get (simulated once more only if 1 is not listed).
  std::optional<sim::PointResult> baseline;
  for (const auto& r : out)
    if (r.workers == 1) baseline = r;
  if (!baseline) {
    if (ps && s.ps_auto) baseline = search_ps(p, 1, "");
    else baseline = run_point(p, 1, baseline_ps(s), "");
  }
  const double one = baseline->throughput;
  ExplainContext context;
  context.parameter_servers = ps;
  context.batch_input_bytes = p.profile.batch * p.base.sample_bytes;
  context.network = p.platform.network.technology;
  context.device = p.profile.device;
  context.dedicated_servers = ps && p.base.ps_placement == sim::PsPlacement::DEDICATED;
  context.single_node = sim::single_node_only(p.base.strategy);
  context.fusion_bytes = p.base.fusion_bytes;
  context.baseline = baseline;
  context.baseline->efficiency = 1;
  for (auto& r : out) {
    r.efficiency = one > 0 ? r.throughput / (r.workers * one) : 0;
    r.bottleneck = explain_point(r, context);
  }
  return out;
}
}  // namespace

ComputeSource compute_source(const Scenario& s) {
  try {
    check_scenario(s);
    const Prepared p = prepare(s);
    return {s.point.framework.calibration, p.profile.calibration_backend, p.profile.coverage};
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

std::vector<sim::PointResult> predict_scenario(const Scenario& s) {
  try {
    return predict_checked(s);
  } catch (const InputError& e) {
    rethrow_for_file(s, e);
  }
}

}  // namespace dtsim::scenarios
