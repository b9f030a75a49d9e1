// Running a sweep: the points not yet in the result store are run in a pool of child processes
// (common/child.hpp), split across MPI ranks (each rank runs every R-th pending point; rank 0 merges
// the ranks' part files), with a progress line and SIGINT/SIGTERM stopping cleanly.
#include <fmt/format.h>

#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"
#include "scenarios/src/mpi_split.hpp"
#include "scenarios/src/progress.hpp"
#include "scenarios/src/result_store.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
using nlohmann::json;

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// Installs SIGINT/SIGTERM handlers (without SA_RESTART, so poll() wakes up) for its lifetime.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

SweepSummary run_sweep(const std::vector<SweepPoint>& points, const yaml::Origin& origin,
                       const SweepOptions& options, const PointFunction& run_point) {
  if (options.jobs < 1) throw InputError(fmt::format("--jobs must be >= 1, got {}", options.jobs));
  if (options.out_dir.empty()) throw InputError("--out: an output directory is required");
  ResultStore store(options.out_dir, points);
  MpiSession mpi(options.allow_mpi);
  SweepSummary summary;
  summary.total = points.size();
  summary.mpi_ranks = mpi.size();
  summary.mpi_rank = mpi.rank();
  summary.jsonl_path = store.jsonl_path().string();
  summary.csv_path = store.csv_path().string();

  // Installed until the store is whole again: a stop signal during the final rewrite of the files
  // only marks the sweep interrupted, it cannot cut a rewrite short.
  StopSignals signals;
  // Rank 0 folds part files of an earlier (killed) MPI run into results.jsonl and drops torn lines.
  if (mpi.rank() == 0) (void)store.consolidate(false);
  mpi.barrier();

  // The pending points, as every rank sees them after the consolidation; this rank's share.
  // A point recorded from other inputs (another dtsim build, an edited platform, model or calibration
  // file) is run again, so that one sweep's table never mixes two models' figures.
  const std::map<std::string, std::string> done = store.done(options.retry_failed);
  std::vector<std::size_t> pending;
  for (const auto& p : points) {
    const auto it = done.find(p.id);
    const bool stale = it != done.end() && !p.inputs.empty() && it->second != p.inputs;
    if (it == done.end() || stale) pending.push_back(p.index);
    summary.stale += stale ? 1 : 0;
  }
  summary.skipped = points.size() - pending.size();
  if (summary.stale > 0 && options.progress && mpi.rank() == 0)
    std::cerr << fmt::format("sweep: {} recorded in {} came from other inputs (another dtsim build, or an "
                             "edited platform, model or calibration file); computing them again\n",
                             plural(static_cast<long long>(summary.stale), "point"), store.jsonl_path().string());
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(mpi.size())) == mpi.rank()) mine.push_back(pending[i]);

  Progress progress(options.progress, mpi.active() ? mine.size() : points.size(), mpi.active() ? 0 : summary.skipped,
                    "sweep", "points", mpi.active() ? fmt::format("[rank {}/{}] ", mpi.rank(), mpi.size()) : "");
  std::size_t left_out = 0;
  const std::size_t ran = run_process_pool(
      mine.size(), options.jobs,
      [&](std::size_t k) {
        const SweepPoint& p = points[mine[k]];
        PointOutcome outcome = run_point(p, origin);
        json rows = json::array();
        for (const auto& r : outcome.rows) rows.push_back(sim::to_json(r));
        json rec = ResultStore::point_record(p);
        rec["labels"] = outcome.labels;
        rec["status"] = "ok";
        rec["rows"] = rows;
        return rec.dump();
      },
      [&](std::size_t k, bool ok, const std::string& text) {
        const SweepPoint& p = points[mine[k]];
        json rec;
        if (ok) rec = json::parse(text, nullptr, false);
        if (!ok || rec.is_discarded()) {
          rec = ResultStore::point_record(p);
          rec["labels"] = json::object();
          rec["status"] = "error";
          rec["error"] = ok ? "worker returned unreadable output" : text;
          rec["rows"] = json::array();
          ok = false;
        }
        store.append(rec, mpi.rank());
        if (options.on_record) options.on_record(p, rec);
        progress.finished(!ok);
      },
      [] { return g_stop_signal != 0; },
      [&](std::size_t k) {
        if (!options.skip || !options.skip(points[mine[k]])) return false;
        ++left_out;
        progress.remove_total(1);
        return true;
      });
  summary.interrupted = g_stop_signal != 0;
  progress.end();
  summary.ran = ran;
  summary.left_out = left_out;

  if (mpi.active()) {
    summary.interrupted = mpi.allreduce_int(summary.interrupted ? 1 : 0, true) != 0;
    summary.ran = static_cast<std::size_t>(mpi.allreduce_int(static_cast<int>(ran), false));
    summary.left_out = static_cast<std::size_t>(mpi.allreduce_int(static_cast<int>(left_out), false));
  }
  if (mpi.rank() == 0) summary.failed = store.consolidate(!summary.interrupted);
  mpi.barrier();
  mpi.finalize();
  return summary;
}

}  // namespace dtsim::scenarios
