// `dtsim validate --framework pytorch --parallel tp|pp`: a GPT trained by 2 processes over gloo as 2-way
// tensor parallelism or a 2-stage 1F1B pipeline (validate/pytorch/model_parallel.py), set beside dtsim's
// layout planner (sim/src/plan/layout.cpp) playing the same layout on this machine: libtorch calibration of
// what one rank computes, the fitted gloo links, and gloo as the collective library (on the worker's cores).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "calibrate/allocator.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"
#include "sim/training.hpp"
#include "validate/src/shared.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {
namespace {

// Every layout here runs on 2 processes: the trainer's TP_RANKS and PP_STAGES.
constexpr int LAYOUT_PROCESSES = 2;

// The median over the timed iterations of a per-iteration field of the trainer's report (0 when absent).
double median_field(const std::string& report_text, const std::string& field) {
  std::vector<double> v;
  const nlohmann::json report = nlohmann::json::parse(report_text);
  for (const auto& it : report.at("iterations"))
    if (!it.value("warmup", false) && it.contains(field)) v.push_back(it.at(field).get<double>());
  if (v.empty()) return 0;
  const auto middle = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), middle, v.end());
  return *middle;
}

// Hidden width and tokens per sequence of a language model (its embedding's output).
std::pair<std::int64_t, std::int64_t> hidden_and_seq(const models::Model& model) {
  for (const auto& l : model.layers())
    if (l.row && std::string(models::op_name(l)) == "embedding") return {l.dst_shape.c, l.dst_shape.h};
  throw InputError(fmt::format("--parallel: model '{}' has no token embedding (a GPT config.json is expected)", model.name()));
}

}  // namespace

ValidationReport run_pytorch_layout_validation(const ValidateOptions& options, const std::string& dir) {
  if (!pytorch_available())
    throw Failure(fmt::format("--framework pytorch: {} cannot import torch and torchvision (install python3-torch "
                              "python3-torchvision, or set DTSIM_PYTHON)",
                              python_path()));
  const bool tp = options.parallel == "tp";
  const int micro_batches = tp ? 1 : (options.micro_batches > 0 ? options.micro_batches : PP_DEFAULT_MICRO_BATCHES);
  const int micro_batch = options.batch / micro_batches;  // check_options: a divisor
  ValidationReport report;
  report.options = options;
  const calibrate::AllocatorRegime& regime =
      calibrate::allocator_by_name(options.allocator.empty() ? calibrate::DEFAULT_ALLOCATOR : options.allocator);

  // The whole model at the micro-batch: the trainer checks its unsplit model against this table.
  models::ModelOptions mo;
  mo.batch = micro_batch;
  mo.seq_len = options.seq_len;
  const auto whole = models::load_model(options.model, mo);
  const auto [hidden, seq_len] = hidden_and_seq(whole);
  const std::string layers_path = dir + "/dtsim-layers.json";
  write_layer_table(whole, layers_path);
  // What one rank computes: the tensor-parallel shard (heads and MLP split; the embedding and the tied head
  // whole, as the trainer keeps them on both ranks), or the whole model at the micro-batch, whose blocks the
  // planner splits into the pipeline's stages.
  models::ModelOptions rank_mo = mo;
  if (tp) {
    rank_mo.tensor_parallel = LAYOUT_PROCESSES;
    rank_mo.replicated_vocab = true;
  }
  const auto rank_model = models::load_model(options.model, rank_mo);

  if (options.predict) measure_gloo(report, regime, dir, options.timeout_s);
  const std::string out = fmt::format("{}/pytorch-{}.json", dir, options.parallel);
  run_trainer({"--model", options.model, "--procs", std::to_string(LAYOUT_PROCESSES), "--parallel", options.parallel,
               "--micro-batches", std::to_string(micro_batches), "--threads", std::to_string(options.threads),
               "--batch", std::to_string(micro_batch), "--iterations", std::to_string(options.iterations), "--warmup",
               std::to_string(options.warmup), "--data", options.data, "--seq-len", std::to_string(seq_len),
               "--check-model", layers_path, "--out", out},
              regime, options.timeout_s, fmt::format("training (--parallel {}, 2 processes)", options.parallel));
  const std::string text = read_text(out);
  ValidationRow row;
  row.ranks = LAYOUT_PROCESSES;
  row.layout = options.parallel;
  row.measured = summarize_report(text);
  const double activation_B = static_cast<double>(micro_batch) * static_cast<double>(seq_len) *
                              static_cast<double>(hidden) * sizeof(float);
  if (tp)
    report.notes.push_back(fmt::format(
        "tp, measured on rank 0: {:.0f} gloo allreduces per iteration, {:.0f} B in all ({:.0f} B each; "
        "micro-batch x sequence x hidden x 4 B = {:.0f} B)",
        median_field(text, "allreduce_calls"), median_field(text, "allreduce_bytes"),
        median_field(text, "allreduce_bytes") / std::max(1.0, median_field(text, "allreduce_calls")), activation_B));
  else
    report.notes.push_back(fmt::format(
        "pp, measured on rank 0 (stage 0): {} micro-batches of {} sequences, {:.0f} B of activations sent per iteration "
        "({:.0f} B each), tied-embedding gradient allreduce of {:.0f} B",
        micro_batches, micro_batch, median_field(text, "sent_bytes"),
        median_field(text, "sent_bytes") / micro_batches, median_field(text, "allreduce_bytes")));
  report.notes.push_back(fmt::format("{}: the 2 processes' own CPU time, {:.1f} ms per iteration (median; beside the "
                                     "predicted compute of both ranks where wall times are inflated)",
                                     options.parallel, median_field(text, "own_cpu_s") * 1e3));
  add_measured_row(report, std::move(row), options.threads, "process(es)");
  report.notes.push_back("torch model checked equal to dtsim's (parameters and output shape of every layer), then split");
  if (!options.predict) return report;

  const HereCalibration here = calibrate_here(rank_model, options, dir, "libtorch", "libtorch ", "passes", report);
  auto platform = localhost_platform(report.comm, report.comm_measured);
  platform.node.intra.source = "dtsim validate: gloo allreduce curve of this machine, ring fit";
  calibrate::ProfileOptions po;
  po.threads = options.threads;
  po.workers_per_node = LAYOUT_PROCESSES;
  po.cpu_sockets = 1;
  po.db_path = here.db_path;
  po.backend = "libtorch";  // the trainer's eager PyTorch ops
  po.allocator = regime.name;
  const auto profile = calibrate::build_profile(rank_model, platforms::DeviceCatalog::builtin().by_name("host"), po);

  sim::TrainingPoint point;
  point.workers = LAYOUT_PROCESSES;
  point.workers_per_node = LAYOUT_PROCESSES;
  point.strategy = sim::strategy_by_name("allreduce-ring");
  point.runtime.collective_library =
      "gloo";  // torch.distributed's CPU backend: a ring, run on the worker's cores
  point.input.data = sim::DataMode::SYNTHETIC;
  point.fidelity.iterations = SIMULATED_ITERATIONS;
  auto& L = point.layout;
  L.tp = tp ? LAYOUT_PROCESSES : 1;
  L.pp = tp ? 1 : LAYOUT_PROCESSES;
  L.schedule = "1f1b";
  L.micro_batches = micro_batches;
  L.replicated_vocab = tp;
  L.samples_per_iteration = options.batch;
  // The bytes of one micro-batch as `dtsim predict` derives them (scenarios/src/predict.cpp, prepare_layout):
  // a tensor-parallel allreduce and an activation between stages are micro-batch x sequence x hidden, fp32.
  L.tp_bytes = activation_B;
  L.pp_bytes = activation_B;
  const auto res = sim::simulate_training(platform, profile, point);

  auto& r = report.rows.back();
  const auto stage = sim::layout_stage_times(profile, L, point.workers, 0);  // rank 0: the trainer's phases
  auto& ph = r.measured.phases;
  ph["iteration"].predicted_ms = res.iteration_time_s * 1e3;
  ph["forward"].predicted_ms = stage.fwd_s * micro_batches * 1e3;
  ph["backward"].predicted_ms = stage.bwd_s * micro_batches * 1e3;
  ph["update"].predicted_ms = stage.update_s * 1e3;
  ph["exchange"].predicted_ms = res.breakdown.exposed_communication_s * 1e3;
  ph["data"].predicted_ms = res.breakdown.io_stall_s * 1e3;
  r.predicted_ms = ph["iteration"].predicted_ms;
  r.error_pct = ph["iteration"].error_pct();
  r.predicted = {res.breakdown.compute_s * 1e3, res.breakdown.local_collectives_s * 1e3, res.breakdown.bubble_s * 1e3,
                 res.breakdown.exposed_communication_s * 1e3};
  // Both ranks' compute per iteration, beside the processes' own CPU time: the tensor-parallel ranks compute
  // alike; the pipeline's stages each their own.
  double both_ranks_s = 0;
  for (int rank = 0; rank < LAYOUT_PROCESSES; ++rank) {
    const auto t = sim::layout_stage_times(profile, L, point.workers, tp ? 0 : rank);
    both_ranks_s += (t.fwd_s + t.bwd_s) * micro_batches + t.update_s;
  }
  r.prediction_note = fmt::format(
      "layout planner, {}, gloo; {} calibration{} of {}, coverage {:.0f}%; link {:.2f} GB/s / {:.1f} us; compute of "
      "both ranks {:.1f} ms per iteration",
      tp ? fmt::format("tp 2 (embedding and head replicated), {} B per allreduce", L.tp_bytes)
         : fmt::format("pp 2, 1F1B, {} micro-batches of {}, {} B per transfer", micro_batches, micro_batch, L.pp_bytes),
      profile.calibration_backend,
      profile.calibration_allocator.empty() ? "" : " (heap " + profile.calibration_allocator + ")",
      tp ? "the rank's shard" : "the model at the micro-batch", profile.coverage * 100,
      platform.node.intra.link_bandwidth_Bps / 1e9, platform.node.intra.latency_s * 1e6, both_ranks_s * 1e3);
  return report;
}

}  // namespace dtsim::validate
