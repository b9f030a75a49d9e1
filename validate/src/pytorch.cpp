// `dtsim validate --framework pytorch`: real eager PyTorch training (validate/pytorch/train.py, DDP over
// gloo for 2+ processes), the torch model checked equal to dtsim's, gloo curves fitted as the links,
// libtorch calibration of the same layers, and the prediction with the pytorch-ddp framework profile.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "calibrate/allocator.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/profile.hpp"
#include "common/clean_timer.hpp"
#include "common/errors.hpp"
#include "common/paths.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"
#include "sim/training.hpp"
#include "validate/src/shared.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {
namespace {

constexpr const char* DEFAULT_PYTHON = "/usr/bin/python3";
constexpr int CLASSES = 10;
// Importing torch takes seconds; the availability probe gets this long.
constexpr double PROBE_TIMEOUT_S = 120;

std::string script_path() { return (data_dir() / "validate" / "pytorch" / "train.py").string(); }

// The last non-empty line of a run's output (where Python puts the error).
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// The median page faults of the trainer's timed iterations (0 in a held heap; absent in reports of older
// trainers).
double median_minor_faults(const std::string& report_text) {
  std::vector<double> faults;
  const nlohmann::json report = nlohmann::json::parse(report_text);  // named: a temporary's member would dangle
  for (const auto& it : report.at("iterations"))
    if (!it.value("warmup", false) && it.contains("minor_faults"))
      faults.push_back(it.at("minor_faults").get<double>());
  if (faults.empty()) return 0;
  const auto middle = faults.begin() + static_cast<std::ptrdiff_t>(faults.size() / 2);
  std::nth_element(faults.begin(), middle, faults.end());
  return *middle;
}

}  // namespace

std::string python_path() {
  const char* env = std::getenv("DTSIM_PYTHON");
  return env != nullptr && *env != '\0' ? env : DEFAULT_PYTHON;
}

bool pytorch_available() {
  const LaunchResult r = run_command({python_path(), "-c", "import torch, torchvision"}, PROBE_TIMEOUT_S);
  return !r.timed_out && r.exit_code == 0;
}

// The heap regime's environment (MALLOC_* or LD_PRELOAD, none for glibc's defaults) is inherited by the
// processes the trainer spawns.
std::string run_trainer(const std::vector<std::string>& args, const calibrate::AllocatorRegime& allocator,
                        double timeout_s, const std::string& what) {
  std::vector<std::string> argv;
  if (!allocator.env.empty()) {
    argv.push_back("/usr/bin/env");
    for (const auto& [name, value] : allocator.env) argv.push_back(name + "=" + value);
  }
  argv.push_back(python_path());
  argv.push_back(script_path());
  argv.insert(argv.end(), args.begin(), args.end());
  const LaunchResult r = run_command(argv, timeout_s);
  if (r.timed_out) throw Failure(fmt::format("PyTorch {}: timed out after {:.0f} s", what, timeout_s));
  if (r.exit_code != 0)
    throw Failure(fmt::format("PyTorch {} failed (exit {}): {}", what, r.exit_code, last_line(r.output)));
  return r.output;
}

void write_layer_table(const models::Model& model, const std::string& path) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : model.layers()) {
    if (l.op == models::OpKind::INPUT) continue;
    layers.push_back({{"name", l.name},
                      {"op", std::string(models::op_name(l))},
                      {"params", l.costs.params},
                      {"dst", {l.dst_shape.n, l.dst_shape.c, l.dst_shape.h, l.dst_shape.w}}});
  }
  std::ofstream f(path);
  f << nlohmann::json{{"model", model.name()}, {"layers", layers}}.dump(1) << '\n';
  if (!f) throw Failure(fmt::format("cannot write {}", path));
}

void measure_gloo(ValidationReport& report, const calibrate::AllocatorRegime& allocator, const std::string& dir,
                  double timeout_s) {
  const std::string out = dir + "/bench-comm-gloo.json";
  run_trainer({"--bench-comm", "--procs", "2", "--out", out}, allocator, timeout_s, "gloo curves");
  // gloo over TCP loopback has no cache-regime change to fit around (unlike shared-memory MPI): the
  // bandwidth comes from every message >= 256 KiB, which a busy machine cannot turn into a flat slope.
  report.comm = fit_comm(read_text(out), 0);
  report.comm_measured = true;
}

ValidationReport run_pytorch_validation(const ValidateOptions& options, const std::string& dir) {
  if (options.parallel != "dp") return run_pytorch_layout_validation(options, dir);
  if (!pytorch_available())
    throw Failure(fmt::format("--framework pytorch: {} cannot import torch and torchvision (install python3-torch "
                              "python3-torchvision, or set DTSIM_PYTHON)",
                              python_path()));
  ValidationReport report;
  report.options = options;
  const calibrate::AllocatorRegime& regime =
      calibrate::allocator_by_name(options.allocator.empty() ? calibrate::DEFAULT_ALLOCATOR : options.allocator);
  models::ModelOptions mo;
  mo.batch = options.batch;
  const bool language = is_language_model(options.model);
  if (language) {
    mo.seq_len = options.seq_len;
  } else {
    mo.input_h = mo.input_w = options.side;
    mo.channels = options.channels;
    mo.classes = CLASSES;
  }
  const auto model = models::load_model(options.model, mo);
  // The trainer is told the sequence the model was built for (the config's n_positions when 0).
  const std::int64_t seq_len = language ? model.input_shape().h : 0;
  const std::string layers_path = dir + "/dtsim-layers.json";
  write_layer_table(model, layers_path);

  const int max_ranks = *std::max_element(options.ranks.begin(), options.ranks.end());
  if (options.predict && max_ranks >= 2) measure_gloo(report, regime, dir, options.timeout_s);
  const double bucket_mb = options.fusion_bytes / (1024.0 * 1024.0);
  for (int r : options.ranks) {
    const std::string out = fmt::format("{}/pytorch-{}procs.json", dir, r);
    run_trainer({"--model", options.model, "--procs", std::to_string(r), "--threads", std::to_string(options.threads),
                 "--batch", std::to_string(options.batch), "--iterations", std::to_string(options.iterations),
                 "--warmup", std::to_string(options.warmup), "--data", options.data, "--side",
                 std::to_string(options.side), "--channels", std::to_string(options.channels), "--seq-len",
                 std::to_string(seq_len), "--bucket-cap-mb",
                 fmt::format("{}", bucket_mb), "--check-model", layers_path, "--out", out},
                regime, options.timeout_s, fmt::format("training ({} process(es))", r));
    ValidationRow row;
    row.ranks = r;
    const std::string text = read_text(out);
    row.measured = summarize_report(text);
    report.notes.push_back(fmt::format("{} process(es), heap {}: {:.0f} page faults per iteration (median)", r,
                                       regime.name, median_minor_faults(text)));
    add_measured_row(report, std::move(row), options.threads, "process(es)");
  }
  report.notes.push_back("torch model checked equal to dtsim's (parameters and output shape of every layer)");
  if (!options.predict) return report;

  const HereCalibration here = calibrate_here(model, options, dir, "libtorch", "libtorch ", "passes", report);
  auto platform = localhost_platform(report.comm, report.comm_measured);
  if (report.comm_measured) platform.node.intra.source = "dtsim validate: gloo allreduce curve of this machine, ring fit";
  const auto& device = platforms::DeviceCatalog::builtin().by_name("host");
  const auto& ddp = sim::framework_by_name("pytorch-ddp");
  for (auto& row : report.rows) {
    calibrate::ProfileOptions po;
    po.threads = options.threads;
    po.workers_per_node = row.ranks;
    po.cpu_sockets = 1;
    po.db_path = here.db_path;
    po.backend = ddp.runtime.calibration;
    po.allocator = regime.name;
    const auto profile = calibrate::build_profile(model, device, po);
    sim::TrainingPoint point;
    if (row.ranks >= 2) {  // 1 process trains without the DDP wrapper
      sim::apply_framework(point, ddp);
      // DDP's process group is gloo's (the trainer's backend), whose copies and reductions run on the ranks'
      // cores; a point's own default library is "none" (the strategy's ring alone, nothing on the cores).
      point.runtime.collective_library = "gloo";
    }
    point.runtime.fusion_bytes = options.fusion_bytes;     // bucket_cap_mb as the trainer ran it
    point.workers = row.ranks;
    point.workers_per_node = row.ranks;
    point.strategy = sim::strategy_by_name("allreduce-ring");  // gloo's allreduce is a ring
    point.input.data = sim::DataMode::SYNTHETIC;  // the trainer's data phase is an in-memory slice
    point.fidelity.iterations = SIMULATED_ITERATIONS;
    const auto res = sim::simulate_training(platform, profile, point);
    set_prediction(row, profile, res,
                   fmt::format("{} calibration{}, coverage {:.0f}%, pytorch-ddp profile, collective library {}, link "
                               "{:.2f} GB/s / {:.1f} us",
                               profile.calibration_backend,
                               profile.calibration_allocator.empty() ? "" : " (heap " + profile.calibration_allocator + ")",
                               profile.coverage * 100, sim::resolve_collective_library(platform, point).name,
                               platform.node.intra.link_bandwidth_Bps / 1e9, platform.node.intra.latency_s * 1e6));
  }
  return report;
}

}  // namespace dtsim::validate
