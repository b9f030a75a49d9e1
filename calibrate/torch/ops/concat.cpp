// concat as torch.cat over the channel dimension (backward: narrow views of the output gradient).
#include <ATen/ATen.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_concat(const models::Layer& layer) {
  TorchOp op;
  op.srcs = make_srcs(layer);
  op.forward = [](const std::vector<at::Tensor>& srcs) { return at::cat(srcs, 1); };
  op.impl = "torch.cat";
  return op;
}

}  // namespace dtsim::torch_ops::detail
