// The durable store of a sweep's results: results.jsonl (one JSON record per finished point, the
// source of truth, appended with fsync) and results.csv (one row per simulated worker count, derived
// from the records), plus the per-rank part files of an MPI run. Private to scenarios/src.
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/sweep.hpp"
#include "sim/training.hpp"

namespace dtsim::scenarios {

// Largest results.jsonl line read: a point's record (its result rows, sim::MAX_RESOURCES_REPORTED
// resources each, the echoed point) is a few kilobytes; a larger line is not one dtsim wrote.
inline constexpr std::size_t SWEEP_RECORD_MAX_BYTES = 1 << 20;

// The results of one sweep in one output directory.
class ResultStore {
 public:
  // Opens (creating) `out_dir` for a sweep over `points`. InputError when it cannot be created.
  ResultStore(const std::filesystem::path& out_dir, const std::vector<SweepPoint>& points);

  const std::filesystem::path& jsonl_path() const { return jsonl_; }
  const std::filesystem::path& csv_path() const { return csv_; }

  // Folds part files of an MPI run into results.jsonl (one record per point, a success winning over
  // an error), drops torn lines and temporaries a killed run left, and rewrites results.csv; in point
  // order when `final_order`. Only one process (rank 0) may call it.
  // Returns the number of points whose record carries an error.
  std::size_t consolidate(bool final_order);

  // The recorded points (only the successful ones when `retry_failed`): id -> the inputs they were
  // computed from (SweepPoint::inputs; empty in a record written before inputs were stamped).
  std::map<std::string, std::string> done(bool retry_failed) const;

  // Appends one finished point's record (with fsync) to results.jsonl, or to the part file of
  // `rank` (> 0); rank 0 also appends its CSV rows.
  void append(const nlohmann::json& record, int rank);

  // The record of a point without its outcome (index, id, key, swept values).
  static nlohmann::json point_record(const SweepPoint& point);

 private:
  std::filesystem::path dir_, jsonl_, csv_, parts_;
  std::vector<std::string> fields_;            // swept fields, axis order
  std::map<std::string, std::size_t> index_of_;  // point id -> index
};

}  // namespace dtsim::scenarios
