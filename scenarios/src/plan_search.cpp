// `dtsim plan` (scenarios/plan.hpp): enumerate a transformer's layouts on a GPU count, drop those that
// break a constraint or do not fit (predict's own checks and memory estimate, src/layout_fit.hpp),
// simulate the rest as a sweep (src/sweep_run.cpp: child processes, progress line, results.jsonl,
// resumable, MPI ranks) and rank them by tokens/s.
#include "scenarios/plan.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <functional>
#include <optional>
#include <queue>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "models/zoo.hpp"
#include "platforms/platform.hpp"
#include "scenarios/config.hpp"
#include "scenarios/src/layout_fit.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
namespace {

// Recomputation policies, lightest first: each adds forward work to the one before and changes nothing
// else the simulation plays, so a lighter policy that fits is never slower (docs/layout-search.md).
constexpr std::array<const char*, 3> RECOMPUTE_LIGHTEST_FIRST{"none", "selective", "full"};
constexpr const char* REASON_MEMORY = "does not fit in the GPU's memory";
constexpr const char* REASON_LIGHTER_RECOMPUTE = "dominated: a lighter recomputation of the same layout fits";
constexpr const char* REASON_ZERO2 = "dominated: ZeRO 1 fits with no more recomputation (ZeRO 2 runs the same collectives)";
constexpr const char* REASON_ZERO_DP1 = "ZeRO > 0 without data or context parallelism (dp x cp = 1) is ZeRO 0";
constexpr const char* REASON_BATCH = "global batch not a multiple of the data-parallel size";
// Relative margin under a candidate's bound before it counts as beaten: the simulator's clock sums the
// same seconds in another order (SimGrid's time steps), a rounding of a few ulps, far below this.
constexpr double BOUND_ROUNDING = 1e-9;

double fitting_bound(const PlanEnumeration& e, std::size_t i) { return e.fitting_bound_s[i]; }

std::vector<int> divisors(int n, int at_most) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(n, at_most); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// An InputError's message as a reason counted across candidates: the numbers taken out.
std::string reason_of(const std::string& message) {
  std::string out;
  for (std::size_t i = 0; i < message.size(); ++i) {
    // A number stands alone (not part of a name such as 'gpt2' or 'llama2_7b').
    const bool alone = i == 0 || !(std::isalnum(static_cast<unsigned char>(message[i - 1])) || message[i - 1] == '_');
    if (alone && std::isdigit(static_cast<unsigned char>(message[i]))) {
      while (i + 1 < message.size() && (std::isdigit(static_cast<unsigned char>(message[i + 1])) || message[i + 1] == '.'))
        ++i;
      out += 'N';
    } else {
      out += message[i];
    }
  }
  return out;
}

// What the enumeration needs from the unsharded model: transformer blocks and experts.
struct ModelShape {
  int blocks = 0;
  int experts = 0;
};

ModelShape model_shape(const Scenario& base) {
  models::ModelOptions mo;
  mo.batch = 1;
  mo.seq_len = base.seq_len;
  const models::Model model = models::load_model(base.model, mo);
  if (!model.has_rows())
    throw InputError(fmt::format("--model: dtsim plan searches transformer layouts; model '{}' is a CNN", model.name()));
  ModelShape shape;
  for (const auto& l : model.layers()) {
    if (!l.row) continue;
    shape.blocks = std::max(shape.blocks, static_cast<int>(l.params.seq.block) + 1);
    shape.experts = std::max(shape.experts, static_cast<int>(l.params.seq.experts));
  }
  return shape;
}

}  // namespace

std::string PlanCandidate::key() const {
  return fmt::format("tp={};pp={};vp={};cp={};ep={};mb={};zero={};recompute={}", layout.tp, layout.pp, layout.vp,
                     layout.cp, layout.ep, micro_batch, layout.zero, layout.recompute);
}

Scenario apply_candidate(const Scenario& base, const PlanCandidate& c) {
  Scenario s = base;
  const auto keep_order = s.point.layout.order;
  const auto keep_schedule = s.point.layout.schedule;
  s.point.layout = c.layout;
  s.point.layout.order = keep_order;
  s.point.layout.schedule = keep_schedule;
  s.point.layout.sequence_parallel = c.layout.tp > 1;
  s.micro_batch = c.micro_batch;
  return s;
}

namespace {

// The enumeration, with the shards' models and profiles kept in `cache` for the simulations after it.
PlanEnumeration enumerate_with(const Scenario& base, const PlanSpace& space, LayoutCache& cache) {
  if (base.workers.size() != 1)
    throw InputError(fmt::format("--workers: dtsim plan searches the layouts of one GPU count; got {} entries",
                                 base.workers.size()));
  if (base.global_batch < 1)
    throw InputError("--global-batch: dtsim plan needs the global batch (sequences per iteration over the whole job)");
  if (space.max_micro_batch < 1 || space.max_vp < 1 || space.max_cp < 1)
    throw InputError("--max-micro-batch, --max-vp and --max-cp must be >= 1");
  const int W = base.workers.front();
  const int G = base.global_batch;
  const ModelShape shape = model_shape(base);
  const platforms::Platform platform = platforms::load_platform(base.platform);
  const int per_node = base.point.workers_per_node > 0 ? base.point.workers_per_node : platform.default_workers_per_node();

  PlanEnumeration out;
  const auto drop = [&](const std::string& reason, std::size_t n = 1) {
    out.dropped[reason] += n;
    out.enumerated += n;
  };
  // predict's errors depend on tp, pp, vp, cp, ep and the micro-batch, not on the ZeRO stage or the
  // recomputation: the first error of such a combination stands for the rest of it.
  std::optional<std::string> combination_error;
  // The candidate's check: kept, dropped for memory, or dropped with predict's error.
  const auto fits = [&](const PlanCandidate& c) {
    if (combination_error) {
      drop(*combination_error);
      return false;
    }
    try {
      const LayoutFit fit = layout_fit(apply_candidate(base, c), &cache);
      out.capacity_B = std::max(out.capacity_B, fit.capacity_B);
      if (fit.capacity_B > 0 && fit.memory_B > fit.capacity_B) {
        drop(REASON_MEMORY);
        return false;
      }
      ++out.enumerated;
      out.fitting.push_back(c);
      out.fitting_memory_B.push_back(fit.memory_B);
      return true;
    } catch (const InputError& e) {
      combination_error = reason_of(e.what());
      drop(*combination_error);
      return false;
    }
  };
  const int recomputes = static_cast<int>(RECOMPUTE_LIGHTEST_FIRST.size());
  for (int tp : divisors(space.tp_within_node ? std::gcd(per_node, W) : W, W))
    for (int cp : divisors(W / tp, space.max_cp))
      for (int pp : divisors(W / (tp * cp), std::max(1, shape.blocks))) {
        const int dp = W / (tp * pp * cp);
        const int vp_max = pp > 1 ? std::min(space.max_vp, std::max(1, shape.blocks / pp)) : 1;
        const std::vector<int> eps = shape.experts > 0 ? divisors(dp, shape.experts) : std::vector<int>{1};
        const std::size_t per_batch = static_cast<std::size_t>(vp_max) * eps.size() * 4 * recomputes;
        if (G % dp != 0) {
          drop(REASON_BATCH, per_batch);
          continue;
        }
        for (int vp = 1; vp <= vp_max; ++vp)
          for (int ep : eps)
            for (int mb : divisors(G / dp, space.max_micro_batch)) {
              PlanCandidate c;
              c.layout.tp = tp;
              c.layout.pp = pp;
              c.layout.vp = vp;
              c.layout.cp = cp;
              c.layout.ep = ep;
              c.micro_batch = mb;
              combination_error.reset();
              int zero1_lightest = recomputes;  // index of ZeRO 1's lightest fitting policy
              for (int zero = 0; zero <= 3; ++zero) {
                c.layout.zero = zero;
                if (zero > 0 && dp * cp == 1) {  // ZeRO shards over the dp-cp group
                  drop(REASON_ZERO_DP1, recomputes);
                  continue;
                }
                for (int r = 0; r < recomputes; ++r) {
                  c.layout.recompute = RECOMPUTE_LIGHTEST_FIRST[static_cast<std::size_t>(r)];
                  if (zero == 2 && r >= zero1_lightest) {
                    drop(REASON_ZERO2, recomputes - r);
                    break;
                  }
                  if (fits(c)) {
                    if (zero == 1) zero1_lightest = r;
                    drop(REASON_LIGHTER_RECOMPUTE, recomputes - r - 1);
                    break;
                  }
                }
              }
            }
      }
  // Each kept candidate's bound on its iteration time (sim/layout_bound.hpp).
  for (const auto& c : out.fitting) out.fitting_bound_s.push_back(layout_lower_bound_s(apply_candidate(base, c), cache));
  return out;
}

}  // namespace

PlanEnumeration enumerate_layouts(const Scenario& base, const PlanSpace& space) {
  LayoutCache cache;
  return enumerate_with(base, space, cache);
}

PlanSummary run_plan(const Scenario& base, const PlanOptions& options) {
  if (options.top < 1) throw InputError(fmt::format("--top: must be >= 1, got {}", options.top));
  PlanSummary summary;
  LayoutCache cache;
  summary.enumeration = enumerate_with(base, options.space, cache);
  auto& e = summary.enumeration;
  if (!options.prune && e.fitting.size() > options.max_candidates)
    throw InputError(fmt::format("--max-candidates: {} layouts fit (of {} enumerated), more than {} to simulate; raise "
                                 "--max-candidates or narrow the space (--max-micro-batch, --max-vp, --max-cp)",
                                 e.fitting.size(), e.enumerated, options.max_candidates));
  if (e.fitting.empty()) return summary;
  // Candidates in increasing order of their bound (ties in enumeration order): the first are the ones
  // that may be fastest, and once the top N simulated all beat a candidate's bound, they beat every later one's.
  {
    std::vector<std::size_t> order(e.fitting.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return e.fitting_bound_s[a] < e.fitting_bound_s[b]; });
    PlanEnumeration sorted = e;
    for (std::size_t i = 0; i < order.size(); ++i) {
      sorted.fitting[i] = e.fitting[order[i]];
      sorted.fitting_memory_B[i] = e.fitting_memory_B[order[i]];
      sorted.fitting_bound_s[i] = e.fitting_bound_s[order[i]];
    }
    e = std::move(sorted);
  }
  const auto& fitting = e.fitting;

  // The candidates as a sweep over the layout fields of the base scenario (one zip group: each point
  // is one candidate), so that results.jsonl, resumption and MPI ranks are the sweep's.
  const yaml::Origin origin{base.file.empty() ? "dtsim plan" : base.file};
  const YAML::Node node = yaml::load_string(scenario_to_yaml(base), origin.file);
  std::vector<SweepAxis> zip;
  const auto axis = [&](const std::string& field, auto get) {
    SweepAxis a{field, {}};
    for (const auto& c : fitting) a.values.emplace_back(get(c));
    zip.push_back(std::move(a));
  };
  axis("tp", [](const PlanCandidate& c) { return c.layout.tp; });
  axis("pp", [](const PlanCandidate& c) { return c.layout.pp; });
  axis("vp", [](const PlanCandidate& c) { return c.layout.vp; });
  axis("cp", [](const PlanCandidate& c) { return c.layout.cp; });
  axis("ep", [](const PlanCandidate& c) { return c.layout.ep; });
  axis("sequence_parallel", [](const PlanCandidate& c) { return c.layout.tp > 1; });
  axis("micro_batch", [](const PlanCandidate& c) { return c.micro_batch; });
  axis("zero", [](const PlanCandidate& c) { return c.layout.zero; });
  axis("recompute", [](const PlanCandidate& c) { return c.layout.recompute; });
  SweepSpec spec;
  spec.zips.push_back(std::move(zip));
  auto points = expand_sweep(node, spec, origin);
  stamp_points(points, origin);

  // Without --out the results go to a fresh temporary folder, removed afterwards; MPI ranks share theirs
  // through --out.
  std::string dir = options.out_dir;
  const auto env_int = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : 0;
  };
  const bool under_mpi = std::max(env_int("OMPI_COMM_WORLD_SIZE"), env_int("PMI_SIZE")) > 1;
  if (dir.empty() && under_mpi)
    throw InputError("--out: under mpirun the ranks share their results through --out DIR (a folder all ranks see)");
  bool temporary = false;
  if (dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dtsim-plan-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Failure("dtsim plan: cannot create a temporary folder for results");
    dir = pattern;
    temporary = true;
  }
  // The recorded results of this search's points (from these inputs), by point index.
  std::map<std::string, std::size_t> index_of;
  for (const auto& p : points) index_of[p.id] = p.index;
  const auto recorded = [&](const nlohmann::json& rec) -> std::optional<std::size_t> {
    if (!rec.is_object() || !rec.contains("id") || !rec["id"].is_string() || rec.value("status", "") != "ok" ||
        !rec.contains("rows") || !rec["rows"].is_array() || rec["rows"].empty())
      return std::nullopt;
    const auto it = index_of.find(rec["id"].get<std::string>());
    if (it == index_of.end()) return std::nullopt;
    const std::string& inputs = points[it->second].inputs;
    if (!inputs.empty() && rec.value("inputs", inputs) != inputs) return std::nullopt;
    return it->second;
  };
  const auto read_records = [&](const std::string& path, const std::function<void(std::size_t, const nlohmann::json&)>& each) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const auto rec = nlohmann::json::parse(line, nullptr, false);
      if (const auto i = recorded(rec)) each(*i, rec);
    }
  };

  // Branch and bound (docs/layout-search.md "Pruning by bound"): the N = --top best throughputs known so
  // far (recorded before, or simulated now on this rank), the N-th best first.
  const double samples = static_cast<double>(base.global_batch);
  std::priority_queue<double, std::vector<double>, std::greater<>> best;  // the N largest, smallest on top
  std::vector<bool> known(points.size(), false);
  const auto learn = [&](std::size_t i, const nlohmann::json& rec) {
    if (known[i]) return;
    known[i] = true;
    best.push(sim::point_result_from_json(rec["rows"][0]).throughput);
    if (best.size() > options.top) best.pop();
  };
  // A candidate is left out when N simulated layouts all finish an iteration sooner than its bound: none
  // of it can then be in the top N. BOUND_ROUNDING absorbs the rounding of the simulator's clock.
  const auto beaten = [&](std::size_t i) {
    return best.size() >= options.top && best.top() > 0 &&
           samples / best.top() < fitting_bound(e, i) * (1 - BOUND_ROUNDING);
  };
  if (options.prune) read_records((std::filesystem::path(dir) / "results.jsonl").string(), learn);

  SweepOptions so;
  so.jobs = options.jobs;
  so.out_dir = dir;
  so.progress = options.progress;
  std::size_t launched = 0;
  so.skip = [&](const SweepPoint& p) {
    if (options.prune && beaten(p.index)) return true;
    return launched++ >= options.max_candidates;  // over the cap: left undecided (an error below)
  };
  so.on_record = [&](const SweepPoint& p, const nlohmann::json& rec) {
    if (options.prune)
      if (const auto i = recorded(rec); i && *i == p.index) learn(*i, rec);
  };
  // Each candidate is simulated in a child of this process, with the platform, models and profiles the
  // enumeration built: the same rows as predict_point gives its scenario node.
  const PointFunction simulate = [&](const SweepPoint& p, const yaml::Origin&) {
    const Scenario s = apply_candidate(base, fitting[p.index]);
    PointOutcome outcome;
    outcome.labels["model"] = s.model;
    outcome.labels["platform"] = platform_label(s.platform);
    outcome.labels["strategy"] = sim::to_string(s.point.strategy);
    outcome.labels["batch"] = std::to_string(s.batch);
    outcome.labels["data"] = s.point.input.data == sim::DataMode::REAL ? "real" : "synthetic";
    outcome.rows = predict_layout(s, cache);
    return outcome;
  };
  const SweepSummary run = run_sweep(points, origin, so, simulate);
  summary.simulated = run.ran;
  summary.skipped = run.skipped;
  summary.failed = run.failed;
  summary.interrupted = run.interrupted;
  summary.mpi_rank = run.mpi_rank;
  summary.jsonl_path = temporary ? "" : run.jsonl_path;
  if (run.mpi_rank == 0) {
    std::vector<bool> seen(points.size(), false);
    read_records(run.jsonl_path, [&](std::size_t i, const nlohmann::json& rec) {
      if (seen[i]) return;
      seen[i] = true;
      summary.ranked.push_back({fitting[i], sim::point_result_from_json(rec["rows"][0]), fitting_bound(e, i)});
    });
    std::stable_sort(summary.ranked.begin(), summary.ranked.end(),
                     [](const PlanRow& a, const PlanRow& b) { return a.result.tokens_per_s > b.result.tokens_per_s; });
    // The answer is exact when every candidate without a result has a bound that the N-th best beats
    // (whichever rank left it out, and why); errors are reported as failed, as a sweep's.
    std::vector<bool> failed(points.size(), false);
    {
      std::ifstream in(run.jsonl_path);
      std::string line;
      while (std::getline(in, line)) {
        const auto rec = nlohmann::json::parse(line, nullptr, false);
        if (!rec.is_object() || rec.value("status", "") != "error" || !rec.contains("id") || !rec["id"].is_string()) continue;
        if (const auto it = index_of.find(rec["id"].get<std::string>()); it != index_of.end()) failed[it->second] = true;
      }
    }
    const double nth = summary.ranked.size() >= options.top ? summary.ranked[options.top - 1].result.throughput : 0;
    std::size_t undecided = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (seen[i] || failed[i]) continue;
      const bool excluded = nth > 0 && samples / nth < fitting_bound(e, i) * (1 - BOUND_ROUNDING);
      if (excluded) ++summary.pruned;
      else ++undecided;
    }
    if (undecided > 0 && !summary.interrupted)
      throw InputError(fmt::format("--max-candidates: {} layouts simulated (at most {} per process) and {} more that "
                                   "fit could still be among the fastest {}; raise --max-candidates (with --out the "
                                   "simulated ones are kept)",
                                   summary.ranked.size(), options.max_candidates, undecided, options.top));
  }
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return summary;
}

std::string plan_reason(const std::vector<PlanRow>& ranked) {
  if (ranked.empty()) return "";
  const auto& best = ranked.front();
  const auto& b = best.result.breakdown;
  std::string text = fmt::format(
      "{} runs {:.0f} tokens/s (MFU {:.1f}%): per iteration of {} it spends {} in the pipeline bubble, {} in "
      "tensor/context/expert collectives, {} in exposed data-parallel communication and {} recomputing",
      best.candidate.key(), best.result.tokens_per_s, best.result.mfu * 100, human_seconds(best.result.iteration_time_s),
      human_seconds(b.bubble_s), human_seconds(b.local_collectives_s), human_seconds(b.exposed_after_backward_s),
      human_seconds(b.recompute_s));
  if (ranked.size() < 2) return text + ".";
  const auto& next = ranked[1];
  const auto& n = next.result.breakdown;
  // The runner-up's largest excess over the best, of the four costs.
  const std::array<std::pair<const char*, double>, 4> excess{{
      {"pipeline bubble", n.bubble_s - b.bubble_s},
      {"tensor/context/expert collectives", n.local_collectives_s - b.local_collectives_s},
      {"exposed data-parallel communication", n.exposed_after_backward_s - b.exposed_after_backward_s},
      {"recomputation", n.recompute_s - b.recompute_s},
  }};
  const auto most = std::max_element(excess.begin(), excess.end(),
                                     [](const auto& x, const auto& y) { return x.second < y.second; });
  const double ahead = next.result.tokens_per_s > 0 ? best.result.tokens_per_s / next.result.tokens_per_s - 1 : 0;
  text += fmt::format("; {:.1f}% ahead of the runner-up {} (iteration {}", ahead * 100, next.candidate.key(),
                      human_seconds(next.result.iteration_time_s));
  if (most->second > 0)
    text += fmt::format(", whose largest extra cost is {} more {}", human_seconds(most->second), most->first);
  else
    text += ", which is no worse in any of the four: the difference is in compute and the optimizer update";
  return text + ").";
}

}  // namespace dtsim::scenarios
