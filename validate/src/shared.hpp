// The steps both validation flows (the oneDNN/MPI trainer and real PyTorch) share: reading a
// trainer's report, noting a disturbed or oversubscribed run, the on-the-spot calibration of this
// machine (alone and co-run) and setting a simulated point beside the measured phases.
// Private to validate/src.
#pragma once
#include <string>
#include <vector>

#include "calibrate/allocator.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/profile.hpp"
#include "models/model.hpp"
#include "sim/training.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {

// The simulated run: one warm-up iteration plus these (simulate_training reports the steady state).
constexpr int SIMULATED_ITERATIONS = 4;

// A trainer's output file as text. Failure when it cannot be read.
std::string read_text(const std::string& path);

// Appends the measured run of `row` to `report`, noting a disturbed run or oversubscribed CPUs
// (`unit`: "rank(s)" or "process(es)").
void add_measured_row(ValidationReport& report, ValidationRow row, int threads, const std::string& unit);

// Calibrates `model` on this machine with `backend` into the work directory's own database (unless
// DTSIM_CALIBRATION_DB names one and the calibration is checked; --unchecked-calibration: no co-run copies), then as co-run 1-thread copies, one per rank, where they fit; the
// timer is bounded so a busy machine cannot make validation run for long. Notes go to `report`
// ("<prefix>calibration: N <passes> ...", "<prefix>co-run calibration: ..."). Returns whether the
// co-run copies ran and the database path.
struct HereCalibration {
  std::string db_path;
  bool co_run = false;
};
HereCalibration calibrate_here(const models::Model& model, const ValidateOptions& options, const std::string& dir,
                               const std::string& backend, const std::string& prefix, const std::string& passes,
                               ValidationReport& report);

// PyTorch (pytorch.cpp): runs validate/pytorch/train.py with `args` in heap regime `allocator` (its
// environment), returning its output; Failure naming `what` with the trainer's last line when it fails or
// times out.
std::string run_trainer(const std::vector<std::string>& args, const calibrate::AllocatorRegime& allocator,
                        double timeout_s, const std::string& what);
// dtsim's layer table (name, parameters, output shape) for the trainer's --check-model.
void write_layer_table(const models::Model& model, const std::string& path);
// The gloo curves (train.py --bench-comm on 2 processes) fitted into report.comm.
void measure_gloo(ValidationReport& report, const calibrate::AllocatorRegime& allocator, const std::string& dir,
                  double timeout_s);

// Sets the predicted phases, iteration and error of `row` from a simulated point and its profile.
void set_prediction(ValidationRow& row, const calibrate::ComputeProfile& profile, const sim::PointResult& res,
                    std::string note);

}  // namespace dtsim::validate
