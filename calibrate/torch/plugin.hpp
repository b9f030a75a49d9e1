// The libtorch calibrator's entry point (built as the module libdtsim_torch.so only with DTSIM_HAVE_TORCH,
// loaded with dlopen by calibrate_model for `--backend libtorch`, so that only that command loads the
// ~120 MB of libtorch). This header does not include libtorch.
#pragma once
#include "calibrate/calibrate.hpp"

namespace dtsim::calibrate {

// Same contract as calibrate_model for backend "libtorch": every distinct (signature, pass) of the model
// timed as an eager PyTorch training step runs it (module forward with autograd recording, backward
// through autograd for the input or the weight gradients, torch::optim::SGD step with momentum).
CalibrateSummary calibrate_model_libtorch(const models::Model& model, const CalibrateOptions& options);

using TorchPluginEntry = void (*)(const models::Model*, const CalibrateOptions*, CalibrateSummary*);
inline constexpr const char* TORCH_PLUGIN_SYMBOL = "dtsim_calibrate_model_libtorch";

}  // namespace dtsim::calibrate
