// run_validation: comm curves, one measured MPI training run per ranks entry, on-the-spot calibration of
// this machine and dtsim's prediction of the identical runs (calibrate::build_profile +
// sim::simulate_training over a `localhost` platform whose shared-memory links are the fitted ones).
#include <fmt/format.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "calibrate/allocator.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"
#include "platforms/platform.hpp"
#include "sim/training.hpp"
#include "validate/src/shared.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {
namespace {

// Limits that keep a validation run on one small machine sane (absurd input is refused, not attempted).
constexpr int MAX_RANKS = 64;
constexpr int MAX_THREADS = 256;
constexpr int MAX_BATCH = 4096;
constexpr int MAX_ITERATIONS = 100000;
constexpr int MAX_SIDE = 1024;
constexpr int MAX_CHANNELS = 64;
// Fashion-MNIST geometry, which the synthetic data copies so both predict the same network.
constexpr int IMAGE_SIDE = 28;
constexpr int IMAGE_CHANNELS = 1;
constexpr int CLASSES = 10;
// Calibration timer bounds for the on-the-spot calibration (see common/clean_timer.hpp).
constexpr int CALIBRATION_MAX_BLOCKS = 5;
constexpr double CALIBRATION_MIN_BLOCK_S = 0.02;

// Longest sequence the PyTorch trainer is asked for (the config's n_positions bounds it further).
constexpr int MAX_SEQ_LEN = 1 << 16;

// --parallel and --micro-batches: a 2-process tensor-parallel or pipeline layout of a GPT.
void check_layout_options(const ValidateOptions& o) {
  if (o.parallel != "dp" && o.parallel != "tp" && o.parallel != "pp")
    throw InputError(fmt::format("--parallel: expected dp, tp or pp, got '{}'", o.parallel));
  if (o.micro_batches < 0 || o.micro_batches > MAX_BATCH)
    throw InputError(fmt::format("--micro-batches: expected 1..{} (0 = {}), got {}", MAX_BATCH, PP_DEFAULT_MICRO_BATCHES,
                                 o.micro_batches));
  if (o.micro_batches > 0 && o.parallel != "pp")
    throw InputError(fmt::format("--micro-batches: applies to --parallel pp, got --parallel {}", o.parallel));
  if (o.parallel == "dp") return;
  if (o.framework != "pytorch" || !is_language_model(o.model))
    throw InputError(fmt::format("--parallel {}: model-parallel layouts run in the PyTorch trainer on a GPT "
                                 "(--framework pytorch --model path/config.json --data synthetic)",
                                 o.parallel));
  if (o.ranks != std::vector<int>{2})
    throw InputError(fmt::format("--ranks: --parallel {} runs on exactly 2 processes (--ranks 2, the default with it)",
                                 o.parallel));
  const int m = o.parallel == "pp" ? (o.micro_batches > 0 ? o.micro_batches : PP_DEFAULT_MICRO_BATCHES) : 1;
  if (o.batch % m != 0)
    throw InputError(fmt::format("--batch: {} sequences per step do not split into {} micro-batches (--micro-batches)",
                                 o.batch, m));
}

void check_options(const ValidateOptions& o) {
  if (o.ranks.empty()) throw InputError("--ranks: expected a list like 1,2");
  for (int r : o.ranks)
    if (r < 1 || r > MAX_RANKS) throw InputError(fmt::format("--ranks: each entry must be 1..{}, got {}", MAX_RANKS, r));
  if (o.threads < 1 || o.threads > MAX_THREADS)
    throw InputError(fmt::format("--threads: expected 1..{}, got {}", MAX_THREADS, o.threads));
  if (o.batch < 1 || o.batch > MAX_BATCH)
    throw InputError(fmt::format("--batch: expected 1..{} samples per rank, got {}", MAX_BATCH, o.batch));
  if (o.iterations < 1 || o.iterations > MAX_ITERATIONS)
    throw InputError(fmt::format("--iterations: expected 1..{}, got {}", MAX_ITERATIONS, o.iterations));
  if (o.warmup < 0 || o.warmup > MAX_ITERATIONS)
    throw InputError(fmt::format("--warmup: expected 0..{}, got {}", MAX_ITERATIONS, o.warmup));
  if (o.strategy != "allreduce-ring" && o.strategy != "ps")
    throw InputError(fmt::format("--strategy: expected allreduce-ring or ps, got '{}'", o.strategy));
  if (o.data != "fashion-mnist" && o.data != "synthetic")
    throw InputError(fmt::format("--data: expected fashion-mnist or synthetic, got '{}'", o.data));
  if (!(o.fusion_bytes > 0) || !std::isfinite(o.fusion_bytes))
    throw InputError(fmt::format("--fusion-mb: expected > 0, got {} bytes", o.fusion_bytes));
  if (!(o.timeout_s > 0)) throw InputError(fmt::format("--timeout: expected > 0 seconds, got {}", o.timeout_s));
  if (o.framework != "dtsim" && o.framework != "pytorch")
    throw InputError(fmt::format("--framework: expected dtsim or pytorch, got '{}'", o.framework));
  if (o.seq_len < 0 || o.seq_len > MAX_SEQ_LEN)
    throw InputError(fmt::format("--seq-len: expected 0..{} (0 = the config's n_positions), got {}", MAX_SEQ_LEN, o.seq_len));
  if (o.seq_len > 0 && !(o.framework == "pytorch" && is_language_model(o.model)))
    throw InputError("--seq-len: only a language model (--framework pytorch --model path/config.json) takes a sequence length");
  check_layout_options(o);
  if (o.framework == "pytorch") {
    if (o.model != "lenet5" && o.model != "resnet18" && !is_language_model(o.model))
      throw InputError(fmt::format(
          "--model: the PyTorch trainer has lenet5 and resnet18, or a GPT-2 config.json (model_type gpt2), got '{}'",
          o.model));
    if (is_language_model(o.model) && o.data != "synthetic")
      throw InputError("--data: a language model trains on synthetic token sequences: pass --data synthetic");
    if (o.strategy != "allreduce-ring")
      throw InputError("--strategy: the PyTorch trainer runs DistributedDataParallel (allreduce-ring) only");
    if (!o.overlap) throw InputError("--no-overlap: DistributedDataParallel always overlaps its buckets with backward");
    if (o.side < 1 || o.side > MAX_SIDE) throw InputError(fmt::format("--side: expected 1..{}, got {}", MAX_SIDE, o.side));
    if (o.channels < 1 || o.channels > MAX_CHANNELS)
      throw InputError(fmt::format("--channels: expected 1..{}, got {}", MAX_CHANNELS, o.channels));
    if (!o.allocator.empty()) (void)calibrate::allocator_by_name(o.allocator);
  } else if (o.side != IMAGE_SIDE || o.channels != IMAGE_CHANNELS) {
    throw InputError("--side/--channels: only the PyTorch trainer (--framework pytorch) takes other image sizes");
  } else if (!o.allocator.empty()) {
    throw InputError("--allocator: applies to --framework pytorch (dtsim-train allocates its buffers before training)");
  }
}

std::vector<std::string> trainer_args(const ValidateOptions& o, const std::string& out) {
  return {"--model",     o.model,
          "--batch",     std::to_string(o.batch),
          "--iterations", std::to_string(o.iterations),
          "--warmup",    std::to_string(o.warmup),
          "--threads",   std::to_string(o.threads),
          "--data",      o.data,
          "--strategy",  o.strategy == "ps" ? "ps" : "allreduce",
          "--overlap",   o.overlap ? "true" : "false",
          "--fusion-bytes", fmt::format("{}", o.fusion_bytes),
          "--out",       out};
}

}  // namespace

platforms::Platform localhost_platform(const CommFit& fit, bool measured) {
  platforms::Platform p;
  p.name = "localhost";
  p.description = "this machine, shared-memory MPI links fitted by dtsim validate";
  p.nodes = 1;
  p.node.cpu = "host";
  p.node.cpu_sockets = 1;
  p.node.intra.kind = platforms::IntraNodeKind::SHARED_MEMORY;
  p.node.intra.link_bandwidth_Bps = measured ? fit.allreduce_bandwidth_Bps : 1.0;
  p.node.intra.latency_s = measured ? fit.allreduce_latency_s : 0.0;
  p.node.intra.source = measured ? "dtsim validate: MPI_Allreduce curve of this machine, ring model fit" : "unused (1 rank)";
  // A single node: the network is never crossed; it mirrors the intra-node figures to stay valid.
  p.network.technology = "none (single node)";
  p.network.link_bandwidth_Bps = p.node.intra.link_bandwidth_Bps;
  p.network.latency_s = p.node.intra.latency_s;
  p.network.source = "unused: single node";
  return p;
}

bool is_language_model(const std::string& model) {
  return model.size() >= 5 && model.compare(model.size() - 5, 5, ".json") == 0;
}

ValidationReport run_validation(const ValidateOptions& options) {
  check_options(options);
  ValidationReport report;
  report.options = options;
  std::string dir = options.work_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/dtsim-validate-XXXXXX";
    if (!mkdtemp(tmpl)) throw Failure("cannot create a work directory under /tmp");
    dir = tmpl;
  } else {
    std::filesystem::create_directories(dir);
  }
  if (options.framework == "pytorch") return run_pytorch_validation(options, dir);
  models::ModelOptions mo;
  mo.batch = options.batch;
  mo.input_h = mo.input_w = IMAGE_SIDE;
  mo.channels = IMAGE_CHANNELS;
  mo.classes = CLASSES;
  const auto model = models::load_model(options.model, mo);  // bad names fail here, before any run

  const int max_ranks = *std::max_element(options.ranks.begin(), options.ranks.end());
  if (options.predict && max_ranks >= 2) {
    const std::string out = dir + "/bench-comm.json";
    launch_trainer(2, 1, {"--bench-comm", "--out", out}, options.timeout_s);
    // Fit where this run's messages are: one bucket of the gradient (all of it below the fusion size).
    const double grad_bytes = static_cast<double>(model.totals().params) * sizeof(float);
    report.comm = fit_comm(read_text(out), std::min(grad_bytes, options.fusion_bytes));
    report.comm_measured = true;
  }
  for (int r : options.ranks) {
    const std::string out = fmt::format("{}/train-{}ranks.json", dir, r);
    launch_trainer(r, options.threads, trainer_args(options, out), options.timeout_s);
    ValidationRow row;
    row.ranks = r;
    row.measured = summarize_report(read_text(out));
    add_measured_row(report, std::move(row), options.threads, "rank(s)");
  }
  if (!options.predict) return report;

  // On-the-spot calibration of this machine for the model at the per-rank batch, then the prediction.
  const HereCalibration here = calibrate_here(model, options, dir, "onednn", "", "kernel passes", report);
  if (!here.co_run && max_ranks >= 2)
    report.notes.push_back(fmt::format("no co-run calibration ({} thread(s) per rank): ranks sharing the machine "
                                       "are predicted without their mutual slowdown",
                                       options.threads));
  const auto platform = localhost_platform(report.comm, report.comm_measured);
  const auto& device = platforms::DeviceCatalog::builtin().by_name("host");
  for (auto& row : report.rows) {
    calibrate::ProfileOptions po;
    po.threads = options.threads;
    po.workers_per_node = row.ranks;
    po.cpu_sockets = 1;
    po.db_path = here.db_path;
    const auto profile = calibrate::build_profile(model, device, po);
    sim::TrainingPoint point;
    point.workers = row.ranks;
    point.workers_per_node = row.ranks;
    point.strategy = sim::strategy_by_name(options.strategy == "ps" ? "ps" : "allreduce-ring");
    point.ps.servers = 1;
    point.ps.placement = sim::PsPlacement::COLOCATED;
    point.runtime.fusion_bytes = options.fusion_bytes;
    point.runtime.overlap = options.overlap;
    point.input.data = sim::DataMode::SYNTHETIC;  // the trainer's data phase is an in-memory copy
    point.fidelity.iterations = SIMULATED_ITERATIONS;
    const auto res = sim::simulate_training(platform, profile, point);
    set_prediction(row, profile, res,
                   fmt::format("profile coverage {:.0f}%, link {:.2f} GB/s / {:.1f} us", profile.coverage * 100,
                               platform.node.intra.link_bandwidth_Bps / 1e9, platform.node.intra.latency_s * 1e6));
  }
  return report;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Failure(fmt::format("cannot read {}", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void add_measured_row(ValidationReport& report, ValidationRow row, int threads, const std::string& unit) {
  const int r = row.ranks;
  if (!row.measured.clean)
    report.notes.push_back(fmt::format("{} {}: every iteration window was disturbed by other processes; "
                                       "figures are medians over all iterations (re-measure on a quiet machine)",
                                       r, unit));
  if (r * threads > static_cast<int>(std::thread::hardware_concurrency()))
    report.notes.push_back(fmt::format("{} {} x {} thread(s) oversubscribe the {} CPUs", r, unit, threads,
                                       std::thread::hardware_concurrency()));
  report.rows.push_back(std::move(row));
}

HereCalibration calibrate_here(const models::Model& model, const ValidateOptions& options, const std::string& dir,
                               const std::string& backend, const std::string& prefix, const std::string& passes,
                               ValidationReport& report) {
  calibrate::CalibrateOptions co;
  co.backend = backend;
  co.threads = options.threads;
  if (backend == "libtorch") co.allocator = options.allocator;
  // A database of its own in the work directory (unless DTSIM_CALIBRATION_DB names one): validation
  // never writes into the shipped calibration data, and build_profile then fits exactly this host.
  // Unchecked timings never enter a database of record (as `dtsim calibrate check --unchecked`).
  if (const char* env = std::getenv("DTSIM_CALIBRATION_DB"); !env || !*env || options.unchecked_calibration)
    co.db_path = dir + "/calibration.json";
  // Bounded so a busy machine cannot make validation run for long: a pass with no clean block in
  // CALIBRATION_MAX_BLOCKS is stored as disturbed and the profile falls back to the op class.
  co.timer.max_blocks = CALIBRATION_MAX_BLOCKS;
  co.timer.min_block_s = CALIBRATION_MIN_BLOCK_S;
  if (options.unchecked_calibration) {
    co.timer.check_disturbance = false;
    co.timer.cpu_time = options.threads == 1;
    report.notes.push_back(fmt::format("{}calibration UNCHECKED: no disturbance check; {}", prefix,
                                       co.timer.cpu_time ? "passes timed by process CPU time"
                                                         : "passes timed by wall time (more than 1 thread)"));
  }
  const auto summary = calibrate::calibrate_model(model, co);
  report.notes.push_back(fmt::format("{}calibration: {} {} ({} reused, {} timed, {} disturbed) in {}", prefix,
                                     summary.items, passes, summary.reused, summary.timed, summary.disturbed,
                                     summary.db_path));
  // T threads on a machine of T cores: the calibrator's own threads and anything else running disturb every
  // pass (a 2-thread calibration on this 2-core machine keeps none). Then the passes are timed at 1 thread too,
  // and the T-thread prediction carries them by the framework's measured thread scaling where it has one
  // (calibrate/data/thread_scaling.json; the host's Amdahl fit otherwise).
  if (options.threads > 1 && summary.disturbed > 0) {
    calibrate::CalibrateOptions one = co;
    one.threads = 1;
    const auto s = calibrate::calibrate_model(model, one);
    report.notes.push_back(fmt::format("{}calibration at 1 thread ({} of the {}-thread passes disturbed): {} {} "
                                       "({} reused, {} timed, {} disturbed)",
                                       prefix, summary.disturbed, options.threads, s.items, passes, s.reused, s.timed,
                                       s.disturbed));
  }
  // Ranks that share the machine slow each other down through shared hardware (caches, memory, the
  // hypervisor's scheduling of sibling vCPUs). Measured the same way: the same passes timed as
  // 1-thread copies running at once, one per rank (docs/calibration.md, co-run calibration).
  const int max_ranks = *std::max_element(options.ranks.begin(), options.ranks.end());
  const int corun = std::min(max_ranks, dtsim::online_cpus());
  HereCalibration out{summary.db_path, false};
  // Unchecked (CPU time), the copies are not timed: CPU time does not see the slowdown they cause each other.
  if (options.unchecked_calibration && corun >= 2)
    report.notes.push_back(fmt::format("{}co-run calibration skipped (--unchecked-calibration: CPU time does not "
                                       "measure the ranks' mutual slowdown)",
                                       prefix));
  if (options.threads == 1 && corun >= 2 && !options.unchecked_calibration) {
    co.instances = corun;
    const auto s = calibrate::calibrate_model(model, co);
    report.notes.push_back(fmt::format("{}co-run calibration: {} copies x 1 thread, {} passes ({} timed, {} disturbed)",
                                       prefix, corun, s.items, s.timed, s.disturbed));
    out.co_run = true;
  }
  return out;
}

void set_prediction(ValidationRow& row, const calibrate::ComputeProfile& profile, const sim::PointResult& res,
                    std::string note) {
  auto& ph = row.measured.phases;
  ph["iteration"].predicted_ms = res.iteration_time_s * 1e3;
  ph["forward"].predicted_ms = profile.fwd_s() * 1e3;
  ph["backward"].predicted_ms = profile.bwd_s() * 1e3;
  ph["update"].predicted_ms = profile.update_s * 1e3;
  ph["exchange"].predicted_ms = res.breakdown.exposed_communication_s * 1e3;
  ph["data"].predicted_ms = res.breakdown.io_stall_s * 1e3;
  row.predicted_ms = ph["iteration"].predicted_ms;
  row.error_pct = ph["iteration"].error_pct();
  row.prediction_note = std::move(note);
}

}  // namespace dtsim::validate
