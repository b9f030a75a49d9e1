// A scenario: everything `dtsim predict` needs (model, platform, workers, strategy ...), from a YAML
// file (docs/scenario-schema.md) and/or command-line flags, plus an optional sweep block. The keys,
// flags, parsers and writers of its fields are one table (scenarios/fields.hpp).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/allocator.hpp"
#include "calibrate/gpu_kernel_model.hpp"
#include "common/yaml_util.hpp"
#include "sim/training.hpp"

namespace dtsim::scenarios {

struct Scenario {
  std::string name;         // file stem, or "cli"
  std::string description;
  std::string file;         // empty when built from flags only
  std::string model;        // zoo name or model file
  std::string platform;     // platform name or file
  std::vector<int> workers{1};
  int batch = 32;           // per worker
  int input_h = 0, input_w = 0, classes = 0;  // 0 = model defaults
  int threads = 0;          // CPU threads per worker (0 = cores / workers per node)
  // Transformers (docs/parallel-layouts.md): tokens per sequence (0 = the model's context), sequences per
  // micro-batch (0 = batch) and per iteration over the whole job (0 = one micro-batch per data-parallel
  // replica), fused (flash) attention. The layout itself is point.layout.
  int seq_len = 0;
  int micro_batch = 0;
  int global_batch = 0;
  bool flash_attention = true;
  int mlm_predictions = 0;  // BERT: positions per sequence the masked-LM head runs over (0 = all)
  std::vector<int> ps;      // one count, or one per workers entry; empty with ps_auto = search
  bool ps_auto = false;
  std::optional<double> anchor_samples_per_s;
  std::string db_path;      // calibration database (empty = default)
  std::string allocator = calibrate::DEFAULT_ALLOCATOR;  // heap regime of the process (calibrate/allocator.hpp)
  calibrate::Precision precision = calibrate::Precision::FP32;
  bool allow_oversubscribe = false;  // predict even when the memory estimate exceeds the GPU's memory
  // strategy, placement, fusion, cycle, data, iterations, variability ...; a user's defaults: the collective
  // library by precedence and the device-class variability (sim::default_training_point).
  sim::TrainingPoint point = sim::default_training_point();
  // "file:line" of each top-level field read from a file, so that errors found later (unknown
  // model, too many workers for the platform) name where the value came from; a flag that
  // overrides a field removes its entry.
  std::map<std::string, std::string> field_origin;
  bool operator==(const Scenario&) const = default;
};

// Mean bytes per ImageNet training sample for `data: real` when sample_bytes is not given: the
// ILSVRC2012 training archive is ~138 GB for 1,281,167 JPEG files (~108 KB each).
inline constexpr double IMAGENET_MEAN_SAMPLE_BYTES = 138e9 / 1281167.0;

// "1,2,4,8" -> {1,2,4,8}; InputError naming `flag` for empty items, non-integers or values < 1.
std::vector<int> parse_count_list(const std::string& text, const std::string& flag);
// Sets scenario.ps / ps_auto from "auto", "N" or "N1,N2,..." (InputError naming `flag`).
void set_ps_text(Scenario& scenario, const std::string& text, const std::string& flag);
// Checks cross-field consistency (ps list length vs workers, positive sizes); InputError naming the field.
void check_scenario(const Scenario& scenario);

// Parses a scenario map (strict schema). The key `sweep` is accepted and ignored here: sweeps
// (scenarios/sweep.hpp) expand it by editing copies of the node and parsing each copy.
Scenario parse_scenario_node(const YAML::Node& node, const yaml::Origin& origin);
// Loads a scenario file with parse_scenario_node.
Scenario load_scenario(const std::string& path);

// `ps: auto`: server counts whose throughputs are within this share of the best tie, and the fewest
// of them is chosen: 0.1%, the simulation's timing resolution (as explain.cpp's efficiency note).
inline constexpr double PS_TIE_TOLERANCE = 1e-3;

// How a prediction runs, not what it predicts: simulations at once (child processes, as a sweep's
// points) and whether `ps: auto`'s search shows a sweep-style progress line on stderr.
struct PredictOptions {
  int jobs = 1;
  bool progress = false;
};

// Predicts every workers entry of the scenario (searching the PS count when ps_auto), with
// efficiency relative to the 1-worker prediction; the points run `options.jobs` at a time and each
// (workers, servers) point is simulated once. Throws InputError for impossible set-ups.
std::vector<sim::PointResult> predict_scenario(const Scenario& scenario, const PredictOptions& options = {});

// Where the scenario's compute times come from: the calibration backend used (the framework's, or
// oneDNN when the database has none of it) and the share of forward+backward time from measured entries.
struct ComputeSource {
  std::string wanted;    // the framework's calibration ("onednn", "libtorch")
  std::string used;
  double coverage = 0;
  std::string model, device;
  int batch = 0;         // samples per pass (a transformer's micro-batch)
  std::string sources;   // calibrate::describe_sources of the profile
};
ComputeSource compute_source(const Scenario& scenario);

}  // namespace dtsim::scenarios
