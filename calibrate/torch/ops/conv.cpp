// conv2d as nn.Conv2d (grouped, dilated, with or without bias): PyTorch's CPU convolution dispatch
// (mkldnn or its own kernels) forward, and convolution_backward for the input and weight gradients.
#include <torch/nn/modules/conv.h>

#include "calibrate/torch/ops/driver_util.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_conv(const models::Layer& layer) {
  const auto& p = layer.params;
  const std::int64_t in_c = layer.src_shapes.front().c;
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(in_c, p.out_channels, {p.kernel_h, p.kernel_w})
                             .stride({p.stride_h, p.stride_w})
                             .padding(std::vector<std::int64_t>{p.pad_h, p.pad_w})
                             .dilation({p.dilation_h, p.dilation_w})
                             .groups(p.groups)
                             .bias(p.bias));
  return module_op(layer, conv, "nn.Conv2d");
}

}  // namespace dtsim::torch_ops::detail
