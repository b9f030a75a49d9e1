// `dtsim sweep SCENARIO`: expand the scenario's sweep block and run every point (parallel, resumable,
// MPI-aware), writing results.jsonl + results.csv (and plots with --plot) into --out.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/yaml_util.hpp"
#include "scenarios/config.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::apps {
namespace {

struct SweepArgs {
  std::string scenario;
  std::string out;
  std::string dump_config;
  int jobs = 1;
  bool retry_failed = false;
  bool quiet = false;
  bool plot = false;
  bool list = false;
};

void run(const SweepArgs& a) {
  const yaml::Origin origin{a.scenario};
  const YAML::Node node = yaml::load_file(a.scenario);
  if (!node.IsMap()) throw InputError(fmt::format("{}: a scenario must be a map of fields", a.scenario));
  const scenarios::SweepSpec spec = scenarios::parse_sweep(node["sweep"], origin);
  auto points = scenarios::expand_sweep(node, spec, origin);
  scenarios::stamp_points(points, origin);
  if (!a.dump_config.empty()) {
    const std::string yaml = scenarios::scenario_to_yaml(scenarios::parse_scenario_node(node, origin), node["sweep"]);
    if (a.dump_config == "-") {
      std::cout << yaml;
      return;
    }
    std::ofstream file(a.dump_config);
    if (!file) throw InputError(fmt::format("--dump-config: cannot write '{}'", a.dump_config));
    file << yaml;
    if (!file) throw Failure(fmt::format("--dump-config: error while writing '{}'", a.dump_config));
    return;
  }
  if (a.list) {
    for (const auto& p : points) std::cout << p.index << ' ' << p.id << ' ' << p.key << '\n';
    return;
  }
  scenarios::SweepOptions opt;
  opt.jobs = a.jobs;
  opt.out_dir = a.out.empty() ? (std::filesystem::path("results") / std::filesystem::path(a.scenario).stem()).string()
                              : a.out;
  opt.progress = !a.quiet;
  opt.retry_failed = a.retry_failed;
  const auto s = scenarios::run_sweep(points, origin, opt, scenarios::predict_point);
  if (s.mpi_rank != 0) return;
  std::vector<scenarios::Scenario> parsed;
  for (const auto& p : points) parsed.push_back(scenarios::parse_scenario_node(p.node, origin));
  const auto config = scenarios::summarize_config(parsed);
  std::cout << scenarios::config_header(config);  // carries the coverage warning
  std::cout << fmt::format("sweep {}: {} points ({} already done, {} run now{}{}, {} with errors) -> {}\n", a.scenario,
                           s.total, s.skipped, s.ran, s.mpi_ranks > 1 ? fmt::format(" on {} MPI ranks", s.mpi_ranks) : "",
                           s.stale > 0 ? fmt::format(", {} of them recorded from other inputs", s.stale) : "", s.failed,
                           s.csv_path);
  if (s.interrupted)
    throw Failure(fmt::format("interrupted: finished points are kept in {}; run the same command again to finish",
                              s.jsonl_path));
  // Plots are titled with the scenario's description (else its name).
  const auto& first = parsed.front();
  if (a.plot)
    std::cout << scenarios::run_plots(opt.out_dir, opt.out_dir,
                                      {"--name", first.description.empty() ? first.name : first.description});
}

const CommandRegistrar registrar("sweep", 40, [](CLI::App& root) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = root.add_subcommand(
      "sweep", "Run every point of a scenario's sweep block (parallel, resumable; splits across ranks under mpirun)");
  cmd->add_option("scenario", args->scenario, "Scenario YAML file with a sweep: block (docs/scenario-schema.md)")
      ->required();
  cmd->add_option("--out", args->out, "Output directory for results.jsonl/results.csv (default results/<stem>)");
  cmd->add_option("-j,--jobs", args->jobs, "Points simulated at once (worker processes per rank)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--retry-failed", args->retry_failed, "Re-run points recorded with an error");
  cmd->add_flag("--quiet", args->quiet, "No progress line on stderr");
  cmd->add_flag("--plot", args->plot, "Write the plots (plots/plot_results.py) into --out when done");
  cmd->add_flag("--list", args->list, "Only list the points (index, id, key) and exit");
  cmd->add_option("--dump-config", args->dump_config,
                  "Write the fully resolved scenario (every default written out, file paths absolute, the sweep "
                  "block kept) as YAML to this file ('-' = stdout) and exit");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace dtsim::apps
