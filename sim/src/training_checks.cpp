// Input checks for simulate_training: every absurd value becomes a one-line InputError naming the flag.
#include "sim/src/training_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/errors.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {
// Upper bounds that keep a prediction finite in time and memory, not physical limits.
constexpr int MAX_WORKERS = 1 << 20;
constexpr int MAX_ITERATIONS = 1000;
constexpr int MAX_PREFETCH = 1000;
constexpr double MAX_CYCLE_S = 10.0;
constexpr double MAX_SLOWDOWN = 1000.0;
constexpr double MAX_JITTER_CV = 10.0;

bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }
}  // namespace

int resolved_iterations(const TrainingPoint& point) {
  if (point.fidelity.iterations > 0) return point.fidelity.iterations;
  const int by_strategy = asynchronous(point.strategy) ? ASYNC_ITERATIONS : SYNC_ITERATIONS;
  if (point.fidelity.trace_path.empty()) return by_strategy;
  return std::max(by_strategy, std::clamp(point.fidelity.trace_iterations, 0, MAX_ITERATIONS - 1) + 1);
}

int effective_workers_per_node(const platforms::Platform& platform, const TrainingPoint& point) {
  const int wpn = point.workers_per_node > 0 ? point.workers_per_node : platform.default_workers_per_node();
  return std::max(1, std::min(wpn, point.workers));
}

Layout check_training_point(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                            const TrainingPoint& point) {
  const std::string& pname = platform.name;
  strategy_by_name(point.strategy.name());  // a strategy built in code is checked like a typed one
  if (point.workers < 1 || point.workers > MAX_WORKERS)
    throw InputError(fmt::format("--workers: expected 1..{} workers, got {}", MAX_WORKERS, point.workers));
  if (point.workers_per_node < 0)
    throw InputError(fmt::format("--workers-per-node: expected >= 1, got {}", point.workers_per_node));
  if (platform.has_gpus() && point.workers_per_node > platform.node.gpus)
    throw InputError(fmt::format("--workers-per-node: platform '{}' has {} GPUs per node, got {}", pname,
                                 platform.node.gpus, point.workers_per_node));
  if (profile.batch < 1) throw InputError(fmt::format("--batch: expected >= 1 sample per worker, got {}", profile.batch));
  if (profile.layers.empty()) throw InputError("compute profile: the model has no layers to simulate");
  if (point.fidelity.iterations < 0 || point.fidelity.iterations > MAX_ITERATIONS)
    throw InputError(
        fmt::format("--iterations: expected 1..{}, got {}", MAX_ITERATIONS, point.fidelity.iterations));
  // Traced: the named iterations, or by strategy as many as follow a warm-up within MAX_ITERATIONS.
  const int most_traced = point.fidelity.iterations > 0 ? point.fidelity.iterations : MAX_ITERATIONS - 1;
  if (!point.fidelity.trace_path.empty() &&
      (point.fidelity.trace_iterations < 1 || point.fidelity.trace_iterations > most_traced))
    throw InputError(fmt::format("--trace-iterations: expected 1..{} (the simulated iterations{}), got {}",
                                 most_traced, point.fidelity.iterations > 0 ? "" : ", after a warm-up one",
                                 point.fidelity.trace_iterations));
  if (!finite_non_negative(point.runtime.fusion_bytes))
    throw InputError(fmt::format("--fusion-mb: expected >= 0, got {} bytes", point.runtime.fusion_bytes));
  if (!finite_non_negative(point.runtime.cycle_s) || point.runtime.cycle_s > MAX_CYCLE_S)
    throw InputError(
        fmt::format("--cycle-ms: expected 0..{} ms, got {}", MAX_CYCLE_S * 1e3, point.runtime.cycle_s * 1e3));
  const bool ps = uses_servers(point.strategy);
  if (ps && (point.ps.servers < 1 || point.ps.servers > MAX_WORKERS))
    throw InputError(
        fmt::format("--ps: expected 1..{} parameter servers, got {}", MAX_WORKERS, point.ps.servers));

  Layout layout;
  layout.workers_per_node = effective_workers_per_node(platform, point);
  layout.nodes = (point.workers + layout.workers_per_node - 1) / layout.workers_per_node;
  layout.dedicated_ps_nodes = ps && point.ps.placement == PsPlacement::DEDICATED ? point.ps.servers : 0;
  if (static_cast<long long>(layout.nodes) + layout.dedicated_ps_nodes > platform.nodes)
    throw InputError(fmt::format(
        "--workers: {} workers at {} per node need {} nodes{} but platform '{}' has {}", point.workers,
        layout.workers_per_node, layout.nodes,
        layout.dedicated_ps_nodes > 0 ? fmt::format(" plus {} dedicated PS nodes", layout.dedicated_ps_nodes) : "",
        pname, platform.nodes));
  if (single_node_only(point.strategy) && layout.nodes > 1)
    throw InputError(fmt::format("--strategy {}: {} workers do not fit on one node of '{}' ({} per node)",
                                 point.strategy.name(), point.workers, pname, layout.workers_per_node));
  if (point.input.data == DataMode::REAL) {
    if (platform.storage.kind == platforms::StorageKind::NONE)
      throw InputError(fmt::format("--data real: platform '{}' describes no storage; use --data synthetic", pname));
    if (!(platform.storage.read_bandwidth_Bps > 0))
      throw InputError(fmt::format("--data real: platform '{}' storage read bandwidth must be > 0", pname));
    if (!std::isfinite(point.input.sample_bytes) || point.input.sample_bytes <= 0)
      throw InputError(fmt::format("sample_bytes: expected > 0 bytes per sample for real data, got {}",
                                   point.input.sample_bytes));
    if (point.input.prefetch_depth < 1 || point.input.prefetch_depth > MAX_PREFETCH)
      throw InputError(
          fmt::format("prefetch_depth: expected 1..{}, got {}", MAX_PREFETCH, point.input.prefetch_depth));
    if (!finite_non_negative(point.input.metadata_ops_per_sample) ||
        !finite_non_negative(point.input.preprocess_s_per_sample))
      throw InputError("metadata_ops_per_sample and preprocess_s_per_sample must be >= 0");
  }
  if (!finite_non_negative(point.input.scattered_bytes_per_sample) ||
      !finite_non_negative(point.input.gathered_bytes_per_sample))
    throw InputError("input/output bytes per sample must be >= 0");
  if (!point.runtime.collective_library.empty())
    check_collective_library(point.runtime.collective_library, "collective_library");
  (void)resolve_collective_library(platform, point);  // an unknown platform or framework value fails here
  const auto& v = point.variability;
  if (v.device_cv != DEVICE_CV_BY_CLASS && (!finite_non_negative(v.device_cv) || v.device_cv > MAX_JITTER_CV))
    throw InputError(fmt::format("variability.device_cv: expected 0..{}, got {}", MAX_JITTER_CV, v.device_cv));
  if (!finite_non_negative(v.jitter_cv) || v.jitter_cv > MAX_JITTER_CV)
    throw InputError(fmt::format("variability.jitter_cv: expected 0..{}, got {}", MAX_JITTER_CV, v.jitter_cv));
  if (!(v.straggler_probability >= 0 && v.straggler_probability <= 1))
    throw InputError(fmt::format("variability.straggler_probability: expected 0..1, got {}", v.straggler_probability));
  if (!(v.straggler_slowdown >= 1 && v.straggler_slowdown <= MAX_SLOWDOWN))
    throw InputError(fmt::format("variability.straggler_slowdown: expected 1..{}, got {}", MAX_SLOWDOWN, v.straggler_slowdown));
  if (ps) layout.server_nic_nodes = ps_split_server_nodes(platform, point, layout);
  return layout;
}

void check_training(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                    const TrainingPoint& point) {
  (void)check_training_point(platform, profile, point);
}

}  // namespace dtsim::sim
