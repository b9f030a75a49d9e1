// max_pool, avg_pool and global_avg_pool as nn.MaxPool2d, nn.AvgPool2d (ceil mode, count_include_pad
// as the layer says) and nn.AdaptiveAvgPool2d(1).
#include <torch/nn/modules/pooling.h>

#include "calibrate/torch/ops/driver_util.hpp"
#include "common/errors.hpp"

namespace dtsim::torch_ops::detail {

TorchOp build_pooling(const models::Layer& layer) {
  const auto& p = layer.params;
  switch (layer.op) {
    case models::OpKind::MAX_POOL:
      return module_op(layer,
                       torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions({p.kernel_h, p.kernel_w})
                                                .stride({p.stride_h, p.stride_w})
                                                .padding({p.pad_h, p.pad_w})
                                                .ceil_mode(p.ceil_mode)),
                       "nn.MaxPool2d");
    case models::OpKind::AVG_POOL:
      return module_op(layer,
                       torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions({p.kernel_h, p.kernel_w})
                                                .stride({p.stride_h, p.stride_w})
                                                .padding({p.pad_h, p.pad_w})
                                                .ceil_mode(p.ceil_mode)
                                                .count_include_pad(p.count_include_pad)),
                       "nn.AvgPool2d");
    case models::OpKind::GLOBAL_AVG_POOL:
      return module_op(layer, torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(1)),
                       "nn.AdaptiveAvgPool2d");
    default: throw InputError("layer '" + layer.name + "': the pooling driver takes max/avg/global_avg_pool only");
  }
}

}  // namespace dtsim::torch_ops::detail
