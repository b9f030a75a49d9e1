// `dtsim predict`: throughput, scaling efficiency and time breakdown of data-parallel training for a
// list of worker counts, from a scenario file and/or flags (flags override the file).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::apps {
namespace {

constexpr double BYTES_PER_MB = 1024.0 * 1024.0;
constexpr double S_PER_MS = 1e-3;
constexpr std::size_t PARAGRAPH_COLUMNS = 100;

struct PredictArgs {
  std::string scenario, model, platform, workers, strategy, framework, ps, ps_placement, ps_balance, data, format = "table",
                                                                                                 out, trace, precision;
  int batch = 0, workers_per_node = 0, threads = 0, iterations = 0, trace_iterations = 1;
  double fusion_mb = 0, cycle_ms = 0, anchor = 0;
  bool explain = false, no_overlap = false, allow_oversubscribe = false;
  CLI::App* cmd = nullptr;
  bool given(const char* flag) const { return cmd->count(flag) > 0; }
};

scenarios::Scenario build_scenario(const PredictArgs& a) {
  scenarios::Scenario s;
  if (!a.scenario.empty()) {
    s = scenarios::load_scenario(a.scenario);
  } else {
    s.name = "cli";
  }
  if (a.given("--model")) s.model = a.model;
  if (a.given("--platform")) s.platform = a.platform;
  if (a.given("--workers")) s.workers = scenarios::parse_count_list(a.workers, "--workers");
  if (a.given("--batch")) {
    if (a.batch < 1) throw InputError(fmt::format("--batch: expected >= 1 sample per worker, got {}", a.batch));
    s.batch = a.batch;
  }
  if (a.given("--workers-per-node")) {
    if (a.workers_per_node < 1) throw InputError(fmt::format("--workers-per-node: expected >= 1, got {}", a.workers_per_node));
    s.point.workers_per_node = a.workers_per_node;
  }
  if (a.given("--threads")) {
    if (a.threads < 1) throw InputError(fmt::format("--threads: expected >= 1, got {}", a.threads));
    s.threads = a.threads;
  }
  if (a.given("--strategy")) s.point.strategy = sim::strategy_by_name(a.strategy);
  if (a.given("--ps")) scenarios::set_ps_text(s, a.ps, "--ps");
  if (a.given("--ps-placement")) s.point.ps_placement = sim::ps_placement_by_name(a.ps_placement);
  if (a.given("--ps-balance")) s.point.ps_balance = sim::ps_balance_by_name(a.ps_balance);
  if (a.given("--framework")) sim::apply_framework(s.point, sim::framework_by_name(a.framework));  // flags below override
  if (a.given("--fusion-mb")) {
    if (!(a.fusion_mb >= 0) || a.fusion_mb > 1e6)
      throw InputError(fmt::format("--fusion-mb: expected 0..1e6 MiB, got {}", a.fusion_mb));
    s.point.fusion_bytes = a.fusion_mb * BYTES_PER_MB;
  }
  if (a.given("--cycle-ms")) {
    if (!(a.cycle_ms >= 0)) throw InputError(fmt::format("--cycle-ms: expected >= 0, got {}", a.cycle_ms));
    s.point.cycle_s = a.cycle_ms * S_PER_MS;
  }
  if (a.given("--no-overlap")) s.point.overlap = false;
  if (a.given("--data")) s.point.data = sim::data_mode_by_name(a.data);
  if (a.given("--anchor")) {
    if (!(a.anchor > 0)) throw InputError(fmt::format("--anchor: expected a throughput > 0 samples/s, got {}", a.anchor));
    s.anchor_samples_per_s = a.anchor;
  }
  if (a.given("--iterations")) {
    if (a.iterations < 1) throw InputError(fmt::format("--iterations: expected >= 1, got {}", a.iterations));
    s.point.iterations = a.iterations;
  }
  if (a.given("--trace")) s.point.trace_path = a.trace;
  if (a.given("--trace-iterations")) {
    if (a.trace_iterations < 1)
      throw InputError(fmt::format("--trace-iterations: expected >= 1, got {}", a.trace_iterations));
    if (s.point.trace_path.empty()) throw InputError("--trace-iterations: needs --trace FILE (or trace: in the scenario)");
    s.point.trace_iterations = a.trace_iterations;
    // The traced iterations follow the warm-up one unless --iterations says otherwise.
    if (!a.given("--iterations")) s.point.iterations = std::max(s.point.iterations, a.trace_iterations + 1);
  }
  // A flag replaces the file's value: errors about it then name the flag, not the file.
  for (const char* flag : {"--model", "--platform", "--workers", "--batch", "--workers-per-node", "--threads",
                           "--strategy", "--ps", "--ps-placement", "--ps-balance", "--fusion-mb", "--cycle-ms",
                           "--no-overlap", "--data", "--anchor", "--iterations", "--trace", "--framework"}) {
    if (!a.given(flag)) continue;
    std::string field(flag + 2);
    std::replace(field.begin(), field.end(), '-', '_');
    s.field_origin.erase(field);
  }
  if (a.given("--precision")) s.precision = calibrate::precision_by_name(a.precision);
  if (a.allow_oversubscribe) s.allow_oversubscribe = true;
  return s;
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

void print(const PredictArgs& a, const scenarios::Scenario& s, const std::vector<sim::PointResult>& rows,
           std::ostream& out) {
  const TextFormat format = parse_text_format(a.format);
  if (format == TextFormat::JSON) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json p{{"workers", r.workers},
                       {"nodes", r.nodes},
                       {"ps_servers", r.ps_servers},
                       {"throughput", r.throughput},
                       {"efficiency", r.efficiency},
                       {"iteration_time_s", r.iteration_time_s},
                       {"breakdown",
                        {{"compute_s", r.breakdown.compute_s},
                         {"communication_s", r.breakdown.communication_s},
                         {"exposed_communication_s", r.breakdown.exposed_communication_s},
                         {"io_stall_s", r.breakdown.io_stall_s}}},
                       {"bottleneck", r.bottleneck},
                       {"inter_node_bytes", r.inter_node_bytes},
                       {"buckets", r.buckets},
                       {"wall_s", r.wall_s}};
      points.push_back(p);
    }
    nlohmann::json doc{{"model", s.model},           {"platform", s.platform},
                       {"strategy", sim::to_string(s.point.strategy)}, {"framework", s.point.framework.name}, {"batch", s.batch},
                       {"points", points}};
    out << doc.dump(2) << '\n';
    return;
  }
  std::vector<std::string> header{"workers", "nodes", "ps", "throughput", "efficiency", "iteration_s",
                                  "compute_s", "comm_s", "exposed_comm_s", "io_stall_s"};
  // CSV keeps the explanation as a column; a table prints it as paragraphs underneath.
  const bool explain_column = a.explain && format == TextFormat::CSV;
  if (explain_column) header.push_back("bottleneck");
  Table table(header);
  for (const auto& r : rows) {
    std::vector<std::string> row{std::to_string(r.workers), std::to_string(r.nodes), std::to_string(r.ps_servers),
                                 fixed(r.throughput, 1), fixed(r.efficiency, 3), fixed(r.iteration_time_s, 4),
                                 fixed(r.breakdown.compute_s, 4), fixed(r.breakdown.communication_s, 4),
                                 fixed(r.breakdown.exposed_communication_s, 4), fixed(r.breakdown.io_stall_s, 4)};
    if (explain_column) row.push_back(r.bottleneck);
    table.add_row(std::move(row));
  }
  table.print(out, format);
  if (format != TextFormat::TABLE) return;
  for (const auto& r : rows) {
    // An efficiency above 1 is never shown without its reason.
    const std::string text = a.explain ? r.bottleneck : scenarios::efficiency_note_in(r.bottleneck);
    if (!text.empty()) out << '\n' << scenarios::wrap_paragraph(text, PARAGRAPH_COLUMNS);
  }
}

void run(const PredictArgs& a) {
  (void)parse_text_format(a.format);  // reject a bad --format before simulating anything
  const scenarios::Scenario s = build_scenario(a);
  const auto rows = scenarios::predict_scenario(s);
  if (a.out.empty()) {
    print(a, s, rows, std::cout);
    return;
  }
  std::ostringstream text;
  print(a, s, rows, text);
  std::ofstream file(a.out);
  if (!file) throw InputError(fmt::format("--out: cannot write '{}'", a.out));
  file << text.str();
  if (!file) throw Failure(fmt::format("--out: error while writing '{}'", a.out));
}

const CommandRegistrar registrar("predict", 30, [](CLI::App& root) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* cmd = root.add_subcommand(
      "predict", "Predict training throughput, scaling efficiency and time breakdown (docs/simulation-training.md)");
  a->cmd = cmd;
  cmd->add_option("scenario", a->scenario, "Scenario YAML file (docs/scenario-schema.md); flags override it");
  cmd->add_option("--model", a->model, "Zoo model name or model YAML file");
  cmd->add_option("--platform", a->platform, "Platform name or platform YAML file");
  cmd->add_option("--workers", a->workers, "Worker counts, e.g. 1,2,4,8 (one prediction each)");
  cmd->add_option("--batch", a->batch, "Samples per worker and iteration");
  cmd->add_option("--workers-per-node", a->workers_per_node, "Workers per node (default: GPUs per node, or 1 on CPU)");
  cmd->add_option("--threads", a->threads, "CPU threads per worker process (CPU platforms)");
  cmd->add_option("--strategy", a->strategy, "Gradient exchange, one of:\n" + sim::strategy_help());
  cmd->add_option("--ps", a->ps, "Parameter servers: N, one per --workers entry (N1,N2,...), or auto");
  cmd->add_option("--ps-placement", a->ps_placement, "colocated|dedicated");
  cmd->add_option("--ps-balance", a->ps_balance, "greedy|round-robin (variable placement on servers)");
  cmd->add_option("--framework", a->framework,
                  "Framework runtime profile (sets fusion and cycle defaults; docs/frameworks.md), one of:\n" +
                      sim::framework_help());
  cmd->add_option("--fusion-mb", a->fusion_mb, "Gradient fusion threshold in MiB (0 = one exchange per layer)");
  cmd->add_option("--cycle-ms", a->cycle_ms, "Horovod cycle time in ms (0 = exchange as soon as ready)");
  cmd->add_flag("--no-overlap", a->no_overlap, "Start gradient exchange only after the whole backward pass");
  cmd->add_option("--data", a->data, "synthetic|real (real: read input from the platform's storage)");
  cmd->add_option("--anchor", a->anchor, "Measured single-worker throughput (samples/s) fixing the compute scale");
  cmd->add_option("--iterations", a->iterations, "Simulated iterations (the first is warm-up)");
  cmd->add_option("--precision", a->precision,
                  "fp32|fp16-mixed (FP16 tensor cores: V100, T4, A100, H100; FP16 activations and gradients)");
  cmd->add_flag("--allow-oversubscribe", a->allow_oversubscribe,
                "Predict even when the memory estimate exceeds the GPU's memory (else exit 2)");
  cmd->add_option("--format", a->format, "table|csv|json");
  cmd->add_option("--out", a->out, "Write the output to this file instead of stdout");
  cmd->add_option("--trace", a->trace,
                  "Write a Chrome/Perfetto trace of the last point (worker, exchange and server tracks, link "
                  "utilisation counters)");
  cmd->add_option("--trace-iterations", a->trace_iterations,
                  "Iterations in the trace, the last N (default 1; raises --iterations to N+1 unless given)");
  cmd->add_flag("--explain", a->explain,
                "Explain each point under the table: shares of the iteration, busiest resource, advice");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dtsim::apps
