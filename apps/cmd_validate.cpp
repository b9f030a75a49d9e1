// `dtsim validate`: train a real network with MPI on this machine, measure every phase, predict the
// same run with dtsim and print measured vs predicted (table, CSV or JSON {"rows": [...]}).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "apps/preload.hpp"
#include "calibrate/allocator.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "validate/validate.hpp"

namespace dtsim::apps {
namespace {

struct ValidateArgs {
  validate::ValidateOptions options;
  std::string ranks = "1,2";
  double fusion_mb = 64;           // dtsim-train's default; DDP's bucket_cap_mb (25) with --framework pytorch
  std::string format = "table";
  bool no_overlap = false;
};

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    try {
      std::size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--ranks: expected comma-separated integers like 1,2, got '{}'", text));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string ms(double v) { return v < 0 ? "-" : fmt::format("{:.3f}", v); }
std::string pct(const validate::PhaseFigures& f) {
  return f.predicted_ms < 0 || f.measured_ms <= 0 ? "-" : fmt::format("{:+.1f}", f.error_pct());
}

const std::vector<std::string> PHASES{"iteration", "data", "forward", "backward", "exchange", "update"};

void print(const validate::ValidationReport& r, TextFormat format) {
  if (format == TextFormat::JSON) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : r.rows) {
      nlohmann::json phases;
      for (const auto& [name, f] : row.measured.phases)
        phases[name] = {{"measured_ms", f.measured_ms}, {"spread_pct", f.spread_pct},
                        {"predicted_ms", f.predicted_ms < 0 ? nlohmann::json() : nlohmann::json(f.predicted_ms)},
                        {"error_pct", f.predicted_ms < 0 ? nlohmann::json() : nlohmann::json(f.error_pct())}};
      const auto& st = row.predicted;
      const nlohmann::json structure =
          row.predicted_ms < 0 ? nlohmann::json()
                               : nlohmann::json{{"compute_ms", st.compute_ms},
                                                {"local_collectives_ms", st.local_collectives_ms},
                                                {"bubble_ms", st.bubble_ms},
                                                {"exposed_communication_ms", st.exposed_communication_ms}};
      rows.push_back({{"ranks", row.ranks},
                      {"layout", row.layout},
                      {"predicted_structure", structure},
                      {"measured_ms", row.measured.phases.at("iteration").measured_ms},
                      {"predicted_ms", row.predicted_ms < 0 ? nlohmann::json() : nlohmann::json(row.predicted_ms)},
                      {"error_pct", row.predicted_ms < 0 ? nlohmann::json() : nlohmann::json(row.error_pct)},
                      {"phases", phases},
                      {"iterations_kept", row.measured.iterations_kept},
                      {"iterations_rejected", row.measured.iterations_rejected},
                      {"clean", row.measured.clean},
                      {"loss_first", row.measured.loss_first},
                      {"loss_last", row.measured.loss_last},
                      {"test_accuracy_before", row.measured.test_accuracy_before},
                      {"test_accuracy_after", row.measured.test_accuracy_after},
                      {"prediction", row.prediction_note}});
    }
    nlohmann::json out{{"model", r.options.model}, {"strategy", r.options.strategy}, {"parallel", r.options.parallel},
                       {"threads", r.options.threads},
                       {"batch", r.options.batch}, {"rows", rows}, {"notes", r.notes}};
    if (r.comm_measured)
      out["comm"] = {{"pingpong_latency_s", r.comm.pingpong_latency_s},
                     {"pingpong_bandwidth_Bps", r.comm.pingpong_bandwidth_Bps},
                     {"allreduce_latency_s", r.comm.allreduce_latency_s},
                     {"allreduce_bandwidth_Bps", r.comm.allreduce_bandwidth_Bps}};
    std::cout << out.dump(2) << '\n';
    return;
  }
  Table t({"ranks", "phase", "measured_ms", "spread_%", "predicted_ms", "error_%"});
  for (const auto& row : r.rows)
    for (const auto& name : PHASES) {
      const auto& f = row.measured.phases.at(name);
      const std::string ranks =
          row.layout == "dp" ? std::to_string(row.ranks) : fmt::format("{} ({})", row.ranks, row.layout);
      t.add_row({ranks, name, ms(f.measured_ms), fmt::format("{:.1f}", f.spread_pct), ms(f.predicted_ms), pct(f)});
    }
  t.print(std::cout, format);
  if (format != TextFormat::TABLE) return;
  std::cout << '\n';
  Table training({"ranks", "iterations_kept", "loss_first", "loss_last", "test_acc_before", "test_acc_after"});
  for (const auto& row : r.rows)
    training.add_row({std::to_string(row.ranks),
                      fmt::format("{}/{}", row.measured.iterations_kept,
                                  row.measured.iterations_kept + row.measured.iterations_rejected),
                      fmt::format("{:.4f}", row.measured.loss_first), fmt::format("{:.4f}", row.measured.loss_last),
                      fmt::format("{:.3f}", row.measured.test_accuracy_before),
                      fmt::format("{:.3f}", row.measured.test_accuracy_after)});
  training.print(std::cout, format);
  if (r.comm_measured)
    std::cout << fmt::format(
        "\n{} on this machine: ping-pong {:.2f} us + bytes / {:.2f} GB/s; allreduce (ring fit) {:.2f} us/step, "
        "{:.2f} GB/s\n",
        r.options.framework == "pytorch" ? "gloo" : "MPI", r.comm.pingpong_latency_s * 1e6, r.comm.pingpong_bandwidth_Bps / 1e9, r.comm.allreduce_latency_s * 1e6,
        r.comm.allreduce_bandwidth_Bps / 1e9);
  for (const auto& row : r.rows) {
    if (!row.prediction_note.empty()) std::cout << fmt::format("prediction, {} rank(s): {}\n", row.ranks, row.prediction_note);
    if (row.layout != "dp" && row.predicted_ms >= 0)
      std::cout << fmt::format("predicted rank 0, {}: compute {:.3f} ms, tensor-parallel collectives {:.3f} ms, pipeline "
                               "bubble {:.3f} ms, exposed communication {:.3f} ms\n",
                               row.layout, row.predicted.compute_ms, row.predicted.local_collectives_ms,
                               row.predicted.bubble_ms, row.predicted.exposed_communication_ms);
  }
  for (const auto& n : r.notes) std::cout << "note: " << n << '\n';
}

const CommandRegistrar registrar("validate", 80, [](CLI::App& root) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* cmd = root.add_subcommand(
      "validate", "Train a real network with MPI on this machine and compare the measured time with dtsim's prediction");
  cmd->add_option("--framework", a->options.framework,
                  "dtsim (dtsim-train: oneDNN + MPI) or pytorch (validate/pytorch/train.py: eager PyTorch, DDP over "
                  "gloo, predicted from libtorch calibration)")
      ->capture_default_str();
  cmd->add_option("--model", a->options.model,
                  "Network to train: lenet5 or resnet20 (or any model of supported ops); pytorch: lenet5, resnet18 or a "
                  "GPT-2 Hugging Face config.json (e.g. models/examples/hf/gpt-tiny/config.json, with --data synthetic)")
      ->capture_default_str();
  cmd->add_option("--side", a->options.side, "Image side (pytorch only; Fashion-MNIST is resized)")->capture_default_str();
  cmd->add_option("--channels", a->options.channels, "Image channels (pytorch only)")->capture_default_str();
  cmd->add_option("--seq-len", a->options.seq_len,
                  "Tokens per sequence (pytorch with a GPT config.json only; 0 = the config's n_positions)")
      ->capture_default_str();
  cmd->add_option("--allocator", a->options.allocator,
                  "pytorch only: the heap regime the trainer runs in and its libtorch calibration is timed in "
                  "(default glibc, what a plain script gets):\n" + calibrate::allocator_help());
  cmd->add_option("--ranks", a->ranks, "Comma-separated MPI rank counts, one run each")->capture_default_str();
  cmd->add_option("--parallel", a->options.parallel,
                  "pytorch with a GPT config.json: dp (data parallel over each --ranks entry), tp (2-way tensor "
                  "parallelism, 2 processes) or pp (2-stage 1F1B pipeline, 2 processes), predicted by dtsim's layout "
                  "planner")
      ->capture_default_str();
  cmd->add_option("--micro-batches", a->options.micro_batches,
                  fmt::format("--parallel pp: micro-batches per step, each of batch / micro-batches sequences "
                              "(default {})",
                              validate::PP_DEFAULT_MICRO_BATCHES));
  cmd->add_option("--threads", a->options.threads, "OpenMP threads per rank")->capture_default_str();
  cmd->add_option("--batch", a->options.batch,
                  "Samples per rank and iteration (--parallel tp|pp: sequences per step, the same on both processes)")
      ->capture_default_str();
  cmd->add_option("--iterations", a->options.iterations, "Timed iterations per run")->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed iterations before them")->capture_default_str();
  cmd->add_option("--strategy", a->options.strategy, "allreduce-ring or ps (rank 0 is the parameter server)")
      ->capture_default_str();
  cmd->add_option("--data", a->options.data, "fashion-mnist or synthetic")->capture_default_str();
  cmd->add_flag("--no-overlap", a->no_overlap, "Exchange gradients after backward instead of during it");
  cmd->add_option("--fusion-mb", a->fusion_mb, "Gradient bucket size, MiB (pytorch: bucket_cap_mb, default 25)")
      ->capture_default_str();
  cmd->add_option("--timeout", a->options.timeout_s, "Seconds after which a training run is killed")
      ->capture_default_str();
  cmd->add_flag("--unchecked-calibration", a->options.unchecked_calibration,
                "Busy machines: calibrate without the disturbance check, by process CPU time at 1 thread (compare the "
                "prediction with the trainer's own CPU time, not its wall time)");
  cmd->add_flag("--no-predict", [a](std::int64_t) { a->options.predict = false; }, "Measure only");
  cmd->add_option("--work-dir", a->options.work_dir, "Keep the trainer reports here (default: a new /tmp directory)");
  cmd->add_option("--format", a->format, "table, csv or json")->capture_default_str();
  cmd->callback([a, cmd] {
    const TextFormat format = parse_text_format(a->format);
    // A model-parallel layout runs on 2 processes: the ranks default to that.
    if (a->options.parallel != "dp" && cmd->count("--ranks") == 0) a->ranks = "2";
    a->options.ranks = parse_ranks(a->ranks);
    a->options.overlap = !a->no_overlap;
    const double DDP_BUCKET_CAP_MB = 25;  // torch.nn.parallel.DistributedDataParallel's default
    if (a->options.framework == "pytorch" && cmd->count("--fusion-mb") == 0) a->fusion_mb = DDP_BUCKET_CAP_MB;
    if (!(a->fusion_mb > 0)) throw InputError(fmt::format("--fusion-mb: expected > 0, got {}", a->fusion_mb));
    a->options.fusion_bytes = a->fusion_mb * 1024 * 1024;
    if (!a->options.allocator.empty()) {
      const auto& regime = calibrate::allocator_by_name(a->options.allocator);
      if (a->options.framework != "pytorch")
        throw InputError(fmt::format("--allocator: applies to --framework pytorch (dtsim-train allocates its "
                                     "buffers before training), got --framework {}",
                                     a->options.framework));
      run_under_allocator(regime);  // the in-process libtorch calibration times in the same regime
    }
    print(validate::run_validation(a->options), format);
  });
});

}  // namespace
}  // namespace dtsim::apps
