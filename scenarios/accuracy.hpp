// Accuracy report: every throughput row of the published measurements (open-measurements.yaml)
// predicted by dtsim, with per-row error and the mean absolute percentage error per study.
#pragma once
#include <string>
#include <vector>

#include "common/yaml_util.hpp"

namespace dtsim::scenarios {

// One measured row and the scenario that reproduces it.
struct AccuracyRow {
  std::string study;     // key in open-measurements.yaml, e.g. "piz_daint_inception_v3"
  std::string variant;   // "synthetic" / "real"
  int workers = 0;
  int ps = 0;            // parameter servers used for the row (0 = not a PS row)
  std::string strategy;  // dtsim strategy name the row maps to
  std::string variable_update;  // the study's own name for the strategy
  double measured = 0;   // images/s, whole job
  double predicted = 0;  // images/s, filled by run_accuracy
  bool anchor = false;   // the row the prediction is anchored at (error 0 by construction; not in MAPE)
  std::string error;     // prediction failure message, empty when predicted
  YAML::Node scenario;   // the scenario map handed to parse_scenario_node
};

struct AccuracyStudy {
  std::string study, variant, source;
  int rows = 0;          // rows in the MAPE (anchor and failed rows excluded)
  double mape_pct = 0;
  double max_abs_error_pct = 0;
};

struct AccuracyOptions {
  std::string measurements;  // path; empty = <reference_dir()>/open-measurements.yaml (benchmarks/data)
  bool anchored = true;      // anchor each study/variant at its 1-worker row
  int jobs = 1;              // rows simulated at once
  std::string study;         // only this study (empty = all)
  int max_rows = 0;          // > 0: only the first N rows of each study (format checks)
};

// Reads the measurement file into rows with their scenarios (no prediction). InputError naming
// the file and row for malformed rows; studies without `rows` (facts) are skipped.
std::vector<AccuracyRow> load_accuracy_rows(const AccuracyOptions& options);

// Predicts every row (parallel worker processes) and returns the rows with predictions.
std::vector<AccuracyRow> run_accuracy(const AccuracyOptions& options);

// Error of one row in percent: 100 (predicted - measured) / measured.
double error_pct(const AccuracyRow& row);

// MAPE per (study, variant) and per study over all its variants (variant "all").
std::vector<AccuracyStudy> summarize_accuracy(const std::vector<AccuracyRow>& rows);

}  // namespace dtsim::scenarios
