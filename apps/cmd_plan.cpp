// `dtsim plan`: the best parallel layouts of a transformer on a number of GPUs (scenarios/plan.hpp,
// docs/layout-search.md), from a scenario file and/or predict's flags.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "apps/scenario_flags.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "scenarios/explain.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/plan.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::apps {
namespace {

constexpr std::size_t PARAGRAPH_COLUMNS = 100;

struct PlanArgs {
  std::string format = "table", out;
  int jobs = 1, top = 10;
  std::size_t max_candidates = 2000;
  bool quiet = false, exhaustive = false;
  scenarios::PlanSpace space;
  ScenarioFlags flags;
};

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

void print(const PlanArgs& a, const scenarios::PlanSummary& summary, std::ostream& out) {
  const TextFormat format = parse_text_format(a.format);
  const auto& e = summary.enumeration;
  const std::size_t shown = std::min(summary.ranked.size(), static_cast<std::size_t>(a.top));
  if (format == TextFormat::JSON) {
    nlohmann::json layouts = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& row = summary.ranked[i];
      const auto& l = row.candidate.layout;
      layouts.push_back({{"rank", i + 1}, {"tp", l.tp}, {"pp", l.pp}, {"vp", l.vp}, {"cp", l.cp}, {"ep", l.ep},
                         {"micro_batch", row.candidate.micro_batch}, {"zero", l.zero}, {"recompute", l.recompute},
                         {"sequence_parallel", l.tp > 1}, {"bound_s", row.bound_s},
                         {"result", sim::to_json(row.result)}});
    }
    nlohmann::json doc{{"enumerated", e.enumerated}, {"fitting", e.fitting.size()}, {"dropped", e.dropped},
                       {"simulated", summary.simulated}, {"already_done", summary.skipped}, {"failed", summary.failed},
                       {"pruned_by_bound", summary.pruned},
                       {"layouts", layouts}, {"reason", scenarios::plan_reason(summary.ranked)}};
    out << doc.dump(2) << '\n';
    return;
  }
  const bool human = format == TextFormat::TABLE;
  if (human) {
    out << fmt::format("{} enumerated, {} fit: {} simulated ({} now, {} already in --out, {} with errors), {} left out "
                       "because the {} fastest simulated beat their bound\n",
                       plural(static_cast<long long>(e.enumerated), "layout"), e.fitting.size(),
                       summary.simulated + summary.skipped, summary.simulated, summary.skipped, summary.failed,
                       summary.pruned, a.top);
    for (const auto& [reason, count] : e.dropped) out << fmt::format("  dropped {}: {}\n", count, reason);
    out << '\n';
  }
  const std::string unit = human ? "" : "_s";
  Table table({"rank", "tp", "pp", "vp", "cp", "ep", "mb", "zero", "recompute", "tokens_per_s", "mfu",
               human ? "memory" : "memory_B", "iteration" + unit, "bubble" + unit, "local_comm" + unit,
               "exposed_dp" + unit, "recompute" + unit});
  const auto time = [&](double v) { return human ? human_seconds(v) : fixed(v, 4); };
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& r = summary.ranked[i].result;
    const auto& c = summary.ranked[i].candidate;
    const auto& b = r.breakdown;
    table.add_row({std::to_string(i + 1), std::to_string(c.layout.tp), std::to_string(c.layout.pp),
                   std::to_string(c.layout.vp), std::to_string(c.layout.cp), std::to_string(c.layout.ep),
                   std::to_string(c.micro_batch), std::to_string(c.layout.zero), c.layout.recompute,
                   fixed(r.tokens_per_s, 0), human ? fixed(r.mfu * 100, 1) + "%" : fixed(r.mfu, 4),
                   human ? human_bytes(r.memory_per_device_B) : fixed(r.memory_per_device_B, 0),
                   time(r.iteration_time_s), time(b.bubble_s), time(b.local_collectives_s),
                   time(b.exposed_after_backward_s), time(b.recompute_s)});
  }
  table.print(out, format);
  if (human && !summary.ranked.empty())
    out << '\n' << scenarios::wrap_paragraph(scenarios::plan_reason(summary.ranked), PARAGRAPH_COLUMNS);
}

void run(const PlanArgs& a) {
  (void)parse_text_format(a.format);
  if (a.top < 1) throw InputError(fmt::format("--top: must be >= 1, got {}", a.top));
  const scenarios::Scenario s = a.flags.build();
  scenarios::PlanOptions options;
  options.space = a.space;
  options.jobs = a.jobs;
  options.max_candidates = a.max_candidates;
  options.top = static_cast<std::size_t>(a.top);
  options.prune = !a.exhaustive;
  options.out_dir = a.out;
  options.progress = !a.quiet;
  const auto summary = scenarios::run_plan(s, options);
  if (summary.mpi_rank != 0) return;
  if (summary.enumeration.fitting.empty())
    throw InputError(fmt::format("dtsim plan: none of the {} layouts fits or is valid (see the reasons with --format "
                                 "json); raise --workers or --global-batch, or pick a larger GPU",
                                 summary.enumeration.enumerated));
  print(a, summary, std::cout);
  if (summary.interrupted)
    throw Failure("interrupted: finished layouts are kept in --out; run the same command again to finish");
}

const CommandRegistrar registrar("plan", 35, [](CLI::App& root) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = root.add_subcommand(
      "plan", "Search a transformer's parallel layouts (tp, pp, vp, cp, ep, micro-batch, ZeRO, recomputation) on a "
              "number of GPUs and print the fastest (docs/layout-search.md)");
  add_scenario_flags(cmd, a->flags);
  cmd->add_option("--top", a->top, "Layouts printed, fastest first (default 10)");
  cmd->add_option("--max-candidates", a->max_candidates,
                  "Most layouts simulated per process; more needed to decide the --top fastest (with --exhaustive: "
                  "more that fit) is an error (default 2000)");
  cmd->add_flag("--exhaustive", a->exhaustive,
                "Simulate every layout that fits, not only those whose bound the --top fastest do not beat");
  cmd->add_option("--max-micro-batch", a->space.max_micro_batch, "Largest micro-batch tried (default 8)");
  cmd->add_option("--max-vp", a->space.max_vp, "Most virtual stages per pipeline rank tried (default 4)");
  cmd->add_option("--max-cp", a->space.max_cp, "Largest context parallelism tried (default 8)");
  cmd->add_option("--format", a->format, "table|csv|json");
  cmd->add_option("--out", a->out,
                  "Keep every simulated layout in DIR/results.jsonl and results.csv; a rerun skips those done");
  cmd->add_option("-j,--jobs", a->jobs, "Layouts simulated at once (child processes per rank)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet", a->quiet, "No progress line on stderr");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dtsim::apps
