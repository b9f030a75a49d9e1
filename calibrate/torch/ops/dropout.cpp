// dropout as nn.Dropout in training mode (a fresh Bernoulli mask every forward, as PyTorch draws it).
#include <torch/nn/modules/dropout.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_dropout(const models::Layer& layer) {
  return module_op(layer, torch::nn::Dropout(torch::nn::DropoutOptions(layer.params.dropout_ratio)), "nn.Dropout");
}

}  // namespace dtsim::torch_ops::detail
