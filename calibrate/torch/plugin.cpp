// The C entry point of libdtsim_torch.so (see plugin.hpp); exceptions propagate to calibrate_model.
#include "calibrate/torch/plugin.hpp"

extern "C" __attribute__((visibility("default"))) void dtsim_calibrate_model_libtorch(
    const dtsim::models::Model* model, const dtsim::calibrate::CalibrateOptions* options,
    dtsim::calibrate::CalibrateSummary* summary) {
  *summary = dtsim::calibrate::calibrate_model_libtorch(*model, *options);
}
