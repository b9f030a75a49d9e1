// relu and tanh as nn.ReLU / nn.Tanh. torchvision's ResNets use ReLU(inplace=True); in-place on a
// timed leaf input is not allowed by autograd, so the out-of-place op is timed (same kernels and
// traffic but one more output allocation).
#include <torch/nn/modules/activation.h>

#include "calibrate/torch/ops/driver_util.hpp"
#include "common/errors.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_eltwise(const models::Layer& layer) {
  if (layer.op == models::OpKind::RELU) return module_op(layer, torch::nn::ReLU(), "nn.ReLU");
  if (layer.op == models::OpKind::TANH) return module_op(layer, torch::nn::Tanh(), "nn.Tanh");
  throw InputError("layer '" + layer.name + "': the eltwise driver takes relu or tanh only");
}

}  // namespace dtsim::torch_ops::detail
