// What the simulator needs from calibration: per-layer forward/backward times of one worker on one
// device at one batch size, and the bytes of gradient each layer produces.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/allocator.hpp"
#include "calibrate/gpu_kernel_model.hpp"
#include "models/model.hpp"
#include "platforms/device.hpp"

namespace dtsim::calibrate {

struct LayerTime {
  std::string name;
  std::string op;                // models::to_string(OpKind)
  double fwd_s = 0;
  double bwd_data_s = 0;
  double bwd_weights_s = 0;
  std::int64_t grad_bytes = 0;   // gradient of this layer's parameters at the profile's precision (0 if none)
  bool measured = false;         // true when the host time came from a clean calibration entry
  int block = -1;                // transformer block (models::SeqParams::block), -1 outside blocks or for CNNs
  double bwd_s() const { return bwd_data_s + bwd_weights_s; }
};

struct ComputeProfile {
  std::string model;
  std::string device;
  int batch = 0;       // per worker
  int threads = 0;     // CPU threads per worker process (0 for GPUs)
  Precision precision = Precision::FP32;
  std::string compute_model;      // "kernel model (<fit>)" or "device model" (host efficiency carried over)
  std::vector<LayerTime> layers;  // forward (topological) order, input layer excluded
  double update_s = 0;            // optimizer (SGD with momentum) step over all parameters
  double anchor_factor = 1.0;     // multiplier applied to every time to match a measured throughput
  double coverage = 0;            // fraction of forward+backward time that came from measured entries
  // Where the forward+backward time came from: each source with its share of that time, largest first,
  // e.g. {"kernel model of v100-sxm2-16gb (fallback for h100-sxm5)", 0.93}, {"device model from this
  // host's measured entries", 0.07}. A kernel-model pass counts under the kernel model even when the host
  // has a measured entry of its shape (coverage counts it as measured: the host entry set its class).
  std::vector<std::pair<std::string, double>> sources;
  // Whose timings the host efficiencies came from: "onednn", or "libtorch" when asked for and the
  // database has a libtorch host (else "onednn", the fallback; coverage then counts oneDNN entries).
  std::string calibration_backend = "onednn";
  // The heap regime of that libtorch calibration ("glibc", ...); "" for oneDNN's.
  std::string calibration_allocator;
  // CPU: the database has this machine (same CPU model) at these threads and processes per node, so its
  // measured passes are used as timed, with no device model in between.
  bool same_machine = false;

  double fwd_s() const;
  double bwd_s() const;
  double step_compute_s() const;  // fwd + bwd + update
  std::int64_t grad_bytes() const;
};

struct ProfileOptions {
  int threads = 0;              // CPU: threads per worker process (0 = all cores of a socket / workers)
  int workers_per_node = 1;     // CPU: processes sharing a node's sockets and memory bandwidth
  int cpu_sockets = 1;          // CPU: sockets in the node
  std::string db_path;          // calibration database; empty = the default (see calibrate.hpp)
  std::optional<double> anchor_samples_per_s;  // measured single-worker throughput to match
  Precision precision = Precision::FP32;       // fp16-mixed: GPUs with FP16 tensor cores only
  // Calibration to take host times from: "onednn" (the kernels at their best) or "libtorch" (eager
  // PyTorch ops; framework profile pytorch-ddp). Without a libtorch host in the database, oneDNN's is used.
  std::string backend = "onednn";
  // The heap regime of the user's process (calibrate/allocator.hpp): selects the libtorch calibration
  // timed in it. oneDNN's calibration has no regime (its buffers are allocated outside the timed passes).
  std::string allocator = DEFAULT_ALLOCATOR;
};

// Predicts the per-layer times of `model` (built at the per-worker batch) on `device`, from the
// host's calibrated efficiency carried over by the device model (docs/calibration.md). Never needs a
// GPU; layers missing from the database use the op-class efficiency of the host (coverage tells).
// On a GPU the kernel model (gpu_kernel_model.hpp) times conv2d and fully_connected layers when it has
// coefficients for the device, and the tensor-kernel model times transformer (row) layers on a GPU with
// GEMM, attention and memory fits (docs/calibration.md §4d). InputError for fp16-mixed on a device without
// FP16 tensor cores.
ComputeProfile build_profile(const models::Model& model, const platforms::Device& device,
                             const ProfileOptions& options);

// Scales every time of `profile` so that batch / step_compute_s() == samples_per_s; sets anchor_factor.
void anchor_profile(ComputeProfile& profile, double samples_per_s);

// One line naming each source of the profile's compute time with its share, for prediction headers:
// "93% kernel model of v100-sxm2-16gb (fallback for h100-sxm5), 7% device model from this host's measured
// entries".
std::string describe_sources(const ComputeProfile& profile);

}  // namespace dtsim::calibrate
