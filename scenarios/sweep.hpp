// Sweeps: expand a scenario's `sweep:` block (cartesian product and zipped lists over any field) into
// points, run them in parallel worker processes (and across MPI ranks), and keep every finished point
// on disk at once (results.jsonl + results.csv) so that an interrupted sweep resumes where it stopped.
// Implementation: sweep.cpp (expansion), sweep_run.cpp (running), src/result_store.* (the files),
// src/mpi_split.* (ranks); the worker processes are common/child.hpp's pool.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/yaml_util.hpp"
#include "sim/training.hpp"

namespace dtsim::scenarios {

// One swept field: a dotted path into the scenario map ("workers", "variability.jitter_cv") and its values.
struct SweepAxis {
  std::string field;
  std::vector<YAML::Node> values;
};

// The `sweep:` block: `product` axes are crossed; each `zip` group's axes advance together (equal
// lengths) and the groups are crossed with the product.
struct SweepSpec {
  std::vector<SweepAxis> product;
  std::vector<std::vector<SweepAxis>> zips;
  bool empty() const { return product.empty() && zips.empty(); }
};

// One point of a sweep: the scenario node with its fields replaced (the `sweep` key removed).
struct SweepPoint {
  std::size_t index = 0;                                        // position in expansion order
  std::vector<std::pair<std::string, std::string>> assignments;  // field -> canonical value text, axis order
  YAML::Node node;
  std::string key;  // "field=value;field=value" (axis order); "base" for a scenario without sweep
  std::string id;   // 16 hex digits: FNV-1a of the canonical text of the whole point node
  // What the point's figures depend on beyond its node: the build and the files it reads (stamp_points);
  // empty = not checked. A recorded point with other inputs is computed again on resume.
  std::string inputs;
};

// Parses a `sweep:` map (strict: keys product, zip); InputError with file:line for bad shapes.
SweepSpec parse_sweep(const YAML::Node& sweep, const yaml::Origin& origin);

// Expands `scenario` (a scenario map, optionally holding `sweep:`) with `spec` into points. An empty
// spec gives one point, the scenario itself. InputError when a dotted path crosses a non-map field.
std::vector<SweepPoint> expand_sweep(const YAML::Node& scenario, const SweepSpec& spec,
                                     const yaml::Origin& origin);

// Stable text of a node: maps with sorted keys, flow style, scalars verbatim.
std::string canonical_text(const YAML::Node& node);

// What running one point produced: descriptive labels (model, platform, strategy, batch, data) and
// one result row per simulated worker count.
struct PointOutcome {
  std::map<std::string, std::string> labels;
  std::vector<sim::PointResult> rows;
};

// Runs one point. Throws InputError/Failure; the sweep records the message and goes on.
using PointFunction = std::function<PointOutcome(const SweepPoint& point, const yaml::Origin& origin)>;

// The real point function: parse_scenario_node on the point node, then predict_scenario.
PointOutcome predict_point(const SweepPoint& point, const yaml::Origin& origin);
// Parses every point (without simulating) so that a bad field fails before anything runs.
void validate_points(const std::vector<SweepPoint>& points, const yaml::Origin& origin);
// The same, and sets each point's `inputs`: FNV-1a of dtsim's build id (common/build_id.hpp) and the
// contents of the files its prediction reads (platform file, model file, device catalog, calibration
// database, GPU kernel table, CPU thread-scaling table), so that a sweep resumed after any of them changed
// recomputes its points.
void stamp_points(std::vector<SweepPoint>& points, const yaml::Origin& origin);

struct SweepOptions {
  int jobs = 1;              // worker processes per rank (>= 1)
  std::string out_dir;       // results.jsonl + results.csv go here (created)
  bool progress = true;      // progress line on stderr
  bool retry_failed = false; // re-run points recorded with an error
  bool allow_mpi = true;     // split across ranks when launched by mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE)
  // Asked in the parent as each pending point's turn to start comes on this rank, after every result
  // that finished before it was recorded (on_record): true leaves the point out, unrun and unrecorded.
  std::function<bool(const SweepPoint&)> skip;
  // Called in the parent with each record this rank appends (status "ok" or "error").
  std::function<void(const SweepPoint&, const nlohmann::json& record)> on_record;
};

struct SweepSummary {
  std::size_t total = 0;     // points in the sweep
  std::size_t skipped = 0;   // already in results.jsonl
  std::size_t stale = 0;     // in results.jsonl from other inputs (another build, edited files): run again
  std::size_t ran = 0;       // finished in this run (on this rank, or all ranks on rank 0)
  std::size_t failed = 0;    // points whose record carries an error (whole sweep)
  std::size_t left_out = 0;  // pending points SweepOptions::skip left out (all ranks)
  bool interrupted = false;  // SIGINT/SIGTERM stopped the sweep; finished points are kept
  int mpi_ranks = 1;
  int mpi_rank = 0;
  std::string jsonl_path, csv_path;
};

// Runs the points not yet recorded in options.out_dir, `jobs` at a time, appending (with fsync) one
// JSON line and its CSV rows per finished point; on completion rewrites both files in point order.
SweepSummary run_sweep(const std::vector<SweepPoint>& points, const yaml::Origin& origin,
                       const SweepOptions& options, const PointFunction& run_point);

// The CSV header every sweep writes, given the sweep's fields (each becomes a "sweep.<field>" column):
// index, key, sweep.<field>..., the labels, status, one column per result field, error.
std::vector<std::string> sweep_csv_header(const std::vector<std::string>& fields);

}  // namespace dtsim::scenarios

namespace dtsim::scenarios {

// Makes the plots of a results directory or file by running plots/plot_results.py with
// $DTSIM_PYTHON (default /usr/bin/python3); `extra` are extra script arguments. Returns the files
// written (one per line, as the script prints them). Failure if the script fails.
std::string run_plots(const std::string& results, const std::string& out_dir,
                      const std::vector<std::string>& extra = {});
// Runs plots/plot_timeline.py on a trace written by `predict --trace`: timeline.png/svg in out_dir;
// returns the paths written. InputError for a missing or unreadable trace (exit code 2 of the script).
std::string run_timeline_plot(const std::string& trace, const std::string& out_dir,
                              const std::vector<std::string>& extra = {});

}  // namespace dtsim::scenarios
