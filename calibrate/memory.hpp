// Training memory of one worker: weights, gradients, optimizer state, activations kept for backward and
// kernel workspace at a batch and precision, checked against a device's capacity (docs/calibration.md).
#pragma once
#include <string>

#include "calibrate/gpu_kernel_model.hpp"
#include "models/model.hpp"
#include "platforms/device.hpp"

namespace dtsim::calibrate {

struct MemoryEstimate {
  double weights_B = 0;      // FP32 weights; fp16-mixed adds the FP16 copy the kernels read
  double gradients_B = 0;    // one gradient per parameter at the precision's element size
  double optimizer_B = 0;    // SGD with momentum: one FP32 velocity per parameter (the dtsim default)
  double activations_B = 0;  // outputs that a backward pass reads (the input batch included)
  double workspace_B = 0;    // convolution workspace: the largest tensor of any one conv layer
  double runtime_B = 0;      // CUDA context and library handles (GPUs only)
  double total_B() const { return weights_B + gradients_B + optimizer_B + activations_B + workspace_B + runtime_B; }
};

// Memory of training `model` (built at the per-worker batch) at `precision` on `device`.
MemoryEstimate estimate_memory(const models::Model& model, Precision precision, const platforms::Device& device);

// Throws InputError with every figure when the estimate exceeds a GPU's memory capacity (CPUs, whose
// catalog capacity is the socket maximum, and devices with no stated capacity always pass).
void check_memory_fits(const MemoryEstimate& estimate, const models::Model& model, const platforms::Device& device);

// "weights 97.5 MiB, gradients ... = total 5.1 GiB": the figures on one line.
std::string describe(const MemoryEstimate& estimate);

}  // namespace dtsim::calibrate
