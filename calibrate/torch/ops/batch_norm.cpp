// batch_norm as nn.BatchNorm2d in training mode (batch statistics, running averages updated, affine).
#include <torch/nn/modules/batchnorm.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_batch_norm(const models::Layer& layer) {
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(layer.src_shapes.front().c).eps(layer.params.bn_epsilon));
  return module_op(layer, bn, "nn.BatchNorm2d");
}

}  // namespace dtsim::torch_ops::detail
