// The device model: carries the host's measured kernel efficiency (time vs the roofline bound of the
// op) to any CPU or GPU of the device catalog, plus a per-op overhead and, for CPUs, an Amdahl
// threads-per-process model fitted from 1- and N-thread calibration. Method: docs/calibration.md.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/database.hpp"
#include "calibrate/op_signature.hpp"
#include "platforms/device.hpp"

namespace dtsim::calibrate {

// What the device model knows about the calibration host, fitted once from a database.
// Thread scaling on a full node (docs/calibration.md, "Thread scaling on a full node"): the loss
// L(T) = T t(T) / t(1) of a CPU pass on T threads against one thread doing the same work, both with every core
// of the node busy, measured per shape and pass (shape_pass_key) and per op class
// (time-weighted) at a few thread counts (calibrate/data/thread_scaling.json, written by
// benchmarks/cpu_node_scaling_fit.py from benchmarks/cpu_node_scaling.py's records; each count from one node).
// Between measured counts L is linear in log2 T, beyond the widest it continues the last segment's slope, and
// it is never below 1. A row may lack a count (nullopt: that node did not time that shape); it interpolates over
// the counts it has.
struct ThreadScaling {
  using Row = std::vector<std::optional<double>>;  // L at each of `threads`, nullopt where not measured
  std::vector<int> threads;                        // ascending, the first 1
  std::map<std::string, Row> classes;              // class name ("conv") -> L at each of `threads`
  std::map<std::string, Row> shapes;               // shape key -> L at each of `threads`
  std::string source;                              // the nodes and libraries it was measured with
  // The calibration backend whose ops it measured ("libtorch": PyTorch's eager ops): it describes predictions
  // of a framework that runs them (ProfileOptions::backend), whatever calibration stands in for the host.
  std::string backend;
  bool empty() const { return threads.empty(); }
  // L(threads) of the shape `key` where measured, else of `op_class`, else nullopt.
  std::optional<double> loss(const std::string& key, OpClass op_class, double threads) const;
  // The shipped table ($DTSIM_THREAD_SCALING, else <data_dir>/calibrate/data/thread_scaling.json); empty when
  // the shipped file is absent. Throws InputError naming the file and field when it is malformed, and naming
  // the variable when $DTSIM_THREAD_SCALING names no file.
  static const ThreadScaling& builtin();
  // The file builtin() reads: $DTSIM_THREAD_SCALING, else <data_dir>/calibrate/data/thread_scaling.json.
  static std::string builtin_path();
  static ThreadScaling load(const std::string& path);
};

struct HostModel {
  HostInfo host;                                   // the host whose timings are used (empty when none)
  // Median efficiency (roofline time / measured time) per "class/pass", e.g. "conv/bwd_weights".
  std::map<std::string, double> class_efficiency;
  // Per class: a high percentile (90th) of the host efficiency, the reference "best shape" for GPUs.
  std::map<std::string, double> class_best_efficiency;
  // Per class: Amdahl parallel fraction fitted from 1-thread vs host.threads-thread timings, after
  // removing the co-run slowdown (what busy neighbour cores cost, not the software's serial part).
  std::map<std::string, double> parallel_fraction;
  // Per class: time of a 1-thread pass with every other core running the same work / alone
  // (calibrate --threads 1 --instances T). Absent: 1 (no co-run calibration).
  std::map<std::string, double> corun_slowdown;
  // Cores kept busy by that co-run calibration (its copies); 0 without one.
  int corun_cores = 0;
  // Batch-free signature + "|" + pass -> (batch, efficiency) of every measured batch (batch scaling rule).
  std::map<std::string, std::map<std::int64_t, double>> by_shape;
  bool has_host() const { return host.threads > 0 || !host.device_model.empty(); }
};

// Picks the database's host of `backend` ("onednn" or "libtorch") timed in heap regime `allocator` ("" for
// oneDNN; HostInfo::allocator) with the most measured (clean) passes (ties: more threads) and fits its model;
// an empty model when the database has no such host.
HostModel fit_host_model(const CalibrationDb& db, const std::string& backend = "onednn",
                         const std::string& allocator = "");

// Shared-hardware slowdown of a pass on a node of `cores` with `busy_cores` busy (its own threads
// included), given the co-run slowdown measured with every other core busy: 1 + (slowdown - 1) x the
// fraction of the other cores that are busy. 1 for a one-core node.
double corun_factor(double slowdown, int busy_cores, int cores);

// Efficiency of a measured pass on its host: roofline_s / (time_s - per-op overhead), in (0, 1].
double host_efficiency(const HostInfo& host, const PassEntry& entry);

// Where a worker runs: the device and, for CPUs, how many threads it uses and how many processes
// share the node's sockets (and so its memory bandwidth).
struct WorkerPlacement {
  int threads = 1;           // CPU threads of this worker
  int workers_per_node = 1;
  int cpu_sockets = 1;
};

// NUMA: a CPU worker whose threads do not fit in one socket spans s = ceil(threads / cores) sockets
// (ranks are pinned, so a worker that fits stays on one). With pages first-touched by the threads that
// write them, f = 1 - 1/s of its DRAM traffic lives on other sockets and crosses the socket links
// (device.socket_link_Bps per direction). Local DRAM and links work concurrently, so the memory time is
// the slower of B / bw and f B / (s L): this returns max(1, f bw / (s L)) (bw: the worker's DRAM share,
// L: its share of the links). 1 when the worker fits one socket or the device states no link figure.
double numa_memory_factor(const platforms::Device& device, const WorkerPlacement& placement);

// FP32 peak of a device: peak_flops when set, else cores x clock x SIMD lanes x FMA units x 2.
double device_peak_flops(const platforms::Device& device);
// Peak of one CPU core of `device` (0 for GPUs without core figures).
double device_core_peak_flops(const platforms::Device& device);

// Predicted time (s) of one pass of class `op_class` with `work`, on `device`, given the host
// efficiency `host_eff` of the same pass (measured, or the class fallback) and whether the pass was
// compute bound on the host. A CPU worker with more threads than the host's scales beyond them by the host's
// Amdahl fit, or by `scaling` where given (the framework's measured thread scaling; `shape_key`,
// shape_pass_key, finds the pass's own row). Throws InputError for a device with no peak
// or bandwidth.
double predict_pass_s(const HostModel& model, OpClass op_class, const PassWork& work, double host_eff,
                      bool host_compute_bound, const platforms::Device& device, const WorkerPlacement& placement,
                      const ThreadScaling* scaling = nullptr, const std::string& shape_key = "");

// Fallback efficiency of a class/pass when the database has no entry: the host's class median, else
// the documented default of the class.
double fallback_efficiency(const HostModel& model, OpClass op_class, Pass pass);

// Fixed cost (s) of one oneDNN primitive on a CPU worker of `threads` threads (call, fork, join barrier,
// per-thread set-up), paid however little work each thread gets: c(1) + k log2(threads), measured at 1 thread
// here and at 68 threads in DeepBench's KNL7250 sheet (docs/calibration.md, "Work per thread").
double cpu_region_s(int threads);

// Per-op overhead (s) on a device: kernel launch + framework dispatch on GPUs, cpu_region_s(threads) on CPUs.
double op_overhead_s(const platforms::Device& device, int threads = 1);

// Batch-free form of a signature ("src=32x64x56x56" -> "src=Nx64x56x56").
std::string strip_batch(const std::string& signature);
// Key of one pass of a shape at any batch: strip_batch(signature) + "|" + pass ("fwd", "bwd_data", ...), under
// which HostModel::by_shape and ThreadScaling::shapes keep it.
std::string shape_pass_key(const std::string& signature, std::string_view pass);

}  // namespace dtsim::calibrate
