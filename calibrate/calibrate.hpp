// Calibration runs: time every distinct layer shape of a model at a batch with oneDNN (or cuDNN) and
// add what the database lacks, saving after every finished shape. Method: docs/calibration.md.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "calibrate/database.hpp"
#include "common/clean_timer.hpp"
#include "models/model.hpp"

namespace dtsim::calibrate {

struct CalibrateProgress {
  int done = 0;            // work items finished (reused or timed)
  int total = 0;
  std::string signature;   // the item just finished
  std::string pass;
  bool reused = false;     // found in the database
  bool clean = true;       // false: stored as "disturbed"
};

struct CalibrateOptions {
  int threads = 0;                  // oneDNN threads; 0 = every online CPU
  std::string backend = "onednn";   // "onednn" or "cudnn"
  std::string db_path;              // empty = default_db_path()
  CleanTimerOptions timer;          // its `threads` is set from `threads`
  std::int64_t max_bytes = std::int64_t{6} << 30;  // tensors of one layer at most (memory guard)
  bool include_update = true;       // also time the SGD-momentum step over the model's parameters
  std::function<void(const CalibrateProgress&)> progress;  // called after each item
};

struct CalibrateSummary {
  std::string host_key;
  std::string db_path;
  int items = 0;       // (signature, pass) pairs the model needs
  int reused = 0;      // already measured in the database
  int timed = 0;       // timed now and clean
  int disturbed = 0;   // timed now, no clean block: stored as "disturbed", re-tried next run
  double wall_s = 0;
};

// The database key parts of this machine for `backend` at `threads` (CPU model, ISA, library).
HostInfo current_host(const std::string& backend, int threads);

// Calibrates `model` (at its batch) and returns what was done. The database is loaded first (a
// corrupt one is an InputError and is left untouched) and saved atomically after every item.
CalibrateSummary calibrate_model(const models::Model& model, const CalibrateOptions& options);

// Times one full training step of `model` built from the same oneDNN primitives: every layer's
// forward in order, then every backward pass in reverse order, plus the update (disturbance
// checked). Used to check that the sum of per-layer calibrated times matches the whole step.
TimingResult time_full_step_onednn(const models::Model& model, int threads, const CleanTimerOptions& timer);

// Sum over every layer (duplicates included) and pass of the model's measured host times in `db` for
// `host_key`, plus the update: the step time the calibration predicts on the host itself.
// `missing` (optional) receives the number of items without a clean entry (their time counts 0).
double sum_measured_step_s(const models::Model& model, const CalibrationDb& db, const std::string& host_key,
                           int* missing = nullptr);

}  // namespace dtsim::calibrate
