// `dtsim predict`: throughput, scaling efficiency and time breakdown of data-parallel training for a
// list of worker counts, from a scenario file and/or flags (flags override the file).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/command.hpp"
#include "apps/scenario_flags.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "scenarios/config.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::apps {
namespace {

constexpr std::size_t PARAGRAPH_COLUMNS = 100;

struct PredictArgs {
  std::string format = "table", out, dump_config;
  int jobs = 1;
  bool explain = false, quiet = false;
  ScenarioFlags flags;
};

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

void print(const PredictArgs& a, const scenarios::Scenario& s, const scenarios::ConfigSummary& config,
           const std::vector<sim::PointResult>& rows, std::ostream& out) {
  const TextFormat format = parse_text_format(a.format);
  if (format == TextFormat::JSON) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& r : rows) points.push_back(sim::to_json(r));
    nlohmann::json doc{{"model", s.model},
                       {"platform", s.platform},
                       {"strategy", sim::to_string(s.point.strategy)},
                       {"framework", s.point.runtime.framework.name},
                       {"batch", s.batch},
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
  const scenarios::Scenario s = a.flags.build();
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
  const auto config = scenarios::summarize_config({s}, a.flags.given_fields());
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
  if (s.point.runtime.framework.calibration != "onednn") {
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
  add_scenario_flags(cmd, a->flags);
  cmd->add_option("--format", a->format, "table|csv|json");
  cmd->add_option("--out", a->out, "Write the output to this file instead of stdout");
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
