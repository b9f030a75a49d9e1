// `dtsim calibrate`: time a model's distinct layers with oneDNN/cuDNN into the calibration database;
// `calibrate report` prints per-layer predicted times on a device; `calibrate check` compares the sum
// of calibrated per-layer times with a directly timed full training step.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "apps/preload.hpp"
#include "calibrate/allocator.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"

namespace dtsim::apps {
namespace {

struct CalibrateArgs {
  std::string model;
  int batch = 32;
  int seq_len = 0;  // language models: tokens per sequence (0 = the model's default)
  int threads = 0;
  int instances = 1;
  std::string backend = "onednn";
  std::string allocator;  // "" = the default regime (libtorch only)
  std::string db;
  bool quiet = false;
  bool unchecked = false;  // check only: no disturbance check, temporary database
  int rounds = 5;          // check only: interleaved rounds of step and parts
};

struct ReportArgs {
  std::string model;
  std::string device;
  int batch = 32;
  int seq_len = 0;
  int threads = 0;
  int workers_per_node = 1;
  int sockets = 1;
  double anchor = 0;
  std::string db;
  std::string precision = "fp32";
  std::string format = "table";
};

models::Model load(const std::string& name, int batch, int seq_len) {
  if (batch < 1 || batch > 1 << 20) throw InputError(fmt::format("--batch: expected 1..1048576, got {}", batch));
  if (seq_len < 0) throw InputError(fmt::format("--seq-len: expected >= 0 (0 = the model's default), got {}", seq_len));
  models::ModelOptions o;
  o.batch = batch;
  o.seq_len = seq_len;
  return models::load_model(name, o);
}

// A progress bar on stderr: redrawn in place on a terminal, one line per 10% otherwise.
void show_progress(const calibrate::CalibrateProgress& p) {
  static int last_decile = -1;
  const bool tty = ::isatty(STDERR_FILENO);
  const double frac = p.total > 0 ? static_cast<double>(p.done) / p.total : 1.0;
  const int width = 30;
  const int filled = static_cast<int>(frac * width);
  const std::string bar = std::string(static_cast<std::size_t>(filled), '=') +
                          std::string(static_cast<std::size_t>(width - filled), ' ');
  const std::string what = p.reused ? "reused" : (p.clean ? "timed" : "DISTURBED");
  if (tty) {
    std::string label = fmt::format("{} {}", p.signature, p.pass);
    if (label.size() > 60) label = label.substr(0, 57) + "...";
    fmt::print(stderr, "\r[{}] {}/{} {:9} {:<60}", bar, p.done, p.total, what, label);
    if (p.done == p.total) fmt::print(stderr, "\n");
  } else {
    const int decile = static_cast<int>(frac * 10);
    if (decile != last_decile || !p.clean) {
      fmt::print(stderr, "[{}] {}/{} {} {} {}\n", bar, p.done, p.total, what, p.signature, p.pass);
      last_decile = decile;
    }
  }
}

void run_calibrate(const CalibrateArgs& a) {
  const models::Model m = load(a.model, a.batch, a.seq_len);
  calibrate::CalibrateOptions o;
  o.threads = a.threads;
  o.instances = a.instances;
  o.backend = a.backend;
  o.allocator = a.allocator;
  if (!a.allocator.empty() && a.backend == "libtorch") run_under_allocator(calibrate::allocator_by_name(a.allocator));
  o.db_path = a.db;
  if (!a.quiet) o.progress = show_progress;
  const auto s = calibrate::calibrate_model(m, o);
  fmt::print("calibrated {} batch {} on {}\n", m.name(), a.batch, s.host_key);
  fmt::print("items {}  reused {}  timed {}  disturbed {}  wall {:.2f} s\n", s.items, s.reused, s.timed, s.disturbed,
             s.wall_s);
  fmt::print("database {}\n", s.db_path);
  if (s.disturbed > 0)
    fmt::print("note: {} item(s) had no undisturbed block and are stored as 'disturbed'; re-run on a quieter "
               "machine to time them\n",
               s.disturbed);
}

std::string num(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

void run_report(const ReportArgs& a) {
  const TextFormat format = parse_text_format(a.format);
  const models::Model m = load(a.model, a.batch, a.seq_len);
  const platforms::Device& dev = platforms::DeviceCatalog::builtin().by_name(a.device);
  calibrate::ProfileOptions o;
  o.threads = a.threads;
  o.workers_per_node = a.workers_per_node;
  o.cpu_sockets = a.sockets;
  o.db_path = a.db;
  if (a.anchor != 0) o.anchor_samples_per_s = a.anchor;
  o.precision = calibrate::precision_by_name(a.precision);
  const auto prof = calibrate::build_profile(m, dev, o);
  const double peak = dev.kind == platforms::DeviceKind::GPU ? calibrate::precision_peak_flops(dev, o.precision)
                                                             : calibrate::device_peak_flops(dev);
  // Peak available to this worker: a CPU worker uses `threads` cores.
  const double worker_peak = dev.kind == platforms::DeviceKind::CPU
                                 ? calibrate::device_core_peak_flops(dev) * std::max(prof.threads, 1)
                                 : peak;
  Table table({"layer", "op", "fwd_ms", "bwd_ms", "gflops_per_s", "pct_peak", "measured"});
  nlohmann::json layers = nlohmann::json::array();
  std::size_t i = 0;
  for (const auto& layer : m.layers()) {
    if (layer.op == models::OpKind::INPUT) continue;
    const auto& t = prof.layers.at(i++);
    const double flops = layer.costs.fwd_flops + layer.costs.bwd_data_flops + layer.costs.bwd_weights_flops;
    const double time = t.fwd_s + t.bwd_s();
    const double rate = time > 0 ? flops / time : 0;
    table.add_row({t.name, t.op, num(t.fwd_s * 1e3, 3), num(t.bwd_s() * 1e3, 3), num(rate / 1e9, 1),
                   num(100 * rate / worker_peak, 1), t.measured ? "yes" : "no"});
    layers.push_back({{"layer", t.name}, {"op", t.op}, {"fwd_s", t.fwd_s}, {"bwd_data_s", t.bwd_data_s},
                      {"bwd_weights_s", t.bwd_weights_s}, {"gflops_per_s", rate / 1e9},
                      {"pct_peak", 100 * rate / worker_peak}, {"measured", t.measured}});
  }
  const double b = prof.batch;
  if (format == TextFormat::JSON) {
    nlohmann::json j{{"model", prof.model},
                     {"device", prof.device},
                     {"batch", prof.batch},
                     {"threads", prof.threads},
                     {"fwd_s", prof.fwd_s()},
                     {"bwd_s", prof.bwd_s()},
                     {"update_s", prof.update_s},
                     {"step_s", prof.step_compute_s()},
                     {"per_sample_fwd_s", prof.fwd_s() / b},
                     {"per_sample_bwd_s", prof.bwd_s() / b},
                     {"samples_per_s", b / prof.step_compute_s()},
                     {"coverage", prof.coverage},
                     {"anchor_factor", prof.anchor_factor},
                     {"precision", std::string(calibrate::to_string(prof.precision))},
                     {"compute_model", prof.compute_model},
                     {"layers", layers}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  table.print(std::cout, format);
  if (format == TextFormat::CSV) return;
  fmt::print("\n{} on {} ({}), batch {}, {}{}; {}\n", prof.model, dev.name, dev.description, prof.batch,
             calibrate::to_string(prof.precision), prof.threads > 0 ? fmt::format(", {} threads/worker", prof.threads) : "",
             prof.compute_model);
  fmt::print("per sample: forward {:.3f} ms, backward {:.3f} ms; update {:.3f} ms per step\n",
             prof.fwd_s() / b * 1e3, prof.bwd_s() / b * 1e3, prof.update_s * 1e3);
  fmt::print("step {:.2f} ms -> {:.1f} samples/s; measured coverage {:.0f}%; anchor factor {:.3f}\n",
             prof.step_compute_s() * 1e3, b / prof.step_compute_s(), prof.coverage * 100, prof.anchor_factor);
}

void run_check(const CalibrateArgs& a) {
  const models::Model m = load(a.model, a.batch, a.seq_len);
  calibrate::CalibrateOptions o;
  o.threads = a.threads;
  o.db_path = a.db;
  // --unchecked: a diagnostic for busy machines; its timings never enter the real database.
  std::string temp_db;
  if (a.unchecked) {
    temp_db = fmt::format("/tmp/dtsim-check-unchecked-{}.json", ::getpid());
    o.db_path = temp_db;
    o.timer.check_disturbance = false;
    o.timer.cpu_time = a.threads == 1;  // at 1 thread, CPU time ignores waiting for a busy CPU
  }
  if (!a.quiet) o.progress = show_progress;
  const auto s = calibrate::calibrate_model(m, o);
  const auto db = calibrate::CalibrationDb::load(s.db_path);
  if (!temp_db.empty()) std::remove(temp_db.c_str());
  int missing = 0;
  const double db_sum_s = calibrate::sum_measured_step_s(m, db, s.host_key, &missing);
  CleanTimerOptions timer;
  timer.min_block_s = 0.2;  // per round and piece: dozens of repeats of a small network
  timer.check_disturbance = !a.unchecked;
  timer.cpu_time = a.unchecked && a.threads == 1;
  const auto check = calibrate::check_step_onednn(m, a.threads, a.rounds, timer);
  fmt::print("{} batch {} on {}{}\n", m.name(), a.batch, s.host_key,
             a.unchecked ? (a.threads == 1 ? "  [UNCHECKED: no disturbance check; times are process CPU time]"
                                           : "  [UNCHECKED: disturbance check off, figures not trustworthy]")
                         : "");
  if (check.rounds.empty()) {
    fmt::print("no undisturbed round ({} rejected); re-run on a quieter machine\n", check.rounds_rejected);
    return;
  }
  const double step_s = check.median_step_s();
  fmt::print("paired rounds: {} clean / {} rejected; each times the full forward+backward+update step, then every "
             "distinct layer pass as calibrate does\n",
             check.rounds.size(), check.rounds_rejected);
  fmt::print("full step {:.3f} ms, sum of per-layer times {:.3f} ms (medians over rounds)\n", step_s * 1e3,
             check.median_sum_s() * 1e3);
  fmt::print("sum / full = {:.3f} ({:+.1f}%), rounds from {:.3f} to {:.3f}\n", check.median_ratio(),
             (check.median_ratio() - 1) * 100, check.min_ratio(), check.max_ratio());
  fmt::print("database (calibrated earlier): sum {:.3f} ms ({} item(s) without a clean timing); / full step now = "
             "{:.3f} ({:+.1f}%, includes the machine's drift since calibration)\n",
             db_sum_s * 1e3, missing, db_sum_s / step_s, (db_sum_s / step_s - 1) * 100);
}

void add_calibrate_options(CLI::App* c, CalibrateArgs& a) {
  c->add_option("--model", a.model, "zoo model name or YAML model file")->required();
  c->add_option("--batch", a.batch, "batch size (per worker)")->capture_default_str();
  c->add_option("--seq-len", a.seq_len, "tokens per sequence of a language model (0 = its default)")->capture_default_str();
  c->add_option("--threads", a.threads, "oneDNN threads (0 = every CPU)")->capture_default_str();
  c->add_option("--db", a.db, "calibration database (default: $DTSIM_CALIBRATION_DB or calibrate/data/calibration.json)");
  c->add_flag("--quiet", a.quiet, "no progress bar");
}

const CommandRegistrar registrar("calibrate", 30, [](CLI::App& root) {
  auto* cmd = root.add_subcommand("calibrate", "time a model's layers with oneDNN/cuDNN into the calibration database");
  auto args = std::make_shared<CalibrateArgs>();
  cmd->require_subcommand(0, 1);
  cmd->add_option("--model", args->model, "zoo model name or YAML model file");
  cmd->add_option("--batch", args->batch, "batch size (per worker)")->capture_default_str();
  cmd->add_option("--seq-len", args->seq_len, "tokens per sequence of a language model (0 = its default)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "oneDNN threads (0 = every CPU)")->capture_default_str();
  cmd->add_option("--instances", args->instances,
                  "co-run calibration: copies of the work running at once, each with --threads threads (measures "
                  "how busy neighbour cores slow a process)")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "onednn, libtorch (eager PyTorch ops, when built with libtorch) or cudnn")->capture_default_str();
  cmd->add_option("--allocator", args->allocator,
                  "--backend libtorch: the heap regime the passes are timed in, that of the process predicted "
                  "(default glibc, what a plain script gets):\n" + calibrate::allocator_help());
  cmd->add_option("--db", args->db, "calibration database (default: $DTSIM_CALIBRATION_DB or calibrate/data/calibration.json)");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->callback([cmd, args] {
    if (!cmd->get_subcommands().empty()) return;
    if (args->model.empty()) throw InputError("calibrate: --model is required (or use 'calibrate report' / 'check')");
    run_calibrate(*args);
  });

  auto* report = cmd->add_subcommand("report", "per-layer predicted times, GFLOP/s and % of peak of a model on a device");
  auto rargs = std::make_shared<ReportArgs>();
  report->add_option("--model", rargs->model, "zoo model name or YAML model file")->required();
  report->add_option("--device", rargs->device, "device name from platforms/devices.yaml")->required();
  report->add_option("--precision", rargs->precision, "fp32|fp16-mixed (GPUs with FP16 tensor cores)")->capture_default_str();
  report->add_option("--batch", rargs->batch, "batch per worker")->capture_default_str();
  report->add_option("--seq-len", rargs->seq_len, "tokens per sequence of a language model (0 = its default)")
      ->capture_default_str();
  report->add_option("--threads", rargs->threads, "CPU threads per worker (0 = the node's cores / workers)")
      ->capture_default_str();
  report->add_option("--workers-per-node", rargs->workers_per_node, "CPU worker processes per node")
      ->capture_default_str();
  report->add_option("--sockets", rargs->sockets, "CPU sockets per node")->capture_default_str();
  report->add_option("--anchor", rargs->anchor, "measured samples/s to scale the profile to (0 = none)");
  report->add_option("--db", rargs->db, "calibration database");
  report->add_option("--format", rargs->format, "table, csv or json")->capture_default_str();
  report->callback([rargs] { run_report(*rargs); });

  auto* check = cmd->add_subcommand(
      "check", "calibrate, then compare the sum of per-layer times with a directly timed full training step");
  auto cargs = std::make_shared<CalibrateArgs>();
  add_calibrate_options(check, *cargs);
  check->add_flag("--unchecked", cargs->unchecked,
                  "diagnostic on a busy machine: no disturbance check, temporary database (never the real one); with "
                  "--threads 1 every repeat is timed by process CPU time");
  check->add_option("--rounds", cargs->rounds, "interleaved rounds of full step and per-layer timings")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  check->callback([cargs] { run_check(*cargs); });
});

}  // namespace
}  // namespace dtsim::apps
