// The calibration loop every CPU backend shares (oneDNN, libtorch): the model's distinct passes,
// reuse of measured entries, byte-bounded windows timed interleaved, co-run copies, and a database
// save after each window. A backend supplies only how a window of passes is built and run.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "calibrate/calibrate.hpp"
#include "calibrate/database.hpp"
#include "calibrate/op_signature.hpp"
#include "models/model.hpp"

namespace dtsim::calibrate {

// One distinct pass to time: a layer's signature and pass, or the update (layer null).
struct CalibrationItem {
  std::string signature;
  Pass pass = Pass::FWD;
  const models::Layer* layer = nullptr;  // null for the update
};

// A backend's runners for one window of items, built in the thread that runs them.
class TimedWindow {
 public:
  virtual ~TimedWindow() = default;
  virtual std::size_t size() const = 0;
  virtual void prepare(std::size_t i) = 0;  // untimed, before each repeat (cache flush, a backward's forward)
  virtual void run(std::size_t i) = 0;      // the timed pass
  virtual std::string impl(std::size_t i) const = 0;
};

struct CalibrationBackend {
  std::function<bool(const models::Layer&)> times_layer;  // layers the backend has a driver for
  std::function<void()> set_threads;  // in a co-run thread, before it builds its window
  std::function<std::unique_ptr<TimedWindow>(const std::vector<const CalibrationItem*>&)> make_window;
};

// The threads of each copy (0 = every CPU) with the co-run copies checked against the CPUs;
// InputError naming --threads or --instances.
int calibration_threads(const CalibrateOptions& options);

// Times the model's passes that `db` lacks for `host` (`threads` each, options.instances copies) and
// stores them, saving after every window. `summary.db_path` is where the database is saved.
void run_calibration(const models::Model& model, const CalibrateOptions& options, const HostInfo& host, int threads,
                     CalibrationDb& db, CalibrateSummary& summary, const CalibrationBackend& backend);

}  // namespace dtsim::calibrate
