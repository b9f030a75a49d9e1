// `dtsim plot RESULTS`: scaling, efficiency, breakdown, platform and accuracy plots (PNG + SVG) from
// a sweep/compare directory, a results.csv or an accuracy.csv, via plots/plot_results.py; --timeline:
// a trace's timeline via plots/plot_timeline.py.
#include <filesystem>
#include <iostream>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::apps {
namespace {

struct PlotArgs {
  std::string results, out, name, timeline;
};

const CommandRegistrar registrar("plot", 43, [](CLI::App& root) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = root.add_subcommand("plot", "Plot sweep, compare or accuracy results (PNG and SVG)");
  cmd->add_option("results", args->results, "A sweep/compare output directory, results.csv or accuracy.csv");
  cmd->add_option("--timeline", args->timeline,
                  "Plot a trace written by `predict --trace` as timeline.png/svg (workers, exchanges, servers, "
                  "link utilisation)");
  cmd->add_option("--out", args->out, "Directory for the plots (default: beside the results)");
  cmd->add_option("--name", args->name, "Name shown in plot titles (default: the directory name)");
  cmd->callback([args] {
    std::vector<std::string> extra;
    if (!args->name.empty()) extra = {"--name", args->name};
    if (!args->timeline.empty() && !args->results.empty())
      throw InputError("plot: give either RESULTS or --timeline TRACE, not both");
    if (args->timeline.empty() && args->results.empty())
      throw InputError("plot: RESULTS is required (a sweep/compare directory, results.csv or accuracy.csv), or "
                       "--timeline TRACE");
    if (!args->timeline.empty()) {
      std::string out = args->out.empty() ? std::filesystem::path(args->timeline).parent_path().string() : args->out;
      std::cout << scenarios::run_timeline_plot(args->timeline, out.empty() ? "." : out, extra);
      return;
    }
    std::string out = args->out;
    if (out.empty()) {
      const std::filesystem::path p(args->results);
      out = std::filesystem::is_directory(p) ? p.string() : p.parent_path().string();
      if (out.empty()) out = ".";
    }
    std::cout << scenarios::run_plots(args->results, out, extra);
  });
});

}  // namespace
}  // namespace dtsim::apps
