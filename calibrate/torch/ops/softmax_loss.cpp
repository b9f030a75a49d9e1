// softmax_loss as F.cross_entropy (log_softmax + nll_loss, mean over the batch) against fixed labels:
// the loss an eager classifier step computes; backward starts from its scalar output.
#include <ATen/ATen.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_softmax_loss(const models::Layer& layer) {
  TorchOp op;
  op.srcs = make_srcs(layer);
  const auto& s = layer.src_shapes.front();
  const at::Tensor labels = at::arange(s.n, at::kLong).remainder(s.per_sample());
  op.forward = [labels](const std::vector<at::Tensor>& srcs) { return at::cross_entropy_loss(srcs.front(), labels); };
  op.impl = "F.cross_entropy";
  return op;
}

}  // namespace dtsim::torch_ops::detail
