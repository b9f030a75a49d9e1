// `dtsim predict`: throughput, scaling efficiency and time breakdown of data-parallel training for a
// list of worker counts, from a scenario file and/or flags (flags override the file).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "scenarios/config.hpp"
#include "platforms/transport.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::apps {
namespace {

constexpr double BYTES_PER_MB = 1024.0 * 1024.0;
constexpr double S_PER_MS = 1e-3;
constexpr std::size_t PARAGRAPH_COLUMNS = 100;

struct PredictArgs {
  std::string scenario, model, platform, workers, strategy, framework, collective_library, ps, ps_placement, ps_balance,
      ps_transport, data, format = "table", out, trace, precision, dump_config;
  int batch = 0, workers_per_node = 0, threads = 0, iterations = 0, trace_iterations = 1, jobs = 1;
  double fusion_mb = 0, cycle_ms = 0, anchor = 0;
  bool explain = false, quiet = false, no_overlap = false, no_interference = false, allow_oversubscribe = false, no_variability = false;
  CLI::App* cmd = nullptr;
  bool given(const char* flag) const { return cmd->count(flag) > 0; }
};

// The scenario fields set by flags ("--fusion-mb" -> "fusion_mb").
std::set<std::string> given_fields(const PredictArgs& a) {
  std::set<std::string> out;
  for (const char* flag : {"--model", "--platform", "--workers", "--batch", "--workers-per-node", "--threads",
                           "--strategy", "--ps", "--ps-placement", "--ps-balance", "--fusion-mb", "--cycle-ms",
                           "--no-overlap", "--data", "--anchor", "--iterations", "--trace", "--framework",
                           "--precision", "--collective-library", "--ps-transport", "--no-interference"}) {
    if (!a.given(flag)) continue;
    std::string field(flag + 2);
    std::replace(field.begin(), field.end(), '-', '_');
    out.insert(field == "no_overlap" ? "overlap" : field == "no_interference" ? "interference" : field);
  }
  return out;
}

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
  if (a.given("--ps-transport"))
    s.point.ps_transport =
        platforms::transport_by_name(a.ps_transport, platforms::TransportScope::RPC).name;  // error lists the names
  if (a.given("--framework")) sim::apply_framework(s.point, sim::framework_by_name(a.framework));  // flags below override
  if (a.given("--collective-library")) {
    sim::check_collective_library(a.collective_library);
    s.point.collective_library = a.collective_library;
  }
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
  if (a.no_variability) s.point.variability = sim::Variability::none();
  if (a.given("--no-interference")) s.point.interference = false;
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
    s.point.trace_iterations = a.trace_iterations;  // after the warm-up one unless --iterations says otherwise
  }
  // A flag replaces the file's value: errors about it then name the flag, not the file.
  for (const std::string& field : given_fields(a)) s.field_origin.erase(field);
  if (a.given("--precision")) s.precision = calibrate::precision_by_name(a.precision);
  if (a.allow_oversubscribe) s.allow_oversubscribe = true;
  return s;
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

void print(const PredictArgs& a, const scenarios::Scenario& s, const scenarios::ConfigSummary& config,
           const std::vector<sim::PointResult>& rows, std::ostream& out) {
  const TextFormat format = parse_text_format(a.format);
  if (format == TextFormat::JSON) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& r : rows) points.push_back(sim::to_json(r));
    nlohmann::json doc{{"model", s.model},           {"platform", s.platform},
                       {"strategy", sim::to_string(s.point.strategy)}, {"framework", s.point.framework.name}, {"batch", s.batch},
                       {"points", points}};
    doc["config"] = scenarios::config_json(config);
    out << doc.dump(2) << '\n';
    return;
  }
  // People read the table: the configuration header first, times with units; CSV keeps seconds.
  const bool human = format == TextFormat::TABLE;
  if (human) out << scenarios::config_header(config);
  const std::string unit = human ? "" : "_s";
  std::vector<std::string> header{"workers", "nodes", "ps", "throughput", "efficiency", "iteration" + unit,
                                  "compute" + unit, "comm" + unit, "exposed_comm" + unit, "io_stall" + unit};
  // CSV keeps the explanation as a column; a table prints it as paragraphs underneath.
  const bool explain_column = a.explain && format == TextFormat::CSV;
  if (explain_column) header.push_back("bottleneck");
  auto time = [&](double v) { return human ? human_seconds(v) : fixed(v, 4); };
  Table table(header);
  for (const auto& r : rows) {
    std::vector<std::string> row{std::to_string(r.workers), std::to_string(r.nodes), std::to_string(r.ps_servers),
                                 fixed(r.throughput, 1), fixed(r.efficiency, 3), time(r.iteration_time_s),
                                 time(r.breakdown.compute_s), time(r.breakdown.communication_s),
                                 time(r.breakdown.exposed_communication_s), time(r.breakdown.io_stall_s)};
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

void write_text_file(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream file(path);
  if (!file) throw InputError(fmt::format("{}: cannot write '{}'", flag, path));
  file << text;
  if (!file) throw Failure(fmt::format("{}: error while writing '{}'", flag, path));
}

void run(const PredictArgs& a) {
  (void)parse_text_format(a.format);  // reject a bad --format before simulating anything
  const scenarios::Scenario s = build_scenario(a);
  if (!a.dump_config.empty()) {
    scenarios::check_scenario(s);
    const std::string yaml = scenarios::scenario_to_yaml(s);
    if (a.dump_config == "-") std::cout << yaml;
    else write_text_file(a.dump_config, yaml, "--dump-config");
    return;
  }
  scenarios::PredictOptions options;
  options.jobs = a.jobs;
  options.progress = !a.quiet;
  const auto rows = scenarios::predict_scenario(s, options);
  const auto config = scenarios::summarize_config({s}, given_fields(a));
  // The table's header carries the warning; machine formats and --out files get it on stderr instead.
  const bool header_on_terminal = parse_text_format(a.format) == TextFormat::TABLE && a.out.empty();
  if (const auto warning = scenarios::coverage_warning(config); !warning.empty() && !header_on_terminal)
    std::cerr << "dtsim: " << warning << '\n';
  const auto beyond = std::find_if(rows.begin(), rows.end(), [](const auto& r) { return r.ps_servers > r.workers; });
  if (sim::uses_servers(s.point.strategy) && beyond != rows.end())
    // Allowed (a job may start more server processes than workers), but it cannot help: say so once.
    fmt::print(stderr,
               "dtsim: note: {} parameter servers for {} workers: past one per worker, more servers cannot be "
               "faster, since each worker's own NIC already carries the whole model both ways\n",
               beyond->ps_servers, beyond->workers);
  if (s.point.framework.calibration != "onednn") {
    // Which calibration the framework's compute came from (stderr: the result's shape is unchanged).
    const auto source = scenarios::compute_source(s);
    fmt::print(stderr, "compute: {} calibration, measured coverage {:.0f}%{}\n", source.used, source.coverage * 100,
               source.used == source.wanted
                   ? ""
                   : fmt::format(" (no {} entries in the database: run dtsim calibrate --backend {})", source.wanted,
                                 source.wanted));
  }
  if (a.out.empty()) {
    print(a, s, config, rows, std::cout);
    return;
  }
  std::ostringstream text;
  print(a, s, config, rows, text);
  write_text_file(a.out, text.str(), "--out");
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
  cmd->add_option("--ps-balance", a->ps_balance, "greedy|round-robin|mxnet (variable placement on servers: TensorFlow's greedy by bytes, in order, or MXNet ps-lite's: arrays of 1e6+ values split over all servers, the others by key hash)");
  cmd->add_option("--ps-transport", a->ps_transport,
                  "RPC layer of parameter-server traffic (docs/transports.md; default none), one of:\n" +
                      platforms::transport_help(platforms::TransportScope::RPC));
  cmd->add_option("--framework", a->framework,
                  "Framework runtime profile (sets fusion and cycle defaults; docs/frameworks.md), one of:\n" +
                      sim::framework_help());
  cmd->add_option("--collective-library", a->collective_library,
                  "Collective library picking each allreduce's algorithm (allreduce-auto) and protocol "
                  "(docs/collective-libraries.md). Overrides the scenario; unset: the framework's (Horovod/DDP on GPUs: "
                  "NCCL; DDP on CPUs: gloo), else the platform's collective_library, else NCCL on GPU nodes and "
                  "Open MPI on CPU nodes. One of:\n" +
                      sim::collective_library_help());
  cmd->add_option("--fusion-mb", a->fusion_mb, "Gradient fusion threshold in MiB (0 = one exchange per layer)");
  cmd->add_option("--cycle-ms", a->cycle_ms, "Horovod cycle time in ms (0 = exchange as soon as ready)");
  cmd->add_flag("--no-overlap", a->no_overlap, "Start gradient exchange only after the whole backward pass");
  cmd->add_flag("--no-variability", a->no_variability,
                "Every worker computes alike: no device spread (default on: GPUs 1.48%, CPUs 2.08% CV, "
                "docs/simulation-training.md) and none of the scenario's jitter or stragglers");
  cmd->add_flag("--no-interference", a->no_interference,
                "GPUs: compute overlapped with a collective runs at full speed (default: 1.189x slower; "
                "docs/simulation-training.md)");
  cmd->add_option("--data", a->data, "synthetic|real (real: read input from the platform's storage)");
  cmd->add_option("--anchor", a->anchor, "Measured single-worker throughput (samples/s) fixing the compute scale");
  cmd->add_option("--iterations", a->iterations,
                  "Simulated iterations, the first warm-up (default 3; 6 for ps-async, whose workers take several to settle)");
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
  cmd->add_option("-j,--jobs", a->jobs, "Points simulated at once (child processes): the entries, or --ps auto's "
                                       "server counts")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet", a->quiet, "No progress line on stderr (--ps auto)");
  cmd->add_flag("--explain", a->explain,
                "Explain each point under the table: shares of the iteration, busiest resource, advice");
  cmd->add_option("--dump-config", a->dump_config,
                  "Write the fully resolved scenario as YAML to this file ('-' = stdout) and exit without predicting; "
                  "`dtsim predict FILE` and `dtsim sweep FILE` load it again");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dtsim::apps
