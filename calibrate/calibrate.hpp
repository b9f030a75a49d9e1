// Calibration runs: time every distinct layer shape of a model at a batch with oneDNN (or cuDNN) and
// add what the database lacks, saving after every finished shape. Method: docs/calibration.md.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
  // Co-run calibration: this many copies of the work run at once, each with `threads` threads, and
  // copy 0 is timed while the others keep their cores busy with the same passes. 1 = alone.
  int instances = 1;
  std::string backend = "onednn";   // "onednn", "libtorch" (plugin, DTSIM_HAVE_TORCH) or "cudnn"
  std::string db_path;              // empty = default_db_path()
  // The heap regime of the timed passes (calibrate/allocator.hpp), libtorch only: "" = the default a plain
  // script gets (glibc). A preloaded allocator must be this process's malloc (LD_PRELOAD at start).
  std::string allocator;
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

// The database key parts of this machine for `backend` at `threads` x `instances` (CPU model, ISA,
// library).
HostInfo current_host(const std::string& backend, int threads, int instances = 1);

// Calibrates `model` (at its batch) and returns what was done. The database is loaded first (a
// corrupt one is an InputError and is left untouched) and saved atomically after every item.
CalibrateSummary calibrate_model(const models::Model& model, const CalibrateOptions& options);

// One round of the step check: the full step and the sum of its per-layer parts, timed back to back.
struct StepCheckRound {
  double step_s = 0;  // one full training step (median of the round's repeats)
  double sum_s = 0;   // sum over every layer and pass (duplicates counted) plus the update
};

struct StepCheck {
  std::vector<StepCheckRound> rounds;  // rounds in which every timing was undisturbed
  int rounds_rejected = 0;
  // Median, min and max of sum_s / step_s over the clean rounds (0 when none).
  double median_ratio() const;
  double min_ratio() const;
  double max_ratio() const;
  double median_step_s() const;
  double median_sum_s() const;
};

// The full training step of `model` built from the same oneDNN primitives as calibration (every
// forward in order, every backward in reverse, then the update) and each distinct (signature, pass)
// of it timed as calibrate times it (private caches evicted before each repeat), in `rounds`
// interleaved rounds: pairing step and parts in time cancels the slow drift of a shared machine.
StepCheck check_step_onednn(const models::Model& model, int threads, int rounds, const CleanTimerOptions& timer);

// Sum over every layer (duplicates included) and pass of the model's measured host times in `db` for
// `host_key`, plus the update: the step time the calibration predicts on the host itself.
// `missing` (optional) receives the number of items without a clean entry (their time counts 0).
double sum_measured_step_s(const models::Model& model, const CalibrationDb& db, const std::string& host_key,
                           int* missing = nullptr);

}  // namespace dtsim::calibrate
