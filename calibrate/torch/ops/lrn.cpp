// lrn as nn.LocalResponseNorm (across channels; PyTorch composes it from pow, avg_pool3d and div).
#include <torch/nn/modules/normalization.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_lrn(const models::Layer& layer) {
  const auto& p = layer.params;
  torch::nn::LocalResponseNorm lrn(
      torch::nn::LocalResponseNormOptions(p.lrn_size).alpha(p.lrn_alpha).beta(p.lrn_beta).k(p.lrn_k));
  return module_op(layer, lrn, "nn.LocalResponseNorm");
}

}  // namespace dtsim::torch_ops::detail
