// add as the tensor sum of its inputs (torchvision's residual `out += identity`, timed out of place
// because the timed inputs are autograd leaves).
#include <ATen/ATen.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_add(const models::Layer& layer) {
  TorchOp op;
  op.srcs = make_srcs(layer);
  op.forward = [](const std::vector<at::Tensor>& srcs) {
    at::Tensor dst = srcs.front() + srcs[1];
    for (std::size_t i = 2; i < srcs.size(); ++i) dst = dst + srcs[i];
    return dst;
  };
  op.impl = "torch.add";
  return op;
}

}  // namespace dtsim::torch_ops::detail
