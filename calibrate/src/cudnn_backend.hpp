// Private to calibrate/ (built as the module libdtsim_cudnn.so only with DTSIM_HAVE_CUDNN): times a model's layer shapes with
// cuDNN and cuBLAS on the first GPU and records them in the database under the GPU's host key.
#pragma once
#include "calibrate/calibrate.hpp"

namespace dtsim::calibrate {

// Same contract as calibrate_model for backend "cudnn". Throws Failure("no GPU ...") when no CUDA
// device is usable (cudaGetDeviceCount / cudnnCreate fail).
CalibrateSummary calibrate_model_cudnn(const models::Model& model, const CalibrateOptions& options);

// The plugin's C entry point (libdtsim_cudnn.so), looked up with dlsym by calibrate_model.
using CudnnPluginEntry = void (*)(const models::Model*, const CalibrateOptions*, CalibrateSummary*);
inline constexpr const char* CUDNN_PLUGIN_SYMBOL = "dtsim_calibrate_model_cudnn";

}  // namespace dtsim::calibrate
