// Validation mode: train a real network with MPI on this machine (dtsim-train), measure every phase,
// predict the identical run with dtsim's own calibration and simulation, and report the error.
// Method and figures: docs/validation.md.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace dtsim::validate {

struct ValidateOptions {
  // "dtsim": dtsim-train (oneDNN + MPI); "pytorch": validate/pytorch/train.py (eager PyTorch, DDP over
  // gloo), predicted from libtorch calibration with the pytorch-ddp framework profile.
  std::string framework = "dtsim";
  std::string model = "lenet5";
  std::vector<int> ranks{1, 2};
  int threads = 1;                 // OpenMP threads per rank
  int batch = 32;                  // per rank
  int iterations = 30;             // timed iterations per run
  int warmup = 3;                  // untimed iterations first
  std::string strategy = "allreduce-ring";  // or "ps" (rank 0 is the parameter server)
  std::string data = "fashion-mnist";       // or "synthetic"
  bool overlap = true;             // exchange buckets during backward
  double fusion_bytes = 64.0 * 1024 * 1024;
  double timeout_s = 300;          // per mpirun launch; a hung or dead run is killed after this
  bool predict = true;             // false: measure only
  std::string work_dir;            // where reports go; empty = a fresh directory under /tmp
  int side = 28;                   // image side (pytorch only; Fashion-MNIST is resized when not 28)
  int channels = 1;                // image channels (pytorch only; gray replicated)
  int seq_len = 0;                 // tokens per sequence (pytorch, GPT config.json models; 0 = n_positions)
  // The heap regime the trainer runs in and the libtorch calibration is timed in (pytorch only;
  // calibrate/allocator.hpp); "" = the default, what a plain script gets (glibc).
  std::string allocator;
  // pytorch with a GPT config.json: "dp" (data parallel over each --ranks entry), or a model-parallel layout
  // of 2 processes over gloo (validate/pytorch/model_parallel.py) beside dtsim's layout planner: "tp" (2-way
  // Megatron-style tensor parallelism, both ranks on the same `batch` sequences) or "pp" (2-stage 1F1B
  // pipeline over `micro_batches` micro-batches of batch / micro_batches sequences).
  // A diagnostic for a busy machine (as `dtsim calibrate check --unchecked`): calibrate without the disturbance
  // check, timing passes by process CPU time at 1 thread, so that the prediction can be set beside the
  // trainer's own CPU time when wall times are inflated.
  bool unchecked_calibration = false;
  std::string parallel = "dp";
  int micro_batches = 0;           // pp only; 0 = PP_DEFAULT_MICRO_BATCHES
};

// Micro-batches of a 2-stage pipeline when none are given: 2 x the stages, Megatron-LM's smallest
// recommended m = 2 pp (its bubble (pp - 1) / (m + pp - 1) is then 1/5 of the iteration).
inline constexpr int PP_DEFAULT_MICRO_BATCHES = 4;

// True when `model` names a Hugging Face config.json (a language model for the PyTorch trainer).
bool is_language_model(const std::string& model);

// One timed phase: measured median over the kept iterations and the prediction (negative = none).
struct PhaseFigures {
  double measured_ms = 0;
  double spread_pct = 0;           // inter-quartile range / median of the kept iterations
  double predicted_ms = -1;
  double error_pct() const;        // (predicted - measured) / measured x 100; 0 when either is missing
};

// Per-iteration figures of one trainer report, after the disturbance check.
struct MeasuredRun {
  int ranks = 0;
  int iterations_kept = 0;
  int iterations_rejected = 0;     // in windows where other processes used >= 15% of the machine
  bool clean = false;              // false: no window was clean, medians are over every iteration
  std::map<std::string, PhaseFigures> phases;  // "iteration", "data", "forward", "backward", "exchange", "update"
  double loss_first = 0, loss_last = 0;
  double test_accuracy_before = 0, test_accuracy_after = 0;
};

// Medians and spreads of a dtsim-train JSON report (text). Throws Failure when it is not one.
MeasuredRun summarize_report(const std::string& report_json);

// Latency and bandwidth fitted to this machine's MPI curves (dtsim-train --bench-comm).
struct CommFit {
  double pingpong_latency_s = 0, pingpong_bandwidth_Bps = 0;
  // Allreduce of 2 ranks read through the ring model t = 2(p-1) latency + 2(p-1)/p bytes / bandwidth.
  double allreduce_latency_s = 0, allreduce_bandwidth_Bps = 0;
  std::vector<std::pair<double, double>> allreduce_points;  // (bytes, seconds)
  std::vector<std::pair<double, double>> pingpong_points;
};
// Fits a --bench-comm report (text). Latency from the smallest message; bandwidth from a least-squares
// slope over messages of [around_bytes / 8, around_bytes x 8] (shared-memory MPI changes regime with the
// caches, so the fit is taken where the run's messages are), or over every message >= 256 KiB when
// around_bytes is 0. Throws Failure when the report is malformed or has too few points in the range.
CommFit fit_comm(const std::string& bench_json, double around_bytes = 0);

// This machine as a one-node dtsim platform: the `host` CPU device, shared-memory links with the latency
// and bandwidth of `fit` (an allreduce curve read through the ring model); unused links when !measured.
platforms::Platform localhost_platform(const CommFit& fit, bool measured);

// Where the predicted iteration goes on rank 0 (sim::Breakdown), in ms.
struct PredictedStructure {
  double compute_ms = 0;            // forward + backward + update
  double local_collectives_ms = 0;  // tensor-parallel collectives on the compute stream
  double bubble_ms = 0;             // the pipeline schedule's bubble on an ideal network
  double exposed_communication_ms = 0;  // the iteration less compute (collectives, transfers, bubble, waits)
};

struct ValidationRow {
  int ranks = 0;
  std::string layout = "dp";       // dp, tp or pp (ValidateOptions::parallel)
  MeasuredRun measured;
  double predicted_ms = -1;
  double error_pct = 0;
  PredictedStructure predicted;    // set with the prediction
  std::string prediction_note;     // how the prediction was made (profile coverage, fitted links)
};

struct ValidationReport {
  ValidateOptions options;
  std::vector<ValidationRow> rows;
  CommFit comm;
  bool comm_measured = false;
  std::vector<std::string> notes;  // disturbance, oversubscription, calibration coverage
};

// Runs everything: comm curves (when some run has >= 2 ranks), one training run per ranks entry, the
// on-the-spot calibration and the prediction. InputError for bad options; Failure when a run fails
// (a dead rank is reported with its rank and signal).
ValidationReport run_validation(const ValidateOptions& options);

// ----- PyTorch (validate/src/pytorch.cpp) ---------------------------------------------------------

// The interpreter of the PyTorch trainer: $DTSIM_PYTHON if set, else /usr/bin/python3.
std::string python_path();
// True when that interpreter imports torch and torchvision (python3-torch, python3-torchvision).
bool pytorch_available();
// run_validation for framework "pytorch": the same flow with train.py, libtorch calibration and the
// pytorch-ddp profile. Failure when PyTorch is missing or the torch model differs from dtsim's.
ValidationReport run_pytorch_validation(const ValidateOptions& options, const std::string& work_dir);
// run_pytorch_validation for --parallel tp|pp: one 2-process model-parallel run of train.py, libtorch
// calibration of what one rank computes (the tensor-parallel shard, or the model at the micro-batch for the
// pipeline's stages) and the prediction of dtsim's layout planner over the fitted gloo links.
ValidationReport run_pytorch_layout_validation(const ValidateOptions& options, const std::string& work_dir);

// ----- launching -----------------------------------------------------------------------------------

// The dtsim-train executable: $DTSIM_TRAIN if set, else next to the running executable.
std::string trainer_path();

// The mpirun command line for `ranks` processes of `threads` threads each running the trainer with
// `trainer_args` (run-as-root and oversubscribe flags included, no CPU binding).
std::vector<std::string> mpirun_command(int ranks, int threads, const std::vector<std::string>& trainer_args);

struct LaunchResult {
  int exit_code = 0;       // of mpirun
  bool timed_out = false;  // killed after timeout_s
  double wall_s = 0;
  std::string output;      // stdout and stderr together
};
// Runs a command (argv) in its own process group, capturing its output; after timeout_s the whole group
// is killed. Never throws for a non-zero exit: the caller decides.
LaunchResult run_command(const std::vector<std::string>& argv, double timeout_s);

// Runs the trainer under mpirun; on failure throws Failure with one line saying which rank died and how
// (from mpirun's own report), or that the run timed out.
std::string launch_trainer(int ranks, int threads, const std::vector<std::string>& trainer_args, double timeout_s);

}  // namespace dtsim::validate
