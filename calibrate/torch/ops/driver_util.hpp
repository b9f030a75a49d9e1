// Private to calibrate/torch/ops: what every libtorch driver shares (input tensors, the module wrapper)
// and the declarations of the drivers listed in the table of registry.cpp.
#pragma once
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>

#include "calibrate/torch/torch_ops.hpp"

namespace dtsim::torch_ops::detail {

// Fills `t` in place with the calibrator's pattern (values in [-1, 1], never denormal).
void fill_pattern(at::Tensor& t);
// One input tensor per dtsim input of `layer`, in the sizes PyTorch uses for `layer.op`.
std::vector<at::Tensor> make_srcs(const models::Layer& layer);

// A TorchOp around a torch::nn module holder (Conv2d, Linear, ...): the module's parameters filled,
// forward = the module called on the first input.
template <class Holder>
TorchOp module_op(const models::Layer& layer, Holder holder, std::string impl) {
  TorchOp op;
  op.module = holder.ptr();
  op.srcs = make_srcs(layer);
  {
    at::NoGradGuard no_grad;
    for (auto& p : op.module->parameters()) fill_pattern(p);
  }
  op.forward = [holder](const std::vector<at::Tensor>& srcs) mutable { return holder->forward(srcs.front()); };
  op.impl = std::move(impl);
  return op;
}

// One driver per op kind (one file each under calibrate/torch/ops/).
TorchOp build_conv(const models::Layer& layer);
TorchOp build_inner_product(const models::Layer& layer);
TorchOp build_batch_norm(const models::Layer& layer);
TorchOp build_eltwise(const models::Layer& layer);
TorchOp build_pooling(const models::Layer& layer);
TorchOp build_lrn(const models::Layer& layer);
TorchOp build_softmax_loss(const models::Layer& layer);
TorchOp build_add(const models::Layer& layer);
TorchOp build_concat(const models::Layer& layer);
TorchOp build_dropout(const models::Layer& layer);
// Row (transformer) ops, all in rows.cpp.
TorchOp build_row_linear(const models::Layer& layer);
TorchOp build_row_layer_norm(const models::Layer& layer);
TorchOp build_row_rms_norm(const models::Layer& layer);
TorchOp build_row_attention(const models::Layer& layer);
TorchOp build_row_gelu(const models::Layer& layer);
TorchOp build_row_swiglu(const models::Layer& layer);
TorchOp build_row_residual_add(const models::Layer& layer);
TorchOp build_row_hidden_dropout(const models::Layer& layer);
TorchOp build_row_embedding(const models::Layer& layer);
TorchOp build_row_lm_head(const models::Layer& layer);

}  // namespace dtsim::torch_ops::detail
