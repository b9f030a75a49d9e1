// fully_connected as nn.Linear on the flattened input (N x C*H*W): addmm forward, mm for both gradients.
#include <torch/nn/modules/linear.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_inner_product(const models::Layer& layer) {
  const auto& p = layer.params;
  torch::nn::Linear fc(torch::nn::LinearOptions(layer.src_shapes.front().per_sample(), p.out_channels).bias(p.bias));
  return module_op(layer, fc, "nn.Linear");
}

}  // namespace dtsim::torch_ops::detail
